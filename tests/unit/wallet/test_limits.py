"""Responsible-gaming limits in the wallet's use cases, on a SQLite file and a clock the test moves:
a refused stake moves nothing, the day's usage is read from the ledger, the cooling-off holds.
tests/integration/wallet/test_limits_postgres.py runs this suite on PostgreSQL too."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta

import pytest

from croupier_wallet.adapters.sql_unit_of_work import SqlWalletUnitOfWorkFactory
from croupier_wallet.application.use_cases import WalletApp
from croupier_wallet.domain.errors import InvalidTransfer
from croupier_wallet.domain.limits import InvalidLimits, LimitExceeded, SelfExcluded
from croupier_wallet.entrypoints.consumers import RoundEventsConsumer
from tests.refusals import raises_reason

from .helpers import T0, Wallet, settled, voided

COOLING_OFF = timedelta(hours=24)
MIDDAY = T0 + timedelta(hours=12)  # 2025-01-01T12:00Z


class MovableClock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now

    def advance(self, delta: timedelta) -> None:
        self.now += delta


@dataclass
class Casino:
    wallet: Wallet
    app: WalletApp
    consumer: RoundEventsConsumer
    clock: MovableClock
    rounds: int = 0

    def stake(self, amount: int, player: str = "alice", currency: str = "PLAY", round_id: str | None = None):
        if round_id is None:
            self.rounds += 1
            round_id = f"r{self.rounds}"
        return self.app.reserve_stakes(f"{round_id}:{amount}", player, round_id, amount, currency, {"ante": amount})

    def settle(self, round_id: str, stake: int, returned: int) -> None:
        assert self.consumer.handle(settled(round_id, {"ante": (stake, returned)}))

    def limit(self, player: str = "alice", currency: str = "PLAY", until: str | None = None, operator: bool = False, **amounts):
        return self.app.limits.set_limits(player, currency, amounts, until, by="ops" if operator else player, at_once=operator)


@pytest.fixture
def casino(wallet: Wallet) -> Casino:
    clock = MovableClock(MIDDAY)
    uow = SqlWalletUnitOfWorkFactory(wallet.store)
    app = WalletApp(uow, clock, COOLING_OFF)
    wallet.app.top_up("alice", 100_000, "PLAY", "seed")
    return Casino(wallet, app, RoundEventsConsumer(app, uow), clock)


def refused(casino: Casino, error: type[Exception], amount: int, **kwargs) -> Exception:
    """The stake is refused with `error`, and the ledger is exactly as before: accounts, transfers,
    entries and ledger events."""
    before = casino.wallet.snapshot()
    with pytest.raises(error) as raised:
        casino.stake(amount, **kwargs)
    assert casino.wallet.snapshot() == before
    return raised.value


def test_a_stake_over_the_maximum_single_stake_is_refused_and_nothing_moves(casino):
    casino.limit(max_stake=500)
    casino.stake(500)
    error = refused(casino, LimitExceeded, 501)
    assert str(error) == "stakes of 5.01 play chips exceed the maximum single stake of 5.00 play chips; stake at most 5.00 play chips at a time"
    # Per reservation: a raise is a reservation of its own.
    casino.app.reserve_stakes("r1:raise", "alice", "r1", 500, "PLAY", {"raise": 500})


def test_the_daily_wager_limit_counts_todays_stakes_and_starts_again_at_midnight_utc(casino):
    casino.limit(daily_wager=1_000)
    casino.stake(600)
    casino.settle("r1", 600, 1_200)  # a win gives no room on the wager limit
    casino.stake(300)
    error = refused(casino, LimitExceeded, 200)
    assert "daily wager limit of 10.00 play chips: 9.00 play chips wagered today, 1.00 play chips left until 2025-01-02T00:00:00+00:00" in str(error)
    casino.stake(100)
    casino.clock.advance(timedelta(hours=12))  # 2025-01-02T00:00Z: a new day
    casino.stake(1_000)


def test_the_daily_loss_limit_counts_open_stakes_in_full_and_payouts_make_room(casino):
    casino.limit(daily_loss=1_000)
    casino.stake(700)  # open: may be lost in full
    error = refused(casino, LimitExceeded, 400)
    assert "could exceed the daily loss limit of 10.00 play chips: net loss today 7.00 play chips, so at most 3.00 play chips may be staked" in str(error)
    casino.settle("r1", 700, 1_400)  # won: net loss today -700
    casino.stake(1_700)
    refused(casino, LimitExceeded, 1)
    view = casino.app.limits.get_limits("alice").currencies[0]
    assert (view.wagered_today, view.net_loss_today) == (2_400, 1_000)


def test_a_voided_round_counts_for_nothing_toward_the_daily_limits(casino):
    casino.limit(daily_wager=1_000, daily_loss=1_000)
    casino.stake(800)
    assert casino.consumer.handle(voided("r1"))  # released
    casino.stake(900)
    casino.settle("r2", 900, 0)
    assert casino.consumer.handle(voided("r2", version=7))  # settled, then refunded
    casino.stake(1_000)
    view = casino.app.limits.get_limits("alice").currencies[0]
    assert (view.wagered_today, view.net_loss_today) == (1_000, 1_000)


def test_a_self_exclusion_refuses_every_currency_until_it_ends(casino):
    casino.wallet.app.deposit("alice", 5_000, "USD", "dep-1")
    casino.limit(until="2025-01-08T00:00:00Z")  # a player excludes themself: at once
    error = refused(casino, SelfExcluded, 100)
    assert str(error) == "self-excluded until 2025-01-08T00:00:00+00:00: no stakes are taken until then"
    refused(casino, SelfExcluded, 100, currency="USD")
    casino.clock.now = datetime.fromisoformat("2025-01-08T00:00:00+00:00")
    casino.stake(100)


def test_a_self_exclusion_refuses_top_ups_and_deposits_with_the_date_it_ends(casino):
    casino.limit(until="2025-01-08T00:00:00Z")
    before = casino.wallet.snapshot()
    with raises_reason("SELF_EXCLUDED", SelfExcluded) as top_up:
        casino.app.top_up("alice", 5_000, "PLAY", "top-1")
    assert str(top_up.value) == "self-excluded until 2025-01-08T00:00:00+00:00: no money is added to the account until then"
    with raises_reason("SELF_EXCLUDED", SelfExcluded, match="until 2025-01-08T00:00:00"):
        casino.app.deposit("alice", 5_000, "USD", "dep-1")
    assert casino.wallet.snapshot() == before
    casino.clock.now = datetime.fromisoformat("2025-01-08T00:00:00+00:00")  # over: money comes in again
    assert casino.app.top_up("alice", 5_000, "PLAY", "top-1").amount == 5_000


def test_a_player_may_not_end_a_self_exclusion_before_the_cooling_off(casino):
    casino.limit(until="2025-03-01T00:00:00Z")
    view = casino.limit(until="")  # asks to end it: waits a day
    assert view.self_exclusion.until == "2025-03-01T00:00:00.000000+00:00"
    assert view.self_exclusion.change_pending and view.self_exclusion.pending_until == ""
    assert view.self_exclusion.pending_effective_at == "2025-01-02T12:00:00.000000+00:00"
    casino.clock.advance(COOLING_OFF - timedelta(seconds=1))
    refused(casino, SelfExcluded, 100)
    casino.clock.advance(timedelta(seconds=1))
    casino.stake(100)
    assert casino.app.limits.get_limits("alice").self_exclusion.until == ""


def test_lowering_holds_at_once_raising_and_removing_wait_out_the_cooling_off(casino):
    casino.limit(max_stake=1_000)
    casino.limit(max_stake=200)  # lower: at once
    refused(casino, LimitExceeded, 300)
    view = casino.limit(max_stake=5_000)  # raise: in 24 h
    limit = view.currencies[0].max_stake
    assert (limit.amount, limit.change_pending, limit.pending_amount) == (200, True, 5_000)
    assert limit.pending_effective_at == "2025-01-02T12:00:00.000000+00:00"
    casino.clock.advance(timedelta(hours=6))
    casino.limit(max_stake=5_000)  # asked again: the wait is not restarted
    casino.clock.advance(timedelta(hours=17, minutes=59))
    refused(casino, LimitExceeded, 300)
    casino.clock.advance(timedelta(minutes=1))
    casino.stake(3_000)
    casino.limit(max_stake=0)  # remove: in 24 h too
    refused(casino, LimitExceeded, 6_000)
    casino.clock.advance(COOLING_OFF)
    casino.stake(6_000)
    assert casino.app.limits.get_limits("alice").currencies[0].max_stake.amount == 0


def test_a_stricter_limit_cancels_a_raise_still_waiting(casino):
    casino.limit(daily_wager=1_000)
    casino.limit(daily_wager=9_000)
    casino.limit(daily_wager=800)
    casino.clock.advance(COOLING_OFF)  # the raise to 9,000 is gone, not due
    casino.stake(800)
    refused(casino, LimitExceeded, 1)


def test_an_operators_change_holds_at_once_either_way(casino):
    casino.limit(max_stake=100, daily_loss=500)
    view = casino.limit(operator=True, max_stake=0, daily_loss=50_000)
    assert [(v.amount, v.change_pending) for v in (view.currencies[0].max_stake, view.currencies[0].daily_loss)] == [
        (0, False), (50_000, False)]  # fmt: skip
    casino.stake(20_000)
    casino.limit(until="2025-02-01T00:00:00Z")
    casino.limit(operator=True, until="")
    casino.stake(1)


def test_a_retried_stake_returns_its_reservation_even_under_a_limit_set_since(casino):
    first = casino.stake(700, round_id="r1")
    casino.limit(max_stake=100)
    assert casino.stake(700, round_id="r1") == first


def test_limits_are_per_currency_and_get_limits_shows_every_currency_held(casino):
    casino.wallet.app.deposit("alice", 5_000, "USD", "dep-1")
    casino.limit(currency="USD", max_stake=100)
    casino.stake(5_000)  # PLAY has no limit
    refused(casino, LimitExceeded, 101, currency="USD")
    view = casino.app.limits.get_limits("alice")
    assert [(c.currency, c.max_stake.amount, c.wagered_today) for c in view.currencies] == [("PLAY", 0, 5_000), ("USD", 100, 0)]
    assert view.currencies[0].day_ends_at == "2025-01-02T00:00:00.000000+00:00"
    assert view.cooling_off_seconds == 24 * 3600 and view.self_exclusion.until == ""


@pytest.mark.parametrize(
    ("currency", "until", "amounts", "message"),
    [
        ("PLAY", None, {}, "name a limit to set: max_stake, daily_wager, daily_loss or self_excluded_until"),
        ("", None, {"max_stake": 10}, "currency is required with max_stake"),
        ("play", None, {"max_stake": 10}, "currency 'play' is not allowed"),
        ("PLAY", None, {"daily_loss": -1}, "daily_loss must be a whole number of minor units from 1 to"),
        ("PLAY", None, {"daily_wager": 10**16}, "daily_wager must be a whole number"),
        ("PLAY", "2025-01-01T11:00:00Z", {}, "self_excluded_until 2025-01-01T11:00:00+00:00 is not in the future"),
        ("PLAY", "2025-02-30", {}, "self_excluded_until must be an ISO-8601 instant with its offset"),
        ("PLAY", "2025-02-01T00:00:00", {}, "self_excluded_until must be an ISO-8601 instant with its offset"),
    ],
)
def test_invalid_limits_are_refused_with_what_is_allowed_and_change_nothing(casino, currency, until, amounts, message):
    with raises_reason("INVALID_FIELD", InvalidTransfer, match=re.escape(message)):
        casino.limit(currency=currency, until=until, **amounts)
    assert casino.app.limits.get_limits("alice").currencies[0].max_stake.amount == 0


def test_invalid_limits_raise_the_limits_error(casino):
    with raises_reason("INVALID_FIELD", InvalidLimits):
        casino.limit(max_stake=-5)
