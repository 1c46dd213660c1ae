"""Cursor pagination for every list call: page sizes and opaque page tokens, in one place.

A token is base64url of a version byte and the list's name and sort key (JSON), the key of the last
item returned. The next page starts after that key (keyset pagination on an ordered unique key, never
OFFSET): items inserted meanwhile neither shift a page nor repeat one. The list's name in the token
refuses a token of another list. Tokens are opaque to clients; they are not signed (a forged one names
only a position in the caller's own list, which it may read anyway).
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .errors import InvalidArgument

TOKEN_VERSION = 1
# A token this module gives is far shorter (a key is at most MAX_KEY_CHARS); a longer one is refused
# before it is decoded, so a crafted one costs its parser nothing (nor its depth a RecursionError).
MAX_TOKEN_CHARS = 1024


@dataclass(frozen=True)
class PageSize:
    """A list's page sizes: `default` when none is asked, at most `maximum`."""

    default: int
    maximum: int

    def of(self, page_size: int, limit: int = 0, what: str = "items") -> int:
        """The page size asked: page_size, or the older `limit` field (an alias) when page_size is 0."""
        asked, field = (page_size, "page_size") if page_size else (limit, "limit")
        if asked < 0 or asked > self.maximum:
            raise InvalidArgument(
                f"{field} {asked} is out of range; ask for 1-{self.maximum} {what} (0 means {self.default})",
                fields={field: f"0-{self.maximum}"},
            )
        return asked or self.default


def encode_page_token(list_name: str, key: Any) -> str:
    """The token of the page after the item whose sort key is `key` (JSON: str, int or a list of them)."""
    body = json.dumps([list_name, key], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(bytes([TOKEN_VERSION]) + body).decode().rstrip("=")


def decode_page_token(list_name: str, token: str, is_key: Callable[[Any], bool]) -> Any | None:
    """The sort key a page token carries (one `is_key` accepts); None for an empty token (the first page).
    InvalidArgument for a token this list did not give (garbled, of another version or of another list)."""
    if not token:
        return None
    try:
        if len(token) > MAX_TOKEN_CHARS:
            raise ValueError(f"longer than {MAX_TOKEN_CHARS} characters")
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        if not raw or raw[0] != TOKEN_VERSION:
            raise ValueError("unknown version")
        name, key = json.loads(raw[1:])
        if name != list_name:
            raise ValueError("another list's token")
        if not is_key(key):
            raise ValueError("not a position in this list")
    except (binascii.Error, ValueError, TypeError, UnicodeDecodeError, RecursionError) as exc:
        raise InvalidArgument(
            f"page_token is not one {list_name} gave ({exc}); pass next_page_token as it came, or leave it empty for the first page",
            fields={"page_token": f"a next_page_token of {list_name}, or empty"},
        ) from None
    return key


@dataclass(frozen=True)
class Page:
    """One page of a list and the token of the next ("" at the end)."""

    items: list[Any]
    next_page_token: str


# A forged token's key still reaches a query: within what the stores hold (BIGINT, text without NUL).
_INT64 = range(-(2**63), 2**63)
MAX_KEY_CHARS = 400


def is_int(key: Any) -> bool:
    return type(key) is int and key in _INT64


def is_str(key: Any) -> bool:
    return type(key) is str and len(key) <= MAX_KEY_CHARS and "\x00" not in key


def page_of(list_name: str, keyed_rows: Sequence[tuple[Any, Any]], size: int) -> Page:
    """The page from `keyed_rows` — (sort key, item) pairs in the list's order, up to size + 1 of them, as a
    query with LIMIT size + 1 gives — with a next token only when more follow (no empty last page)."""
    rows = list(keyed_rows)
    token = encode_page_token(list_name, rows[size - 1][0]) if len(rows) > size else ""
    return Page([item for _, item in rows[:size]], token)
