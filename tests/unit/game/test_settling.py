"""What a player is shown about a round that has ended is the settled truth at once (settling.py): a war-p2p
round is applied by the wallet and the commission service in the call that ends it, and nothing is judged
or shown on a seat's figures before its last round is applied — whatever the bus's lag (nothing is
delivered by the bus in these tests)."""

from __future__ import annotations

from pathlib import Path

import pytest

from croupier_game.adapters.memory import InMemoryGameStore
from croupier_game.adapters.sql import SqlGameStore, game_metadata
from croupier_game.application.rounds import RoundBook
from croupier_game.application.settling import SettledFigures
from croupier_platform.db import create_schema, make_engine
from croupier_platform.errors import Unavailable

from .conftest import ALICE, BOB
from .test_reconciler import START, WIN, World, world

P2P = "war-p2p-iii-usd"  # antes $25-$350, commission 1.75%
LOSE = ["9c", "Qd"]  # the player's nine against the dealer's queen


@pytest.fixture(params=["memory", "sqlite"])
def w(request: pytest.FixtureRequest, tmp_path: Path) -> World:
    if request.param == "memory":
        return world(InMemoryGameStore(), settled_figures=True)
    engine = make_engine(f"sqlite:///{tmp_path / 'game.db'}")
    create_schema(engine)
    create_schema(engine, game_metadata)
    return world(SqlGameStore(engine), settled_figures=True)


def held(w: World, who: str) -> int:
    """What the wallet holds of the player's money (reservations pending)."""
    return w.wallet.balances.get((who, "USD"), 0) - w.wallet.available(who, "USD")


def seats_at_p2p(w: World) -> tuple[str, str]:
    """Bob deals (every round confirmed in advance), Alice plays him: (dealer's seat, player's seat)."""
    dealer = w.run(w.seats.join_table(BOB, P2P, "dealer", "Bobby", True))[0].seat_id
    return dealer, w.run(w.seats.join_table(ALICE, P2P, "player", "Al"))[0].seat_id


def p2p_round(w: World, seat: str, cards: list[str], key: str, ante: int = 30_000) -> str:
    w.cards.stack(*cards)
    round_id = w.run(w.play.place_bets(ALICE, seat, {"ante": ante}, key, "")).round_id
    assert w.run(w.play.deal(ALICE, round_id)).phase == "settled"
    return round_id


def test_a_war_p2p_round_is_applied_everywhere_by_the_deal_that_settles_it(w: World) -> None:
    _, seat = seats_at_p2p(w)
    round_id = p2p_round(w, seat, LOSE, "k1")

    # Settled: the stakes and the cover posted; the commission hold waits for the commission service's charge.
    assert held(w, "alice") == 0 and held(w, "bob") == 1_050
    assert w.wallet.available("alice", "USD") == START - 30_000
    assert (round_id, "RoundSettled") in w.commission.applied and (round_id, "RoundOpened") in w.commission.applied
    assert w.shuffler.applied == []  # the reveal is no figure a player is shown: left to the bus


def test_a_house_round_is_left_to_the_bus_until_its_seat_is_looked_at(w: World) -> None:
    round_id = w.play_round(cards=WIN)
    assert held(w, "alice") == 1000  # the bus has not delivered it

    status = w.run(w.seats.seat_status(ALICE, w.run(w.seats.join_table(ALICE, "casino-war-usd"))[0].seat_id))

    assert status.last_round_id == round_id
    assert status.balance == START + 1000 and held(w, "alice") == 0
    assert w.commission.applied == []  # a casino-war round moves no dealer points


def test_a_house_tables_next_bet_carries_its_last_round_so_its_balance_includes_that_return(w: World) -> None:
    first = w.play_round(cards=WIN)  # won 1,000; the bus delivers nothing
    assert held(w, "alice") == 1000

    seat = w.run(w.seats.join_table(ALICE, "casino-war-usd"))[0].seat_id
    w.cards.stack(*WIN)
    view = w.run(w.play.place_bets(ALICE, seat, {"ante": 1000}, "k2", ""))

    # The reservation applied the first round's settlement first (once): the second round opens on it.
    assert view.balance_before == START + 1000
    assert [e.transaction_id for e in w.wallet.entries if e.round_id == first and e.kind == "payout"] == [f"round:{first}:payout"]
    assert w.commission.applied == []  # nothing driven besides: it rode on the reservation


def test_the_next_bet_waits_until_the_dealers_last_round_is_applied(w: World) -> None:
    dealer_seat, seat = seats_at_p2p(w)
    commission_apply = w.commission.apply_round_event

    async def commission_away(envelope):  # noqa: ANN001, ANN202
        raise Unavailable("the commission service is unreachable")

    w.commission.apply_round_event = commission_away  # type: ignore[method-assign]
    first = p2p_round(w, seat, WIN, "k1")  # settled in the game; its points not applied: the service is away
    assert (first, "RoundSettled") not in w.commission.applied
    stakes_before = len(w.wallet.entries)

    with pytest.raises(Unavailable) as refused:
        w.run(w.play.place_bets(ALICE, seat, {"ante": 30_000}, "k2", ""))
    assert f"round {first} has ended and its settlement is still being applied" in str(refused.value)
    assert len(w.wallet.entries) == stakes_before  # nothing reserved for a round judged on stale figures
    with pytest.raises(Unavailable):
        w.run(w.seats.seat_status(BOB, dealer_seat))

    w.commission.apply_round_event = commission_apply  # type: ignore[method-assign]
    second = p2p_round(w, seat, LOSE, "k2")

    assert [r for r, kind in w.commission.applied if kind == "RoundSettled"] == [first, second]  # in the order played


def test_a_replica_that_did_not_end_the_round_drives_it_once(w: World) -> None:
    round_id = w.play_round(cards=WIN)
    elsewhere = RoundBook(w.store, w.clock, wake_log_readers=lambda: None, figures=SettledFigures([w.wallet, w.commission]))

    w.run(elsewhere.require_settled(round_id))
    applied = len(w.wallet.seen_events)
    w.run(elsewhere.require_settled(round_id))

    assert applied == 1 and len(w.wallet.seen_events) == 1
    assert held(w, "alice") == 0


def test_a_round_under_way_has_nothing_to_apply(w: World) -> None:
    w.cards.stack(*WIN)
    seat = w.run(w.seats.join_table(ALICE, "casino-war-usd"))[0].seat_id
    round_id = w.run(w.play.place_bets(ALICE, seat, {"ante": 1000}, "k1", "")).round_id

    w.run(w.book.require_settled(round_id))

    assert w.wallet.seen_events == set() and held(w, "alice") == 1000


def test_a_dealer_who_just_won_is_not_unseated_for_the_cover_the_last_round_held(w: World) -> None:
    w.wallet.balances[("bob", "USD")] = 52_000  # type III: a dealer needs 420.00; a 250.00 ante holds 258.75 of it
    _, seat = seats_at_p2p(w)
    p2p_round(w, seat, LOSE, "k1", ante=25_000)  # Bob wins 250.00 less the commission; the bus delivers nothing

    view = w.run(w.play.place_bets(ALICE, seat, {"ante": 2_500}, "k2", ""))  # judged on 770.00 less the hold, not 261.25

    assert view.phase == "dealing" and view.opponent_nickname == "Bobby"
