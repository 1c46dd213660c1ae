"""Signed requests to and from a casino's wallet (croupier_platform.signing): what is accepted, and each way
a request is refused — unsigned, wrong secret, body or request id changed, stale, replayed — plus a rotation."""

import pytest

from croupier_platform.signing import (
    REQUEST_ID_HEADER,
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    BadSignature,
    SignatureCheck,
    signed_headers,
)

SECRET, OLD_SECRET = b"s" * 32, b"o" * 32
BODY = b'{"transaction_id":"t1","amount_minor":100}'
NOW = 1_800_000_000.0


def check(*secrets: bytes) -> SignatureCheck:
    return SignatureCheck(list(secrets) or [SECRET], window_s=30, now=lambda: NOW)


def test_a_signed_request_is_accepted_once() -> None:
    receiver, headers = check(), signed_headers(SECRET, BODY, now=lambda: NOW)
    receiver.verify(headers, BODY)
    with pytest.raises(BadSignature, match="replay"):
        receiver.verify(headers, BODY)
    receiver.verify(signed_headers(SECRET, BODY, now=lambda: NOW), BODY)  # a retry is a new request: accepted


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (lambda h, b: ({k: v for k, v in h.items() if k != SIGNATURE_HEADER}, b), "not signed"),
        (lambda h, b: ({k: v for k, v in h.items() if k != REQUEST_ID_HEADER}, b), "not signed"),
        (lambda h, b: (h, b.replace(b"100", b"999")), "does not match"),
        (lambda h, b: ({**h, REQUEST_ID_HEADER: "another"}, b), "does not match"),
        (lambda h, b: ({**h, TIMESTAMP_HEADER: "soon"}, b), "Unix seconds"),
        (lambda h, b: (signed_headers(b"x" * 32, b, now=lambda: NOW), b), "does not match"),
        (lambda h, b: (signed_headers(SECRET, b, now=lambda: NOW - 31), b), "more than 30 s"),
        (lambda h, b: (signed_headers(SECRET, b, now=lambda: NOW + 31), b), "more than 30 s"),
    ],
)
def test_a_request_is_refused_when(change, why: str) -> None:  # noqa: ANN001
    headers, body = change(signed_headers(SECRET, BODY, now=lambda: NOW), BODY)
    with pytest.raises(BadSignature, match=why) as refused:
        check().verify(headers, body)
    assert SECRET.decode() not in str(refused.value)


def test_during_a_rotation_both_secrets_are_accepted() -> None:
    receiver = check(SECRET, OLD_SECRET)
    receiver.verify(signed_headers(OLD_SECRET, BODY, now=lambda: NOW), BODY)
    receiver.verify(signed_headers(SECRET, BODY, now=lambda: NOW), BODY)
