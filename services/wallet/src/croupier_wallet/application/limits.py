"""Responsible-gaming limits: setting them (SetLimits), reading them (GetLimits), and the check a
stake passes at the debit (enforce_limits, called by WalletApp.reserve_stakes in its unit of work,
with the player's account locked). What the limits mean: domain/limits.py."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from croupier_platform.faults import retries_conflicts
from croupier_platform.runtime import Clock, iso

from croupier_wallet.domain.ledger import check_currency, check_id, parse_instant
from croupier_wallet.domain.limits import (
    AMOUNT_LIMITS,
    ChangePolicy,
    CurrencyLimits,
    DailyUsage,
    InvalidLimits,
    SelfExcluded,
    Setting,
    change_amount,
    change_exclusion,
    check_exclusion_end,
    check_limit_amount,
    check_stake,
    excluded_until,
    utc_day,
)

from .ports import StakeLimits, UnitOfWorkFactory, WalletUnitOfWork


@dataclass(frozen=True)
class LimitAmountView:
    amount: int  # 0: no limit
    change_pending: bool = False
    pending_amount: int = 0
    pending_effective_at: str = ""


@dataclass(frozen=True)
class CurrencyLimitsView:
    currency: str
    max_stake: LimitAmountView
    daily_wager: LimitAmountView
    daily_loss: LimitAmountView
    wagered_today: int
    net_loss_today: int
    day_ends_at: str


@dataclass(frozen=True)
class SelfExclusionView:
    until: str  # empty: not excluded
    change_pending: bool = False
    pending_until: str = ""
    pending_effective_at: str = ""


@dataclass(frozen=True)
class LimitsView:
    player_id: str
    currencies: list[CurrencyLimitsView]
    self_exclusion: SelfExclusionView
    cooling_off_seconds: int


def enforce_limits(uow: WalletUnitOfWork, player_id: str, currency: str, amount: int, now: datetime, stake_limits: StakeLimits) -> None:
    """Refuse a reservation that breaks a limit (SelfExcluded, LimitExceeded): `stake_limits`, read with the
    player's account (LedgerSession.lock_staker). The caller holds that account locked, so the day's usage
    read here cannot change before its debit commits."""
    limits, exclusion = stake_limits
    usage = uow.limits.daily_usage(player_id, currency, *utc_day(now)) if limits.daily else DailyUsage()
    check_stake(amount, currency, limits, exclusion, usage, now)


def refuse_if_self_excluded(uow: WalletUnitOfWork, player_id: str, now: datetime, refused: str) -> None:
    """Refuse (SelfExcluded, saying what is `refused` and until when) money added for a self-excluded player:
    a self-exclusion refuses top-ups and deposits as it refuses stakes (enforce_limits)."""
    if (until := excluded_until(uow.limits.self_exclusion(player_id), now)) is not None:
        raise SelfExcluded(until, refused)


class LimitsUseCases:
    def __init__(self, uow_factory: UnitOfWorkFactory, clock: Clock, cooling_off: timedelta) -> None:
        self._uow = uow_factory
        self._clock = clock
        self._cooling_off = cooling_off

    @retries_conflicts
    def set_limits(
        self, player_id: str, currency: str, amounts: Mapping[str, int], self_excluded_until: str | None, *,
        by: str, at_once: bool,
    ) -> LimitsView:
        """`amounts`: the limits to change (0 removes one); `self_excluded_until`: None leaves the
        exclusion as it is, "" ends it, else an ISO-8601 instant. `at_once`: an operator's change."""
        check_id("player_id", player_id)
        if unknown := sorted(set(amounts) - set(AMOUNT_LIMITS)):
            raise InvalidLimits(f"unknown limit {', '.join(unknown)}; limits are {', '.join(AMOUNT_LIMITS)}")
        if not amounts and self_excluded_until is None:
            raise InvalidLimits(f"name a limit to set: {', '.join(AMOUNT_LIMITS)} or self_excluded_until")
        if amounts:
            if not currency:
                raise InvalidLimits(
                    f"currency is required with {', '.join(sorted(amounts))}: a limit is in minor units of one currency",
                    fields={"currency": "required"},
                )
            check_currency(currency)
        now = self._clock()
        wanted = {name: check_limit_amount(name, amount) for name, amount in amounts.items()}
        until = None
        if self_excluded_until:
            until = check_exclusion_end(parse_instant(self_excluded_until, "self_excluded_until"), now)
        policy = ChangePolicy(self._cooling_off, at_once=at_once)
        with self._uow() as uow:
            exclusion = uow.limits.self_exclusion_for_update(player_id, iso(now), by)  # changes of one player take turns
            if self_excluded_until is not None:
                uow.limits.save_self_exclusion(player_id, change_exclusion(exclusion, until, now, policy), iso(now), by)
            if wanted:
                limits = uow.limits.limits(player_id, currency)
                for name, value in wanted.items():
                    limits = limits.with_setting(name, change_amount(limits.setting(name), value, now, policy))
                uow.limits.save_limits(player_id, limits, wanted, iso(now), by)
            return self._view(uow, player_id, now)

    def get_limits(self, player_id: str) -> LimitsView:
        check_id("player_id", player_id)
        now = self._clock()
        with self._uow.reading() as uow:
            return self._view(uow, player_id, now)

    def _view(self, uow: WalletUnitOfWork, player_id: str, now: datetime) -> LimitsView:
        limits = {limits.currency: limits for limits in uow.limits.all_limits(player_id)}
        currencies = sorted(set(limits) | {account.currency for account in uow.ledger.player_accounts(player_id)})
        start, end = utc_day(now)
        views = []
        for currency in currencies:
            in_force = limits.get(currency, CurrencyLimits(currency)).as_of(now)
            usage = uow.limits.daily_usage(player_id, currency, start, end)
            amounts = [_amount_view(in_force.setting(name)) for name in AMOUNT_LIMITS]
            views.append(CurrencyLimitsView(currency, *amounts, usage.wagered, usage.net_loss, iso(end)))
        exclusion = uow.limits.self_exclusion(player_id).as_of(now)
        until = excluded_until(exclusion, now)
        pending = exclusion.pending
        exclusion_view = SelfExclusionView(
            until=iso(until) if until else "", change_pending=pending is not None,
            pending_until=iso(pending.value) if pending and pending.value else "",
            pending_effective_at=iso(pending.effective_at) if pending else "",
        )  # fmt: skip
        return LimitsView(player_id, views, exclusion_view, int(self._cooling_off.total_seconds()))


def _amount_view(setting: Setting[int]) -> LimitAmountView:
    pending = setting.pending
    if pending is None:
        return LimitAmountView(setting.value or 0)
    return LimitAmountView(setting.value or 0, True, pending.value or 0, iso(pending.effective_at))
