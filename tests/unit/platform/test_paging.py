"""Page tokens round-trip their key, are opaque (base64url, no padding) and refuse what their list did not give."""

from __future__ import annotations

import base64

import pytest

from croupier_platform.errors import InvalidArgument
from tests.refusals import raises_reason
from croupier_platform.paging import TOKEN_VERSION, PageSize, decode_page_token, encode_page_token, is_int, is_str, page_of


def test_a_token_carries_its_lists_key_back() -> None:
    token = encode_page_token("ListThings", 42)
    assert "=" not in token and decode_page_token("ListThings", token, is_int) == 42
    assert decode_page_token("ListThings", "", is_int) is None
    assert decode_page_token("ListThings", encode_page_token("ListThings", "r-7"), is_str) == "r-7"


@pytest.mark.parametrize("token", [
    "%%%", "AQ", encode_page_token("ListOthers", 1), encode_page_token("ListThings", 2**63),
    encode_page_token("ListThings", "a\x00b"), encode_page_token("ListThings", "x" * 401),
])  # fmt: skip
def test_a_token_of_another_list_or_out_of_the_stores_range_is_refused(token: str) -> None:
    with raises_reason("INVALID_FIELD", InvalidArgument, match="page_token is not one ListThings gave"):
        decode_page_token("ListThings", token, lambda key: is_int(key) or is_str(key))


def _crafted(body: bytes) -> str:
    return base64.urlsafe_b64encode(bytes([TOKEN_VERSION]) + body).decode().rstrip("=")


@pytest.mark.parametrize("token", [
    _crafted(b"[" * 50_000 + b"]" * 50_000),  # deep enough for the JSON parser's RecursionError
    _crafted(b"[" * 400 + b"]" * 400),  # nested, short enough to be parsed
    _crafted(b'["ListThings","' + b"x" * 100_000 + b'"]'),
    "A" * 1_000_000,
])  # fmt: skip
def test_a_nested_or_oversized_token_is_refused_as_invalid_not_internal(token: str) -> None:
    with raises_reason("INVALID_FIELD", InvalidArgument, match="page_token is not one ListThings gave"):
        decode_page_token("ListThings", token, is_int)


def test_a_page_has_a_next_token_only_when_more_follow() -> None:
    rows = [(3, "c"), (2, "b"), (1, "a")]
    more = page_of("ListThings", rows, 2)
    assert more.items == ["c", "b"] and decode_page_token("ListThings", more.next_page_token, is_int) == 2
    assert page_of("ListThings", rows, 3).next_page_token == ""


def test_page_size_defaults_bounds_and_the_limit_alias() -> None:
    size = PageSize(default=10, maximum=100)
    assert (size.of(0), size.of(100), size.of(0, 7), size.of(5, 7)) == (10, 100, 7, 5)
    with raises_reason("INVALID_FIELD", InvalidArgument, match="page_size 101 is out of range; ask for 1-100 items"):
        size.of(101)
