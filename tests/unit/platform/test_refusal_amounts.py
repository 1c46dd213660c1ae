"""Every refusal a player can meet names its amounts in the currency's units ("193.50 USD", "50.00 play
chips"), never in raw minor units: a walk over every ErrorReason of proto/croupier/v1/errors.proto. Each
reason whose message carries an amount is made here by the code that raises it; the others are listed
as carrying none, so a new reason must be placed in one list or the other."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from datetime import UTC, datetime

import pytest

from croupier_game.application.dealer_qualification import DealerQualification
from croupier_game.domain.catalogue import Catalogue
from croupier_game.config import DEFAULT_TABLES_FILE
from croupier_game.entrypoints.errors import handles_errors as game_errors
from croupier_platform.errors import Reason, refusal_for
from croupier_rules.commands import PlaceBets
from croupier_rules.game_registry import decider_for
from croupier_rules.money import money_text
from croupier_rules.table_config import table_for
from croupier_wallet.domain.errors import InsufficientFunds
from croupier_wallet.domain.ledger import check_amount
from croupier_wallet.domain.limits import CurrencyLimits, DailyUsage, Setting, check_stake
from tests.unit.game.fakes import FakeDealerPoints, FakeWallet

NOW = datetime(2025, 1, 1, 12, tzinfo=UTC)


def _bets(currency: str, bets: dict[str, int], game: str = "casino-war") -> Exception:
    decider = decider_for(game)
    return _raised(lambda: decider.decide(decider.initial_state(table_for(game, {"currency": currency})), PlaceBets(bets=bets)))


def _stake(amount: int, currency: str, usage: DailyUsage = DailyUsage(), **limits: int) -> Exception:
    settings = CurrencyLimits(currency, **{name: Setting(cap) for name, cap in limits.items()})
    return _raised(lambda: check_stake(amount, currency, settings, Setting(), usage, NOW))


def _dealer(balance: int, ante: int | None = None) -> Exception:
    entry = Catalogue.from_toml(DEFAULT_TABLES_FILE).get("war-p2p-iii-play")
    wallet, points = FakeWallet(), FakeDealerPoints()
    wallet.fund("dan", balance, "PLAY")
    points.points[("dan", "PLAY")] = 10_000
    dealers = DealerQualification(wallet, points)  # type: ignore[arg-type]
    if ante is None:
        return _raised(lambda: asyncio.run(dealers.require("dan", entry)))
    return _raised(lambda: asyncio.run(dealers.require_cover("dan", entry.config, "PLAY", ante)))


def _raised(call: Callable[[], object]) -> Exception:
    with pytest.raises(Exception) as raised:
        call()
    return raised.value


def _raise(error: Exception) -> Exception:
    return error


# reason -> cases: (the refusal, the amounts in minor units its message must name, their currency).
# Amounts like 19350 read differently in units ("193.50"), so a raw one left in a message shows.
WITH_AMOUNTS: dict[str, list[Callable[[], tuple[Exception, list[int], str]]]] = {
    "BET_BELOW_TABLE_MIN": [lambda: (_bets("USD", {"ante": 50}), [50, 100, 50_000], "USD")],
    "BET_ABOVE_TABLE_MAX": [lambda: (_bets("PLAY", {"ante": 61_300}), [61_300, 100, 50_000], "PLAY")],
    "INSUFFICIENT_FUNDS": [
        lambda: (_raise(InsufficientFunds(19_350, 40_600, "PLAY")), [19_350, 40_600], "PLAY"),
        lambda: (_raise(InsufficientFunds(19_350, 40_650, "USD", "the dealer's cover and commission")), [19_350, 40_650], "USD"),
    ],
    "LIMIT_EXCEEDED": [
        lambda: (_stake(6_150, "PLAY", max_stake=5_000), [6_150, 5_000], "PLAY"),
        lambda: (_stake(6_150, "USD", DailyUsage(wagered=4_350), daily_wager=9_999), [6_150, 9_999, 4_350, 5_649], "USD"),
        lambda: (_stake(6_150, "USD", DailyUsage(net_loss=4_350), daily_loss=9_999), [6_150, 9_999, 4_350, 5_649], "USD"),
    ],
    "BET_ABOVE_DEALER_COVER": [lambda: (_dealer(30_150, ante=35_000), [35_000], "PLAY")],  # the cap: from the metadata
    "DEALER_NOT_QUALIFIED": [lambda: (_dealer(41_350), [42_000, 41_350], "PLAY")],
    "INVALID_FIELD": [
        lambda: (_bets("USD", {"ante": -1_250}), [-1_250], "USD"),
        lambda: (_bets("USD", {"ante": 1_250}), [1_250, 100, 500, 2_500, 10_000], "USD"),  # not whole chips
        lambda: (_raised(lambda: check_amount(1_000_001, high=1_000_000, what="a play-money top-up", currency="PLAY")),
                 [1_000_001, 1_000_000], "PLAY"),
    ],
}
# Reasons whose messages name no amount (a phase, a round, a key, a date, a token, a table).
WITHOUT_AMOUNTS = {
    "MALFORMED_REQUEST", "SELF_EXCLUDED", "WRONG_PHASE", "ROUND_IN_PROGRESS", "ROUND_VOIDED", "ROUND_CLOSED",
    "ALREADY_SEATED", "WRONG_SEAT_ROLE", "DEALER_NOT_CONFIRMED", "NO_PREVIOUS_ROUND", "IDEMPOTENCY_KEY_REUSED",
    "ACTION_NOT_ALLOWED", "ROUND_NOT_FOUND", "TABLE_NOT_FOUND", "SEAT_NOT_FOUND", "NOT_FOUND", "TOKEN_MISSING",
    "TOKEN_INVALID", "TOKEN_EXPIRED", "PERMISSION_DENIED", "STREAM_LIMIT_REACHED", "STREAM_TOO_SLOW",
    "WATCH_POSITION_TOO_OLD", "CONCURRENT_CHANGE", "SERVICE_UNAVAILABLE", "ROUND_LOG_BROKEN", "INTERNAL",
    "DEADLINE_SPENT", "SHOE_MISMATCH", "SHOE_EXHAUSTED", "SHOE_NOT_REVEALED", "ROUND_NOT_CUT", "ROUND_MISMATCH",
    "RESERVATION_NOT_EXPIRED",
}
CASES = [(reason, case) for reason, cases in WITH_AMOUNTS.items() for case in cases]


def test_every_error_reason_is_walked():
    assert set(WITH_AMOUNTS) | WITHOUT_AMOUNTS == set(Reason.__members__)
    assert not set(WITH_AMOUNTS) & WITHOUT_AMOUNTS


@pytest.mark.parametrize(("reason", "case"), CASES, ids=[f"{reason}-{i}" for i, (reason, _) in enumerate(CASES)])
def test_a_refusal_names_its_amounts_in_the_currencys_units(reason, case):
    error, amounts, currency = case()
    refusal = refusal_for(game_errors.translate(error))  # as a client reads it
    assert refusal is not None and refusal.reason == reason, (refusal, error)
    for amount in amounts:
        assert money_text(amount, currency) in refusal.message, (money_text(amount, currency), refusal.message)
        raw = re.compile(rf"(?<![\d.,-]){abs(amount)}(?![\d.,])")
        assert not raw.search(refusal.message), f"raw minor units {amount} in: {refusal.message}"
    # Minor units stay numbers in the metadata, for a frontend to compute with; the message names each in units.
    for key in ("amount", "available", "cap", "remaining", "table_min", "table_max"):
        if key in refusal.metadata:
            assert re.fullmatch(r"-?\d+", refusal.metadata[key]), refusal.metadata
            assert money_text(int(refusal.metadata[key]), currency) in refusal.message, (key, refusal.message)


def test_play_money_is_named_as_players_know_it():
    assert (money_text(19_350, "PLAY"), money_text(19_350, "USD"), money_text(1_935, "JPY")) == (
        "193.50 play chips", "193.50 USD", "1,935 JPY"
    )
