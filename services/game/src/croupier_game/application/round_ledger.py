"""A round's wallet side, checked against what its log folds to: the half of `RoundCheck` (round_check.py)
that reads the wallet's transfers for the round.

The player's transfers: each stake once, one payout, the player's net equal to the settlement, a void
leaving the player at 0. With a player-dealer also the dealer's: one cover of the ante, the commission
charged once and the dealer's net as RoundSettled says, a void leaving the dealer at 0 and the house
nothing. What the wallet has not applied yet is a note while the round ended within the lag bound, a
violation past it. Nothing here does I/O.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from croupier_platform.events import EventRecord
from croupier_rules.events import BetsPlaced, DecisionMade, RoundEvent
from croupier_rules.round_decider import OVER_PHASES, RoundState

from ..domain.round import OVER_EVENTS, RoundOpened
from .ports import LedgerEntry

if TYPE_CHECKING:
    from .round_check import Replay

NOT_APPLIED = "wallet has not applied the {what} yet"
NOT_CHARGED = "commission not charged yet: the wallet still holds the dealer's commission hold"


@dataclass(frozen=True)
class LagBound:
    """How long after a round ended the other services may still be applying it (their consumers' lag; the
    game's reconciler re-drives it after its own, shorter, bound). Past it, a round over in the game and open
    elsewhere is a violation, no longer a note."""

    now: datetime
    seconds: float

    def overdue(self, ended_at: str) -> float | None:
        """Seconds since `ended_at` when past the bound, else None."""
        age = (self.now - datetime.fromisoformat(ended_at)).total_seconds()
        return age if age > self.seconds else None


def moved(entries: Iterable[LedgerEntry]) -> list[LedgerEntry]:
    """What the wallet moved for a round: its transfers less the reservations still pending (stakes, a
    player-dealer's cover and commission hold), which a PlaceBets under way makes before its events."""
    return [e for e in entries if e.status != "pending"]


def _net(entries: Iterable[LedgerEntry]) -> int:
    """The signed changes still standing (a released reservation counts nothing)."""
    return sum(e.amount for e in entries if e.status != "voided")



class LedgerChecks:
    """The wallet's checks of `RoundCheck`, which holds the round's records, its rules events and findings."""

    records: Sequence[EventRecord]
    rules: list[tuple[int, RoundEvent]]
    opened: tuple[int, RoundOpened] | None
    replay: Replay
    checks: dict[str, str]
    detailed: bool
    lag_bound: LagBound | None

    @property
    def head(self) -> int:
        return self.records[-1].version

    def say(self, version: int | None, problem: str) -> None:
        raise NotImplementedError

    def _check_ledger(self, state: RoundState, entries: list[LedgerEntry]) -> None:
        """The player's transfers (`_check_player`) and, at war-p2p with a player-dealer, the dealer's
        (`_check_dealer`); a transfer changing anyone else's balance is a violation."""
        if self.detailed:
            self.replay.report["ledger"] = [e.__dict__ for e in entries]
        assert self.opened is not None
        opened = self.opened[1]
        before = len(self.replay.findings)
        last = {type(e).__name__: v for v, e in self.rules}
        if strangers := sorted({e.player_id for e in entries} - {opened.player_id, opened.dealer_player_id}):
            self.say(None, f"wallet: transfers of the round change the balance of {', '.join(strangers)}, "
                           "who neither plays nor deals it")  # fmt: skip
        if state.phase not in OVER_PHASES:
            # The wallet acts only on a RoundSettled or RoundVoided of the log: money moved for a round
            # whose log has neither means the log lost its end.
            if closed := sorted({f"{e.kind} {e.status}" for e in moved(entries)}):
                self.say(self.head + 1, f"missing: the wallet moved the round's money ({', '.join(closed)}), but its log "
                                        f"ends {state.phase} at v{self.head}")  # fmt: skip
        mine = [e for e in entries if e.player_id == opened.player_id]
        if waiting := self._check_player(state, mine, last):
            if not self._overdue(f"the wallet has not applied the {waiting}: the round is over in the game and open in the wallet"):
                self.replay.notes.append(NOT_APPLIED.format(what=waiting))
            self.checks["wallet"] = f"{waiting} not applied yet"
            return
        charged = True
        if opened.dealer_player_id is not None:
            dealers = [e for e in entries if e.player_id == opened.dealer_player_id]
            charged = self._check_dealer(state, dealers, last)
        if len(self.replay.findings) > before:
            self.checks["wallet"] = "failed"
        else:
            self.checks["wallet"] = "ok" if charged else "commission not charged yet"

    def _overdue(self, problem: str) -> bool:
        """A violation naming the round's last RoundSettled/RoundVoided when the round ended longer ago than the
        lag bound (True), else nothing (False: the caller notes the lag)."""
        ended = next((r for r in reversed(self.records) if r.event_type in OVER_EVENTS), None)
        if self.lag_bound is None or ended is None:
            return False
        try:
            age = self.lag_bound.overdue(ended.occurred_at)
        except ValueError:
            return False  # an unreadable time: the chain check names the edited event
        if age is None:
            return False
        self.say(ended.version, f"{problem} {age:.0f} s after the round ended (bound {self.lag_bound.seconds:.0f} s)")
        return True

    def _check_player(self, state: RoundState, entries: list[LedgerEntry], last: dict[str, int]) -> str | None:
        """Each stake debited once, one payout at most, the player's net as the log says; a void at 0.
        Returns what the wallet has not applied yet ("settlement", "void"; None: nothing)."""
        # Each stake step of the log (the bets, then each decision that added stakes) is one stake transfer.
        steps = sorted([sum(e.bets.values()) for _, e in self.rules if isinstance(e, BetsPlaced)]
                       + [sum(e.added.values()) for _, e in self.rules if isinstance(e, DecisionMade) and e.added])  # fmt: skip
        # A stake reserved for a step the log does not hold (the losing side of a race) must be released:
        # one left over that is not voided is a violation once posted (while pending, the round's end releases it).
        live = Counter(abs(e.amount) for e in entries if e.kind == "stake" and e.status != "voided")
        released = Counter(abs(e.amount) for e in entries if e.kind == "stake" and e.status == "voided")
        unmatched = []
        for step in steps:  # each step one stake: live, or released (a round not settled)
            pool = live if live[step] else released if state.phase != "settled" and released[step] else None
            if pool is None:
                unmatched.append(step)
            else:
                pool[step] -= 1
        strays = sorted(abs(e.amount) for e in entries if e.kind == "stake" and e.status == "posted")
        posted_strays = sorted((Counter(strays) & live).elements())
        if unmatched or posted_strays:
            stakes = sorted(abs(e.amount) for e in entries if e.kind == "stake")
            self.say(None, f"wallet: stake transfers of {stakes or 'nothing'} are recorded for the round, "
                           f"its log staked {steps or 'nothing'} (each stake is debited once, any other released)")  # fmt: skip
        if (payouts := sum(1 for e in entries if e.kind == "payout")) > 1:
            self.say(None, f"wallet: {payouts} payouts to the player for the round; a round pays once")
        pending = any(e.kind == "stake" and e.status == "pending" for e in entries)
        net = _net(entries)
        staked = state.total_staked
        if state.phase == "settled":
            assert state.settlement is not None
            returned = sum(r.returned for r in state.settlement.results.values())
            if pending and not any(e.kind == "payout" and e.status != "voided" for e in entries):
                return "settlement"
            if net != returned - staked:
                self.say(last.get("RoundSettled"), f"the wallet moved {net:+} for the player, "
                                                   f"the round returns {returned} of {staked} staked ({returned - staked:+})")  # fmt: skip
        elif state.phase == "voided":
            if pending:
                return "void"
            if net != 0:
                self.say(last.get("RoundVoided"), f"the wallet left the player at {net:+} for the round, "
                                                  "a void must leave every balance as before (0)")  # fmt: skip
        return None

    def _check_dealer(self, state: RoundState, entries: list[LedgerEntry], last: dict[str, int]) -> bool:
        """A player-dealer's transfers: one cover of the ante (the player's largest win). Settled: the
        commission charged once, as RoundSettled says, and the dealer's net (the payout back less the
        cover and the commission) RoundSettled's dealer_net; while the commission hold is still pending
        (the commission service behind) a note, and the dealer's net the player's reversed.
        Voided: the dealer at 0 and nothing for the house. False when the commission is not charged yet."""
        ante = next((e.bets.get("ante", 0) for _, e in self.rules if isinstance(e, BetsPlaced)), 0)
        covers = [abs(e.amount) for e in entries if e.kind == "cover"]
        if covers != [ante] and (covers or state.phase != "voided"):  # voided with no cover: the dealer's balance refused it
            self.say(last.get("BetsPlaced"), f"wallet: the dealer's cover for the round is {covers or 'nothing'}, "
                                             f"one cover of the ante ({ante}) was due")  # fmt: skip
        hold = [e for e in entries if e.kind == "commission" and e.status == "pending"]
        charges = [e for e in entries if e.kind == "commission" and e.status == "posted"]
        # What the house keeps: the commission charged, less its reversal (the wallet's id for it is "<id>:reversal").
        charged = {e.transaction_id for e in charges}
        house = -sum(e.amount for e in entries if e.status == "posted" and e.transaction_id.removesuffix(":reversal") in charged)
        net = _net(e for e in entries if e not in hold)
        if state.phase == "settled":
            assert state.settlement is not None
            settled, settlement = last.get("RoundSettled"), state.settlement
            if len(charges) > 1:
                self.say(settled, f"wallet: the dealer's commission is charged {len(charges)} times; a round is charged once")
            if hold:
                if not self._overdue("the commission is not charged: the wallet still holds the dealer's commission hold "
                                     "of a round settled in the game"):  # fmt: skip
                    self.replay.notes.append(NOT_CHARGED)
                if net != (owed := -sum(r.net for r in settlement.results.values())):
                    self.say(settled, f"the wallet moved {net:+} for the dealer before the commission, "
                                      f"the round's player nets {-owed:+} (the dealer {owed:+})")  # fmt: skip
                return False
            if house != settlement.commission:
                self.say(settled, f"the wallet charged the dealer {house} commission, the round settled {settlement.commission}")
            if settlement.dealer_net is None:
                self.say(settled, "a player dealt the round, but it settled no dealer's net")
            elif net != settlement.dealer_net:
                self.say(settled, f"the wallet moved {net:+} for the dealer after the commission, "
                                  f"the round settled the dealer's net at {settlement.dealer_net:+}")  # fmt: skip
        elif state.phase == "voided":
            if left := _net(entries):
                self.say(last.get("RoundVoided"), f"the wallet left the dealer at {left:+} for the round, "
                                                  "a void must leave every balance as before (0)")  # fmt: skip
            if house:
                self.say(last.get("RoundVoided"), f"the house kept {house} commission from the round, a void leaves it nothing")
        return True
