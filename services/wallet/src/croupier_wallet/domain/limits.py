"""Responsible-gaming limits: what they are, how a change takes effect, and the check at the debit.

Per player and currency (amounts in minor units of that currency):
  max_stake    the largest single reservation of stakes: the bets placed on a round, or one raise;
  daily_wager  the largest sum of stakes per UTC day;
  daily_loss   the largest net loss per UTC day.
Per player, for every currency: a self-exclusion until an instant, before which no stake is taken.

A day is the UTC calendar day (00:00 to 24:00 UTC). What it counts (DailyUsage, read from the
ledger in the transaction that holds the player's account locked):
  wagered   the player's stakes reserved that day; voided rounds left out;
  net_loss  what left the player's account through rounds that day -- stakes (an open round's in
            full: it may still be lost), a player-dealer's cover and commission -- minus what came
            back that day (payouts: stakes returned and winnings); voided rounds left out. Negative
            when the player is ahead: the day's winnings make room for more stakes.
A reservation of `amount` is refused, in this order, when the player is self-excluded
(until > now), when amount > max_stake, when wagered + amount > daily_wager, and when
net_loss + amount > daily_loss (the stake itself may be lost in full).

Changes follow the usual responsible-gaming convention. A player's change that makes a limit
stricter -- a lower amount, a new limit, a self-exclusion or a later end of one -- takes effect at
once and cancels any change still waiting; one that loosens it -- a higher amount, a removal, an
earlier end of a self-exclusion -- waits out the cooling-off period as a pending change (asking
again for the value already pending does not restart the wait). An operator's change takes
effect at once.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime, time, timedelta
from typing import Generic, TypeVar

from croupier_rules.money import money_text

from .errors import InvalidTransfer, LedgerError
from .ledger import MAX_AMOUNT

V = TypeVar("V", int, datetime)

MAX_STAKE = "max_stake"
DAILY_WAGER = "daily_wager"
DAILY_LOSS = "daily_loss"
AMOUNT_LIMITS = (MAX_STAKE, DAILY_WAGER, DAILY_LOSS)


class InvalidLimits(InvalidTransfer):
    """A limit or self-exclusion that cannot be set as asked: INVALID_ARGUMENT."""


class SelfExcluded(LedgerError):
    """A stake, or money added, while the player is self-excluded: FAILED_PRECONDITION."""

    reason = "SELF_EXCLUDED"

    def __init__(self, until: datetime, refused: str = "no stakes are taken") -> None:
        super().__init__(f"self-excluded until {_text(until)}: {refused} until then", metadata={"until": _text(until)})
        self.until = until


class LimitExceeded(LedgerError):
    """A stake over one of the player's limits: FAILED_PRECONDITION; `left` is what may still be staked."""

    reason = "LIMIT_EXCEEDED"

    def __init__(self, limit: str, cap: int, left: int, currency: str, message: str) -> None:
        super().__init__(message, metadata={"limit": limit, "cap": cap, "remaining": left, "currency": currency})
        self.limit = limit
        self.cap = cap
        self.left = left


@dataclass(frozen=True)
class Pending(Generic[V]):
    value: V | None  # None: the limit is removed, the exclusion ended
    effective_at: datetime


@dataclass(frozen=True)
class Setting(Generic[V]):
    """One limit: the value in force (None: none) and a loosening waiting out the cooling-off period."""

    value: V | None = None
    pending: Pending[V] | None = None

    def as_of(self, now: datetime) -> Setting[V]:
        """The setting with a pending change applied once it is due."""
        if self.pending is not None and self.pending.effective_at <= now:
            return Setting(self.pending.value)
        return self


@dataclass(frozen=True)
class ChangePolicy:
    cooling_off: timedelta
    at_once: bool = False  # an operator's change


def amount_loosens(current: int | None, new: int | None) -> bool:
    """No limit (None) is the loosest; a higher amount loosens."""
    return current is not None and (new is None or new > current)


def exclusion_loosens(current: datetime | None, new: datetime | None, now: datetime) -> bool:
    """Only a running exclusion can be loosened: by ending it, or ending it earlier."""
    return current is not None and current > now and (new is None or new < current)


def change_amount(setting: Setting[int], new: int | None, now: datetime, policy: ChangePolicy) -> Setting[int]:
    current = setting.as_of(now)
    return _change(current, new, now, policy, amount_loosens(current.value, new))


def change_exclusion(setting: Setting[datetime], new: datetime | None, now: datetime, policy: ChangePolicy) -> Setting[datetime]:
    current = setting.as_of(now)
    return _change(current, new, now, policy, exclusion_loosens(current.value, new, now))


def _change(current: Setting[V], new: V | None, now: datetime, policy: ChangePolicy, loosens: bool) -> Setting[V]:
    if policy.at_once or not loosens:
        return Setting(new)
    if current.pending is not None and current.pending.value == new:
        return current  # asked again: the wait is not restarted
    return Setting(current.value, Pending(new, now + policy.cooling_off))


def excluded_until(exclusion: Setting[datetime], now: datetime) -> datetime | None:
    """The end of the exclusion in force at `now`, or None."""
    until = exclusion.as_of(now).value
    return until if until is not None and until > now else None


@dataclass(frozen=True)
class CurrencyLimits:
    currency: str
    max_stake: Setting[int] = Setting()
    daily_wager: Setting[int] = Setting()
    daily_loss: Setting[int] = Setting()

    def setting(self, name: str) -> Setting[int]:
        return getattr(self, name)

    def with_setting(self, name: str, setting: Setting[int]) -> CurrencyLimits:
        return replace(self, **{name: setting})

    def as_of(self, now: datetime) -> CurrencyLimits:
        return CurrencyLimits(self.currency, *(self.setting(name).as_of(now) for name in AMOUNT_LIMITS))

    @property
    def daily(self) -> bool:
        """Whether a daily limit is set or pending (only then does a stake need the day's usage)."""
        return any(self.setting(n).value is not None or self.setting(n).pending is not None for n in (DAILY_WAGER, DAILY_LOSS))


@dataclass(frozen=True)
class DailyUsage:
    wagered: int = 0
    net_loss: int = 0


def utc_day(now: datetime) -> tuple[datetime, datetime]:
    """The UTC day holding `now`: [00:00, next 00:00)."""
    start = datetime.combine(now.astimezone(UTC).date(), time(0), tzinfo=UTC)
    return start, start + timedelta(days=1)


def check_stake(
    amount: int, currency: str, limits: CurrencyLimits, exclusion: Setting[datetime], usage: DailyUsage, now: datetime
) -> None:
    """Refuse a reservation of `amount` that breaks a limit in force at `now` (see the module's text)."""
    if (until := excluded_until(exclusion, now)) is not None:
        raise SelfExcluded(until)
    in_force = limits.as_of(now)
    stake = f"stakes of {money_text(amount, currency)}"
    if (cap := in_force.max_stake.value) is not None and amount > cap:
        most = money_text(cap, currency)
        raise LimitExceeded(MAX_STAKE, cap, cap, currency, f"{stake} exceed the maximum single stake of {most}; stake at most {most} at a time")
    reset = f"until {_text(utc_day(now)[1])} (00:00 UTC)"
    if (cap := in_force.daily_wager.value) is not None and usage.wagered + amount > cap:
        left = max(cap - usage.wagered, 0)
        raise LimitExceeded(
            DAILY_WAGER, cap, left, currency,
            f"{stake} exceed the daily wager limit of {money_text(cap, currency)}: {money_text(usage.wagered, currency)} "
            f"wagered today, {money_text(left, currency)} left {reset}",
        )  # fmt: skip
    if (cap := in_force.daily_loss.value) is not None and usage.net_loss + amount > cap:
        left = max(cap - usage.net_loss, 0)
        raise LimitExceeded(
            DAILY_LOSS, cap, left, currency,
            f"{stake} could exceed the daily loss limit of {money_text(cap, currency)}: net loss today "
            f"{money_text(usage.net_loss, currency)}, so at most {money_text(left, currency)} may be staked {reset}",
        )  # fmt: skip


def check_limit_amount(name: str, amount: int) -> int | None:
    """A requested amount: 0 removes the limit (None), else 1..MAX_AMOUNT minor units."""
    if type(amount) is not int or not 0 <= amount <= MAX_AMOUNT:
        raise InvalidLimits(
            f"{name} must be a whole number of minor units from 1 to {MAX_AMOUNT}, or 0 to remove the limit; not {amount!r}",
            fields={name: f"0-{MAX_AMOUNT}"},
        )
    return amount or None


def check_exclusion_end(until: datetime | None, now: datetime) -> datetime | None:
    if until is not None and until <= now:
        raise InvalidLimits(
            f"self_excluded_until {_text(until)} is not in the future (now {_text(now)}); send an empty value to end an exclusion",
            fields={"self_excluded_until": "in the future, or empty"},
        )
    return until


def _text(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat()
