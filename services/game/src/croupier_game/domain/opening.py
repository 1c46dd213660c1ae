"""How a round opens (PlaceBets, Rebet): the rules take the bets, then the events that open the round.

The application takes these steps in order (application/play.py, `PlayUseCases._open_round`):
1. `take_bets`: the table the round is played at (a player-dealer's: commission charged) and the
   rules' verdict on the bets (limits, chips, auto-adjust); a refusal here moves no money;
2. the dealer's cover checked, the stakes and the cover reserved (the wallet);
3. the shoe committed and cut (the shuffler, the dealer);
4. `Opening.events`, recorded in one transaction, with `Opening.voided` after them when the money
   or the shoe could not be had, or the seat changed meanwhile: the wallet then releases what it
   reserved through the same events as any void. The round is built from what made them
   (`OpeningEvents.round`), not parsed from them again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from croupier_platform.errors import InvalidArgument
from croupier_rules.commands import PlaceBets, VoidRound
from croupier_rules.round_decider import RoundState
from croupier_rules.game_registry import decider_for
from croupier_rules.events import EVENT_TYPES, BetsPlaced, RoundEvent
from croupier_rules.table_config import TableConfig, WarP2PTable

from .catalogue import TableEntry
from .recorded import Draft, Recorded
from .transactions import bets_stake_id
from .round import ROUND_OPENED, SHOE_COMMITTED, Round, RoundOpened, ShoeCommitted, new_event, rules_event
from .seat import Seat

MAX_CUT_SEED_LENGTH = 256


def check_cut_seed(cut_seed: str) -> None:
    if len(cut_seed) > MAX_CUT_SEED_LENGTH:
        raise InvalidArgument(
            f"cut_seed is {len(cut_seed)} characters; at most {MAX_CUT_SEED_LENGTH}",
            fields={"cut_seed": f"at most {MAX_CUT_SEED_LENGTH} characters"},
        )


def dealt_by_player(config: TableConfig) -> WarP2PTable:
    """The table's parameters for a round a player deals (commission charged)."""
    assert isinstance(config, WarP2PTable)
    return config.model_copy(update={"dealer": "player"})


@dataclass(frozen=True)
class Opening:
    """The seat's next round about to open: where, against whom, and the bets as the rules took them."""

    entry: TableEntry
    table: TableConfig  # the round's parameters (the entry's, dealt by a player at a player-dealer's round)
    player_id: str
    seat: Seat
    dealer: Seat | None  # a player-dealer's seat; None: the house deals
    state: RoundState
    placed: BetsPlaced
    fingerprint: str  # of the request whose idempotency key opens the round

    @property
    def round_id(self) -> str:
        return self.seat.next_round_id

    @property
    def stakes_id(self) -> str:
        return bets_stake_id(self.round_id, self.fingerprint)

    def events(self, balance_before: int, shoe: ShoeCommitted | None, at: str) -> OpeningEvents:
        """RoundOpened, BetsPlaced and, when the shoe could be committed and cut, ShoeCommitted."""
        dealer = self.dealer
        opened = RoundOpened(
            round_id=self.round_id, table_id=self.entry.table_id, seat_id=self.seat.seat_id, player_id=self.player_id,
            game=self.entry.game, currency=self.entry.currency, table=self.table.model_dump(mode="json"),
            balance_before=balance_before,
            dealer_player_id=dealer.player_id if dealer else None, dealer_seat_id=dealer.seat_id if dealer else None,
            stakes_transaction_id=self.stakes_id, request_fingerprint=self.fingerprint,
            player_nickname=self.seat.nickname if dealer else "", dealer_nickname=dealer.nickname if dealer else "",
        )  # fmt: skip
        events = [new_event(ROUND_OPENED, opened.model_dump(mode="json"), at, self.round_id), rules_event(self.placed, at, self.round_id)]
        if shoe is not None:
            events.append(new_event(SHOE_COMMITTED, shoe.model_dump(mode="json"), at, self.round_id))
        return OpeningEvents(opened, self.table, shoe, (self.placed,), self.state, events)

    def voided(self, drafted: OpeningEvents, reason: str, at: str) -> OpeningEvents:
        """The opening's events and the void that closes the round as soon as it opens (every stake returned)."""
        state, voided = decider_for(self.entry.game).decide(drafted.state, VoidRound(reason=reason))
        events = [*drafted.events, *(rules_event(event, at, self.round_id) for event in voided)]
        return replace(drafted, rules=(*drafted.rules, *voided), state=state, events=events)


@dataclass(frozen=True)
class OpeningEvents:
    """The events that open a round, with the models and the state they were made from: once appended,
    the round is built from these (`round`), not parsed and folded again."""

    opened: RoundOpened
    table: TableConfig
    shoe: ShoeCommitted | None
    rules: tuple[RoundEvent, ...]  # BetsPlaced, then a void's events
    state: RoundState  # after the rules events
    events: list[Draft]

    def round(self, appended: Sequence[Recorded]) -> Round:
        """The round these events opened, as `appended` (the same round Round.from_events gives for them)."""
        rules_envelopes = [e for e in appended if e.event_type in EVENT_TYPES]
        versions = [e.version for e in rules_envelopes]
        if len(appended) != len(self.events) or len(versions) != len(self.rules):
            raise ValueError(f"round {self.opened.round_id}: {len(appended)} events appended, not the {len(self.events)} drafted")
        return Round(
            opened=self.opened, table=self.table, shoe=self.shoe, state=self.state, version=appended[-1].version,
            envelopes=tuple(appended), rules_events=tuple(zip(versions, self.rules, strict=True)),
        )  # fmt: skip


def take_bets(entry: TableEntry, player_id: str, seat: Seat, dealer: Seat | None, bets: dict[str, int], fingerprint: str) -> Opening:
    """The rules' verdict on the bets at the seat's next round (RuleError when they refuse them)."""
    table = dealt_by_player(entry.config) if dealer is not None else entry.config
    decider = decider_for(entry.game)
    state, events = decider.decide(decider.initial_state(table), PlaceBets(bets=bets))
    placed = events[0]
    assert isinstance(placed, BetsPlaced)
    return Opening(entry, table, player_id, seat, dealer, state, placed, fingerprint)
