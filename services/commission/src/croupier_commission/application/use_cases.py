"""Acting on round events once each: dealer points and commission of war-p2p rounds.

RoundOpened of a war-p2p round records who plays whom; RoundSettled moves the points (the
player +1 per unit bet, a player-dealer -1 per unit bet against them, not below zero) and
records the commission the wallet was asked to charge; RoundVoided of a settled round takes
back exactly what its settlement moved (the deltas are kept per round). The subscriber runs
`apply_round_event` in one unit of work with its tracking row, so a redelivered event changes nothing.
"""

from __future__ import annotations

from cachetools import FIFOCache

from croupier_platform.events import EventEnvelope

from ..domain.rounds import DealerStatus, P2pRound, Settlement, settle, void
from .ports import CommissionUnitOfWork, UnitOfWorkFactory, Wallet

CONSUMER = "commission"
HANDLED = ("RoundOpened", "RoundSettled", "RoundVoided")
WAR_P2P = "war-p2p"
# Rounds of other games remembered as such (a round id each, a few MB): 20 s of rounds at a thousand a
# second, while a round's end follows its opening within seconds.
REMEMBERED_ROUNDS = 20_000


def commission_due(envelope: EventEnvelope) -> int | None:
    """The commission a RoundSettled of a player-dealer's round asks for (maybe 0, which still
    releases the dealer's hold); None for any other event or a round the house dealt."""
    if envelope.event_type != "RoundSettled" or envelope.payload.get("dealer_net") is None:
        return None
    return int(envelope.payload.get("commission") or 0)


def _opens_war_p2p(envelope: EventEnvelope) -> bool:
    return envelope.payload.get("game") == WAR_P2P


class Commission:
    def __init__(self, uow_factory: UnitOfWorkFactory, wallet: Wallet, remembered_rounds: int = REMEMBERED_ROUNDS) -> None:
        self._uow = uow_factory
        self._wallet = wallet
        # Rounds seen opened at another game: their end is skipped like their RoundOpened. Bounded; a round
        # not remembered (forgotten, opened before a restart or on a partition this process did not read)
        # is looked up in a unit of work as before.
        self._other_games: FIFOCache[str, bool] = FIFOCache(maxsize=remembered_rounds)

    def concerns(self, envelope: EventEnvelope) -> bool:
        """Whether the event may move anything here, from the envelope alone: a RoundOpened of another game
        is skipped before any unit of work (the reconciler never asks about one either), and so is the end
        (RoundSettled, RoundVoided) of a round whose RoundOpened was skipped so (a round's events come in
        order on its partition); any other round's end is looked up, its game being known from its
        RoundOpened only."""
        if envelope.event_type == "RoundOpened":
            if _opens_war_p2p(envelope):
                return True
            self._other_games[envelope.stream_id] = True
            return False
        return envelope.stream_id not in self._other_games

    async def charge_commission(self, envelope: EventEnvelope) -> None:
        """Before a player-dealer's settlement is recorded, the wallet charges its commission (idempotent
        per round): should the charge fail, nothing is recorded and the bus delivers the event again;
        should the commit fail after the charge, the repeat charges nothing."""
        if (commission := commission_due(envelope)) is not None:
            await self._wallet.charge_commission(envelope.stream_id, commission)

    def apply_round_event(self, uow: CommissionUnitOfWork, envelope: EventEnvelope) -> None:
        """Called inside the subscriber's unit of work, after its tracking row."""
        payload = envelope.payload
        if envelope.event_type == "RoundOpened":
            if _opens_war_p2p(envelope):
                uow.rounds.add(
                    P2pRound(
                        round_id=envelope.stream_id, player_id=payload["player_id"], dealer_id=payload.get("dealer_player_id"),
                        currency=payload["currency"], table_id=payload.get("table_id", ""),
                    )  # fmt: skip
                )
            return
        round_ = uow.rounds.get(envelope.stream_id)
        if round_ is None:
            return  # not a war-p2p round
        statuses = uow.statuses.lock([round_.player_id, *filter(None, [round_.dealer_id])], round_.currency)
        player, dealer = statuses[round_.player_id], statuses[round_.dealer_id] if round_.dealer_id else None
        if envelope.event_type == "RoundSettled" and not round_.settled:
            staked = sum(result["stake"] for result in payload["results"].values())
            _save(uow, settle(round_, staked, commission_due(envelope) or 0, player, dealer))
        elif envelope.event_type == "RoundVoided" and not round_.voided:
            _save(uow, void(round_, player, dealer))

    def dealer_status(self, player_id: str, currency: str) -> DealerStatus:
        with self._uow.reading() as uow:
            return uow.statuses.get(player_id, currency) or DealerStatus(player_id, currency)


def _save(uow: CommissionUnitOfWork, settlement: Settlement) -> None:
    uow.rounds.save(settlement.round)
    uow.statuses.save(settlement.player)
    if settlement.dealer is not None:
        uow.statuses.save(settlement.dealer)
