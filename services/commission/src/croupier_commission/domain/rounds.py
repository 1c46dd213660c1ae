"""A war-p2p round as the commission service keeps it, and a player's dealer status: what a settlement
moves (points, commission) and what a void of that settlement takes back, decided without I/O."""

from __future__ import annotations

from dataclasses import dataclass, replace

from .points import after_dealing, points_for_bet


@dataclass(frozen=True)
class DealerStatus:
    """Dealer points per player and currency: points earned with play money never open a real-money dealer's seat."""

    player_id: str
    currency: str
    points: int = 0
    last_commission: int = 0
    commission_total: int = 0


@dataclass(frozen=True)
class P2pRound:
    """Who played whom (`dealer_id` None: the house dealt), and what its settlement moved, so a void undoes exactly that."""

    round_id: str
    player_id: str
    dealer_id: str | None
    currency: str
    table_id: str = ""
    settled: bool = False
    voided: bool = False
    staked: int = 0
    commission: int = 0
    player_points_delta: int = 0
    dealer_points_delta: int = 0


@dataclass(frozen=True)
class Settlement:
    round: P2pRound
    player: DealerStatus
    dealer: DealerStatus | None


def settle(round_: P2pRound, staked: int, commission: int, player: DealerStatus, dealer: DealerStatus | None) -> Settlement:
    """The player gains a point per unit bet; a player-dealer loses one per unit bet against them (not
    below zero) and is recorded as paying the commission."""
    gained = points_for_bet(staked)
    player = replace(player, points=player.points + gained)
    lost = 0
    if dealer is not None:
        remaining = after_dealing(dealer.points, staked)
        lost = dealer.points - remaining
        dealer = replace(dealer, points=remaining, last_commission=commission, commission_total=dealer.commission_total + commission)
    settled = replace(
        round_, settled=True, staked=staked, commission=commission, player_points_delta=gained, dealer_points_delta=-lost
    )
    return Settlement(settled, player, dealer)


def void(round_: P2pRound, player: DealerStatus, dealer: DealerStatus | None) -> Settlement:
    """A void after the settlement takes back its points and commission (the wallet reverses the money)."""
    if round_.settled:
        player = replace(player, points=max(0, player.points - round_.player_points_delta))
        if dealer is not None:
            dealer = replace(
                dealer, points=dealer.points - round_.dealer_points_delta, last_commission=0,
                commission_total=dealer.commission_total - round_.commission,
            )  # fmt: skip
    return Settlement(replace(round_, voided=True), player, dealer)
