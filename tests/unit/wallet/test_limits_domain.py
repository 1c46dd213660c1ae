"""The responsible-gaming rules alone (domain/limits.py), no storage: how a change takes effect and
which stakes the check lets through, over generated values."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from croupier_rules.money import money_text
from croupier_wallet.domain.limits import (
    DAILY_LOSS,
    DAILY_WAGER,
    MAX_STAKE,
    ChangePolicy,
    CurrencyLimits,
    DailyUsage,
    LimitExceeded,
    Pending,
    SelfExcluded,
    Setting,
    amount_loosens,
    change_amount,
    change_exclusion,
    check_stake,
    utc_day,
)
from tests.refusals import raises_reason

NOW = datetime(2025, 3, 10, 15, 30, tzinfo=UTC)
COOLING_OFF = timedelta(hours=24)
PLAYER = ChangePolicy(COOLING_OFF)
OPERATOR = ChangePolicy(COOLING_OFF, at_once=True)
NO_EXCLUSION: Setting[datetime] = Setting()

amounts = st.one_of(st.none(), st.integers(1, 10_000))  # None: no limit
offsets = st.integers(0, 3 * 24 * 3600).map(lambda s: timedelta(seconds=s))


@st.composite
def amount_settings(draw) -> Setting[int]:
    """A setting as it may be stored: a value, perhaps a loosening waiting (due or not)."""
    value = draw(amounts)
    if value is None or not draw(st.booleans()):
        return Setting(value)
    looser = draw(st.one_of(st.none(), st.integers(value + 1, 20_000)))
    # Asked at most a cooling-off ago or up to 36 h before: due already, or due within the period.
    asked = NOW - timedelta(seconds=draw(st.integers(0, 60 * 3600)))
    return Setting(value, Pending(looser, asked + COOLING_OFF))


@given(amount_settings(), amounts, offsets)
def test_a_players_stricter_limit_holds_at_once_and_a_looser_one_only_after_the_cooling_off(setting, new, later):
    current = setting.as_of(NOW)
    after = change_amount(setting, new, NOW, PLAYER)
    if not amount_loosens(current.value, new):
        assert after == Setting(new)  # at once, and any change still waiting is cancelled
        return
    assert after.pending is not None and after.pending.value == new
    assert after.value == current.value
    effective_at = after.pending.effective_at
    # Asked for the first time: the full period; asked again for what is already waiting: the wait goes on.
    first_time = current.pending is None or current.pending.value != new
    assert effective_at == (NOW + COOLING_OFF if first_time else current.pending.effective_at)
    assert NOW < effective_at <= NOW + COOLING_OFF
    moment = NOW + later
    assert after.as_of(moment).value == (new if moment >= effective_at else current.value)


@given(amount_settings(), amounts)
def test_an_operators_change_holds_at_once(setting, new):
    assert change_amount(setting, new, NOW, OPERATOR) == Setting(new)


@given(st.one_of(st.none(), offsets), st.one_of(st.none(), offsets), offsets)
def test_a_self_exclusion_is_lengthened_at_once_and_shortened_or_ended_only_after_the_cooling_off(current, new, later):
    current_until = NOW - timedelta(hours=12) + current if current is not None else None  # may be over already
    new_until = NOW + timedelta(seconds=1) + new if new is not None else None
    after = change_exclusion(Setting(current_until), new_until, NOW, PLAYER)
    running = current_until is not None and current_until > NOW
    if not running or (new_until is not None and new_until >= current_until):
        assert after == Setting(new_until)
    else:
        assert after == Setting(current_until, Pending(new_until, NOW + COOLING_OFF))
        assert after.as_of(NOW + later).value == (new_until if later >= COOLING_OFF else current_until)


stakes = st.lists(st.integers(1, 500), max_size=30)


@given(st.integers(1, 3_000), stakes)
def test_the_daily_wager_limit_lets_through_exactly_the_stakes_that_fit(cap, asked):
    limits = CurrencyLimits("PLAY", daily_wager=Setting(cap))
    wagered = 0
    for amount in asked:
        try:
            check_stake(amount, "PLAY", limits, NO_EXCLUSION, DailyUsage(wagered, wagered), NOW)
        except LimitExceeded as refused:
            assert wagered + amount > cap
            assert (refused.limit, refused.cap, refused.left) == (DAILY_WAGER, cap, cap - wagered)
            assert f"daily wager limit of {money_text(cap, 'PLAY')}" in str(refused) and f"{money_text(cap - wagered, 'PLAY')} left" in str(refused)
        else:
            assert wagered + amount <= cap
            wagered += amount
    assert wagered <= cap


@given(st.integers(1, 3_000), st.lists(st.tuples(st.integers(1, 500), st.integers(0, 1_500)), max_size=30))
def test_the_daily_loss_limit_counts_each_stake_as_lost_until_its_round_pays(cap, rounds):
    """Each round: a stake, then what it paid back. A stake is taken only when losing it in full
    keeps the day's net loss within the limit, so the net loss never passes it."""
    limits = CurrencyLimits("PLAY", daily_loss=Setting(cap))
    net_loss = 0
    for stake, returned in rounds:
        try:
            check_stake(stake, "PLAY", limits, NO_EXCLUSION, DailyUsage(0, net_loss), NOW)
        except LimitExceeded as refused:
            assert net_loss + stake > cap and refused.left == max(cap - net_loss, 0)
            continue
        assert net_loss + stake <= cap  # with the stake open, the worst case still fits
        net_loss += stake - returned
        assert net_loss <= cap


@given(st.integers(1, 1_000), st.integers(1, 2_000))
def test_the_maximum_single_stake(cap, amount):
    limits = CurrencyLimits("USD", max_stake=Setting(cap))
    if amount <= cap:
        check_stake(amount, "USD", limits, NO_EXCLUSION, DailyUsage(), NOW)
        return
    with raises_reason("LIMIT_EXCEEDED", LimitExceeded, match=f"stakes of {money_text(amount, 'USD')} exceed the maximum single stake of {money_text(cap, 'USD')}"):
        check_stake(amount, "USD", limits, NO_EXCLUSION, DailyUsage(), NOW)


def test_a_self_exclusion_refuses_every_stake_until_it_ends_and_says_until_when():
    until = NOW + timedelta(days=30)
    with raises_reason("SELF_EXCLUDED", SelfExcluded, match="self-excluded until 2025-04-09T15:30:00"):
        check_stake(1, "PLAY", CurrencyLimits("PLAY"), Setting(until), DailyUsage(), NOW)
    check_stake(1, "PLAY", CurrencyLimits("PLAY"), Setting(until), DailyUsage(), until)  # over at `until`


def test_the_refusals_come_in_order_exclusion_then_single_stake_then_wager_then_loss():
    limits = CurrencyLimits("PLAY", Setting(100), Setting(150), Setting(120))
    usage = DailyUsage(wagered=100, net_loss=100)
    with raises_reason("SELF_EXCLUDED", SelfExcluded):
        check_stake(500, "PLAY", limits, Setting(NOW + timedelta(seconds=1)), usage, NOW)
    for amount, limit in ((500, MAX_STAKE), (60, DAILY_WAGER), (30, DAILY_LOSS)):
        with raises_reason("LIMIT_EXCEEDED", LimitExceeded) as refused:
            check_stake(amount, "PLAY", limits, NO_EXCLUSION, usage, NOW)
        assert refused.value.limit == limit
    check_stake(20, "PLAY", limits, NO_EXCLUSION, usage, NOW)


def test_a_raise_waiting_out_its_cooling_off_is_not_yet_in_force_for_the_check():
    limits = CurrencyLimits("PLAY", max_stake=change_amount(Setting(100), 500, NOW, PLAYER))
    with raises_reason("LIMIT_EXCEEDED", LimitExceeded, match="maximum single stake of 1.00 play chips"):
        check_stake(200, "PLAY", limits, NO_EXCLUSION, DailyUsage(), NOW + COOLING_OFF - timedelta(microseconds=1))
    check_stake(200, "PLAY", limits, NO_EXCLUSION, DailyUsage(), NOW + COOLING_OFF)


@given(offsets)
def test_a_day_is_the_utc_calendar_day(offset):
    moment = NOW + offset
    start, end = utc_day(moment.astimezone(UTC))
    assert start <= moment < end and end - start == timedelta(days=1)
    assert (start.hour, start.minute, start.second, start.microsecond) == (0, 0, 0, 0) and start.tzinfo == UTC
