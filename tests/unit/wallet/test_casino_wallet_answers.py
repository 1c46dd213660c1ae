"""The one reply-classification table of the casino's wallet client (adapters/casino_wallet.classify): only
a 200 with status OK is applied; a definite refusal is never retried into a late yes; anything else is
unknown (a debit is rolled back, a credit sent again)."""

import pytest

from croupier_wallet.adapters.casino_wallet import Outcome, classify


@pytest.mark.parametrize(
    ("code", "body", "outcome", "status"),
    [
        (200, b'{"status":"OK","balance_minor":500,"currency":"USD"}', Outcome.ACCEPTED, "OK"),
        (200, b'{"status":"INSUFFICIENT_FUNDS","balance_minor":5}', Outcome.REFUSED, "INSUFFICIENT_FUNDS"),
        (200, b'{"status":"PLAYER_BLOCKED"}', Outcome.REFUSED, "PLAYER_BLOCKED"),
        (200, b'{"status":"TRANSACTION_ROLLED_BACK"}', Outcome.REFUSED, "TRANSACTION_ROLLED_BACK"),
        (401, b'{"status":"INVALID_SIGNATURE"}', Outcome.REFUSED, "INVALID_SIGNATURE"),
        (400, b'{"status":"BAD_REQUEST"}', Outcome.REFUSED, "BAD_REQUEST"),
        (200, b'{"status":"SOMETHING_NEW"}', Outcome.UNKNOWN, "SOMETHING_NEW"),  # not known to be a refusal
        (200, b'{"status":"OK"', Outcome.UNKNOWN, "HTTP_200"),  # cut short
        (200, b"[" * 100_000 + b"]" * 100_000, Outcome.UNKNOWN, "HTTP_200"),  # too deep to parse
        (500, b'{"status":"OK"}', Outcome.UNKNOWN, "HTTP_500"),  # 200 and OK, or nothing
        (503, b"", Outcome.UNKNOWN, "HTTP_503"),
        (502, b"<html>bad gateway</html>", Outcome.UNKNOWN, "HTTP_502"),
    ],
)
def test_each_answer_is_classified_once(code: int, body: bytes, outcome: Outcome, status: str) -> None:
    answer = classify(code, body)
    assert (answer.outcome, answer.status) == (outcome, status)


def test_a_refused_stake_names_the_casinos_reason_as_an_error_reason() -> None:
    assert classify(200, b'{"status":"LIMIT_REACHED"}').reason == "LIMIT_EXCEEDED"
    assert classify(200, b'{"status":"INSUFFICIENT_FUNDS"}').reason == "INSUFFICIENT_FUNDS"
    assert classify(200, b'{"status":"UNKNOWN_PLAYER"}').reason == "ACTION_NOT_ALLOWED"
