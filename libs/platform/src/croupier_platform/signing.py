"""Signed HTTP requests between Croupier and a casino's wallet (docs/operator-wallet.md, "Signing").

The caller sends, beside the raw JSON body, `X-Croupier-Timestamp` (Unix seconds), `X-Croupier-Request-Id`
(new for every attempt, a retry included) and
`X-Croupier-Signature: v1=<hex HMAC-SHA256(secret, "<timestamp>.<request id>.<raw body>")>`. The receiver
refuses a request whose signature is missing or wrong (compared in constant time), whose timestamp is more
than `window_s` away from its clock, or whose request id it has already accepted within the window (a
replay). A retry of a money call is a new request (new id, new signature) carrying the same transaction id:
the transaction id makes it idempotent, the request id makes a captured request useless to resend.
The raw bytes are signed, never re-serialised JSON, so both sides agree whatever their JSON libraries do.
One secret per integration; a receiver may accept a second one while secrets rotate.
"""

from __future__ import annotations

import hashlib
import hmac
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

TIMESTAMP_HEADER = "X-Croupier-Timestamp"
SIGNATURE_HEADER = "X-Croupier-Signature"
REQUEST_ID_HEADER = "X-Croupier-Request-Id"
SCHEME = "v1="
DEFAULT_WINDOW_S = 30


def signature(secret: bytes, timestamp: int, request_id: str, body: bytes) -> str:
    """The header value for `body` sent at `timestamp` as request `request_id`."""
    mac = hmac.new(secret, f"{timestamp}.{request_id}.".encode() + body, hashlib.sha256)
    return SCHEME + mac.hexdigest()


def signed_headers(secret: bytes, body: bytes, now: Callable[[], float] = time.time) -> dict[str, str]:
    """The headers of one attempt to send `body`: a fresh request id, the time, the signature over both and the body."""
    timestamp, request_id = int(now()), uuid.uuid4().hex
    return {TIMESTAMP_HEADER: str(timestamp), REQUEST_ID_HEADER: request_id, SIGNATURE_HEADER: signature(secret, timestamp, request_id, body)}


class BadSignature(Exception):
    """Why a request's signature is refused (the message names what, never the secret or the expected value)."""


@dataclass
class SignatureCheck:
    """The receiving side: `secrets` (the current one first, an old one during a rotation), the window, and
    the request ids accepted within it (bounded: a replay is only possible inside the window anyway)."""

    secrets: Sequence[bytes]
    window_s: int = DEFAULT_WINDOW_S
    now: Callable[[], float] = time.time
    max_remembered: int = 100_000
    _seen: OrderedDict[str, float] = field(default_factory=OrderedDict)

    def verify(self, headers: Mapping[str, str], body: bytes) -> None:
        """Raises BadSignature unless the request is signed with one of the secrets, fresh and new."""
        sent_at, request_id, sent = (headers.get(name) for name in (TIMESTAMP_HEADER, REQUEST_ID_HEADER, SIGNATURE_HEADER))
        if not sent_at or not request_id or not sent:
            raise BadSignature(f"the request is not signed: {TIMESTAMP_HEADER}, {REQUEST_ID_HEADER} and {SIGNATURE_HEADER} are required")
        try:
            timestamp = int(sent_at)
        except ValueError:
            raise BadSignature(f"{TIMESTAMP_HEADER} must be Unix seconds") from None
        now = self.now()
        if abs(now - timestamp) > self.window_s:
            raise BadSignature(f"the request's timestamp is more than {self.window_s} s from the receiver's clock")
        if not any(hmac.compare_digest(sent, signature(secret, timestamp, request_id, body)) for secret in self.secrets):
            raise BadSignature("the signature does not match the body, request id and timestamp")
        self._forget_older_than(now - self.window_s)
        if request_id in self._seen:
            raise BadSignature("this request id was already received (a replay); every attempt needs a new one")
        self._seen[request_id] = timestamp
        while len(self._seen) > self.max_remembered:
            self._seen.popitem(last=False)

    def _forget_older_than(self, oldest: float) -> None:
        while self._seen and next(iter(self._seen.values())) < oldest:
            self._seen.popitem(last=False)
