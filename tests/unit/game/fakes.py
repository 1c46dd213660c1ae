"""Honest, simple fakes of the game's ports: a shuffler that commits real shoes (the top can be
stacked), a dealer that deals only the next card of the cut shoe, and a wallet with balances,
idempotent reservations, a consumer of the round events (pumped from the outbox by the test) and
the commission service's charge (called by the test), recording what the real wallet records."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from croupier_game.application.ports import CommittedShoe, LedgerCheck, LedgerEntry, Reservation, RevealedShoe, StakesRefused
from croupier_platform.errors import Conflict, FailedPrecondition, NotFound
from croupier_platform.events import EventEnvelope
from croupier_rules import fairness
from croupier_rules.cards import card_text, fresh_shoe
from croupier_rules.money import money_text


@dataclass
class _Shoe:
    shoe_id: str
    round_id: str
    salt: bytes
    cards: list[str]
    commitment: str


class FakeShuffler:
    def __init__(self) -> None:
        self.shoes: dict[str, _Shoe] = {}
        self._by_round: dict[str, str] = {}
        self._stacked: list[str] = []

    def stack(self, *cards: str) -> None:
        """The next shoe asked for starts with these cards; the rest of it is a proper shoe. Test-only:
        it replaces the shoe a seat committed in advance for its next round (a real shuffler never would)."""
        self._stacked = list(cards)

    async def new_shoe(self, decks: int, round_id: str) -> CommittedShoe:
        if round_id in self._by_round and not self._stacked:
            shoe = self.shoes[self._by_round[round_id]]
        else:
            rest = [card_text(c) for c in fresh_shoe(decks)]
            for card in self._stacked:
                rest.remove(card)
            cards, self._stacked = [*self._stacked, *rest], []
            salt = hashlib.sha256(round_id.encode()).digest()
            shoe = _Shoe(f"shoe-{len(self.shoes) + 1}", round_id, salt, cards, fairness.commitment(salt, cards))
            self.shoes[shoe.shoe_id] = shoe
            self._by_round[round_id] = shoe.shoe_id
        return CommittedShoe(shoe.shoe_id, shoe.commitment, len(shoe.cards))

    async def reveal_shoe(self, shoe_id: str) -> RevealedShoe | None:
        shoe = self.shoes.get(shoe_id)
        if shoe is None:
            return None
        return RevealedShoe(shoe_id, shoe.commitment, shoe.salt.hex(), tuple(shoe.cards))

    async def reveal_drawing(self, shoe_id: str, decks: int, round_id: str) -> tuple[RevealedShoe | None, CommittedShoe | None]:
        revealed = await self.reveal_shoe(shoe_id)
        return revealed, await self.new_shoe(decks, round_id) if revealed is not None else None

    async def commit_after(self, shoe_id: str | None, decks: int, round_id: str) -> None:
        await self.new_shoe(decks, round_id)  # now, as GrpcShuffler (KnownShoes draws it with the reveal)

    async def reveal_shoes(self, shoe_ids: Sequence[str]) -> dict[str, RevealedShoe]:
        """The audit's archive: every shoe asked for, whatever its round's state."""
        return {i: RevealedShoe(i, s.commitment, s.salt.hex(), tuple(s.cards)) for i in shoe_ids if (s := self.shoes.get(i))}


class FakeDealer:
    """The real dealer's contract: the round's first deal carries its cut (commitment, seed) and binds it
    unless the round is bound alike; a deal of a round never cut is refused; a retry of the last deal at
    its position gets the same cards."""

    def __init__(self, shuffler: FakeShuffler) -> None:
        self._shuffler = shuffler
        self._cut: dict[str, list[str]] = {}
        self._seed: dict[str, tuple[str, str, str]] = {}
        self._position: dict[str, int] = {}
        self._deals: dict[tuple[str, int], tuple[list[str], list[int]]] = {}
        self.calls = 0
        self.offsets: dict[str, int] = {}  # the offset each round was cut at

    async def deal_cards(
        self, shoe_id: str, round_id: str, count: int, expected_position: int, cut: tuple[str, str] | None = None
    ) -> tuple[list[str], list[int]]:
        self.calls += 1
        if cut is not None:
            self._bind(shoe_id, round_id, *cut)
        if round_id not in self._cut:
            raise FailedPrecondition(f"round {round_id} has no cut shoe", reason="ROUND_NOT_CUT")
        if (earlier := self._deals.get((round_id, expected_position))) is not None and len(earlier[0]) == count:
            return earlier  # a retry after a lost reply
        position = self._position[round_id]
        if expected_position != position:
            raise Conflict(f"expected position {expected_position}, the shoe is at {position}")
        self._position[round_id] = position + count
        positions = list(range(position, position + count))
        self._deals[(round_id, position)] = dealt = ([self._cut[round_id][p] for p in positions], positions)
        return dealt

    def _bind(self, shoe_id: str, round_id: str, commitment: str, cut_seed: str) -> None:
        if (bound := self._seed.get(round_id)) is not None:
            if bound != (shoe_id, commitment, cut_seed):
                raise FailedPrecondition(f"round {round_id} is cut otherwise", reason="SHOE_MISMATCH")
            return
        shoe = self._shuffler.shoes[shoe_id]
        offset = fairness.cut_offset(commitment, cut_seed, len(shoe.cards))
        self._seed[round_id] = (shoe_id, commitment, cut_seed)
        self.offsets[round_id] = offset
        self._cut[round_id] = fairness.cut_shoe(shoe.cards, offset)
        self._position[round_id] = 0


def hold_id(round_id: str) -> str:
    return f"round:{round_id}:commission-hold"


@dataclass
class _Entry:
    transaction_id: str
    kind: str
    status: str
    amount: int
    currency: str
    round_id: str
    player_id: str
    bets: dict[str, int] | None = None  # a stake's bets


@dataclass
class FakeWallet:
    balances: dict[tuple[str, str], int] = field(default_factory=dict)
    entries: list[_Entry] = field(default_factory=list)
    seen_events: set[str] = field(default_factory=set)
    replies: dict[str, Reservation] = field(default_factory=dict)
    self_exclusions: dict[str, str] = field(default_factory=dict)  # player -> ISO end, as the wallet's GetLimits says

    def fund(self, player: str, amount: int, currency: str = "USD") -> None:
        self.balances[(player, currency)] = self.balances.get((player, currency), 0) + amount

    def available(self, player: str, currency: str = "USD") -> int:
        pending = sum(-e.amount for e in self.entries if e.player_id == player and e.currency == currency and e.status == "pending")
        return self.balances.get((player, currency), 0) - pending

    def reservations(self, round_id: str) -> list[_Entry]:
        return [e for e in self.entries if e.round_id == round_id and e.kind == "stake"]

    async def reserve_stakes(
        self, transaction_id: str, player_id: str, round_id: str, amount: int, currency: str, bets: Mapping[str, int],
        game: str = "", table_id: str = "", settle_first: Sequence[EventEnvelope] = (),
    ) -> Reservation:
        for envelope in settle_first:  # as the wallet: applied first (once), then the stakes judged
            self.apply(envelope)
        if transaction_id in self.replies:
            if any(e.transaction_id == transaction_id and e.status == "voided" for e in self.entries):
                raise StakesRefused(f"the reservation {transaction_id!r} was released; place the bets again", reason="ROUND_CLOSED")
            return self.replies[transaction_id]  # a repeat: nothing more reserved
        self._refuse_if_excluded(player_id)
        before = self.available(player_id, currency)
        if amount > before:
            raise StakesRefused(
                f"balance {money_text(before, currency)} cannot cover stakes of {money_text(amount, currency)}", reason="INSUFFICIENT_FUNDS",
                metadata={"available": before, "amount": amount, "currency": currency},
            )
        self.entries.append(_Entry(transaction_id, "stake", "pending", -amount, currency, round_id, player_id, dict(bets)))
        self.replies[transaction_id] = Reservation(transaction_id, before, before - amount)
        return self.replies[transaction_id]

    def _refuse_if_excluded(self, player_id: str) -> None:
        """As the wallet's limits refuse every stake and cover of a self-excluded player."""
        if until := self.self_exclusions.get(player_id):
            raise StakesRefused(f"self-excluded until {until}: no stakes are taken until then", reason="SELF_EXCLUDED", metadata={"until": until})

    async def release_stakes(self, transaction_id: str, round_id: str) -> bool:
        stake = next((e for e in self.entries if e.transaction_id == transaction_id and e.kind == "stake"), None)
        if stake is None or stake.status == "voided":
            return False
        if stake.round_id != round_id or stake.status == "posted":
            raise FailedPrecondition(
                f"stake {transaction_id} is {stake.status} for round {stake.round_id}; nothing to release", reason="ROUND_MISMATCH"
            )
        stake.status = "voided"
        return True

    def _release_strays(self, stakes: list[_Entry], results: Mapping[str, Mapping[str, int]]) -> list[_Entry]:
        """As the wallet settles: a pending stake whose bets the results do not claim is released."""
        left = {bet: r["stake"] for bet, r in results.items()}
        claimed = []
        for e in stakes:
            if e.status == "pending" and e.bets and any(a > left.get(b, 0) for b, a in e.bets.items()):
                e.status = "voided"
                continue
            for b, a in (e.bets or {}).items():
                left[b] = left.get(b, 0) - a
            claimed.append(e)
        return claimed

    def _round(self, round_id: str) -> tuple[str, list[LedgerEntry]] | None:
        """The round's player (whoever staked) and its entries, each marked with whose balance it changes;
        None for a round without stakes (the wallet does not hold it)."""
        mine = [e for e in self.entries if e.round_id == round_id]
        stakes = [e for e in mine if e.kind == "stake"]
        if not stakes:
            return None
        return stakes[0].player_id, [LedgerEntry(e.transaction_id, e.kind, e.status, e.amount, e.currency, e.player_id) for e in mine]

    async def reserve_dealer_cover(
        self, transaction_id: str, dealer_id: str, round_id: str, cover: int, commission_hold: int, currency: str
    ) -> Reservation:
        if transaction_id in self.replies:
            return self.replies[transaction_id]
        self._refuse_if_excluded(dealer_id)
        before = self.available(dealer_id, currency)
        if cover + commission_hold > before:
            raise StakesRefused(
                f"balance {money_text(before, currency)} cannot cover the dealer's cover and commission of "
                f"{money_text(cover + commission_hold, currency)}", reason="INSUFFICIENT_FUNDS",
                metadata={"available": before, "amount": cover + commission_hold, "currency": currency},
            )
        self.entries.append(_Entry(f"cover:{transaction_id}", "cover", "pending", -cover, currency, round_id, dealer_id))
        if commission_hold:
            self.entries.append(_Entry(hold_id(round_id), "commission", "pending", -commission_hold, currency, round_id, dealer_id))
        self.replies[transaction_id] = Reservation(transaction_id, before, before - cover - commission_hold)
        return self.replies[transaction_id]

    def charge_commission(self, round_id: str, amount: int) -> bool:
        """The commission service's ChargeCommission on a settled round: the hold released and the
        commission posted (dealer -> house), once; False for a voided round (nothing charged)."""
        hold = next(e for e in self.entries if e.transaction_id == hold_id(round_id))
        charge = f"round:{round_id}:commission"
        if any(e.transaction_id == charge for e in self.entries):
            return True  # charged before: a redelivered settlement
        mine = [e for e in self.entries if e.round_id == round_id]
        if any(e.kind == "refund" or (e.kind == "stake" and e.status == "voided") for e in mine):
            return False  # the round is voided
        hold.status = "voided"
        if amount:
            self.entries.append(_Entry(charge, "commission", "posted", -amount, hold.currency, round_id, hold.player_id))
            self.fund(hold.player_id, -amount, hold.currency)
        return True

    async def available_balance(self, player_id: str, currency: str) -> int:
        return self.available(player_id, currency)

    async def self_excluded_until(self, player_id: str) -> str:
        return self.self_exclusions.get(player_id, "")

    # -- the audit's archive (the real wallet's LedgerAuditService)
    async def rounds_transactions(self, round_ids: Sequence[str]) -> dict[str, list[LedgerEntry]]:
        return {round_id: held[1] for round_id in round_ids if (held := self._round(round_id)) is not None}

    async def check_ledger(self) -> LedgerCheck:
        rounds = {e.round_id for e in self.entries if e.kind == "stake"}
        return LedgerCheck(accounts=len(self.balances), entries=len(self.entries), rounds=len(rounds), problems=[])

    async def round_ids(self, after: str | None, limit: int) -> list[str]:
        rounds = sorted({e.round_id for e in self.entries if e.kind == "stake"})
        return [r for r in rounds if after is None or r > after][:limit]

    # -- the consumer of the round events (the real wallet's is asynchronous, on the bus)
    def apply(self, envelope: EventEnvelope) -> None:
        if envelope.event_id in self.seen_events:
            return
        self.seen_events.add(envelope.event_id)
        rid = envelope.stream_id
        stakes = [e for e in self.reservations(rid) if e.status != "voided"]
        covers = [e for e in self.entries if e.round_id == rid and e.kind == "cover"]
        if envelope.event_type == "RoundSettled":
            returned = sum(r["returned"] for r in envelope.payload["results"].values())  # type: ignore[union-attr]
            stakes = self._release_strays(stakes, envelope.payload["results"])  # type: ignore[arg-type]
            for e in [*stakes, *covers]:
                e.status = "posted"
                self.fund(e.player_id, e.amount, e.currency)
            if stakes and returned:
                first = stakes[0]
                self.entries.append(_Entry(f"round:{rid}:payout", "payout", "posted", returned, first.currency, rid, first.player_id))
                self.fund(first.player_id, returned, first.currency)
            held = -sum(e.amount for e in [*stakes, *covers])
            if covers and held > returned:  # a player-dealer takes what the table holds (the hold waits for its charge)
                dealer = covers[0]
                self.entries.append(_Entry(f"round:{rid}:dealer", "payout", "posted", held - returned, dealer.currency, rid,
                                           dealer.player_id))  # fmt: skip
                self.fund(dealer.player_id, held - returned, dealer.currency)
        elif envelope.event_type == "RoundVoided":
            for e in list(self.entries):
                if e.round_id != rid:
                    continue
                if e.status == "pending":  # stakes, a cover, a commission hold: released
                    e.status = "voided"
                elif e.kind in ("stake", "cover", "payout", "commission") and e.status == "posted":
                    kind = "refund" if e.kind in ("stake", "cover") else "reversal"
                    self.entries.append(_Entry(f"{e.transaction_id}:{kind}", kind, "posted", -e.amount, e.currency, rid, e.player_id))
                    self.fund(e.player_id, -e.amount, e.currency)


@dataclass
class FakeDealerPoints:
    """The commission service's dealer points, set by the test."""

    points: dict[tuple[str, str], int] = field(default_factory=dict)
    last_commission: dict[tuple[str, str], int] = field(default_factory=dict)

    async def dealer_status(self, player_id: str, currency: str) -> tuple[int, int]:
        key = (player_id, currency)
        return self.points.get(key, 0), self.last_commission.get(key, 0)
