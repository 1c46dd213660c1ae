"""The bus key of a round's events is its seat's id (at a player-dealer table, the dealer's seat's), the same
for every event of the round: a seat's rounds reach one partition, in order, so one wallet replica settles
them one after another (docs/bus.md, "Message keys"). Other streams keep their stream id as the key."""

from __future__ import annotations

from croupier_platform.bus import ROUND_EVENTS

from .conftest import ALICE, Game
from .test_player_dealer import sit_dealer, sit_player


def keys_by_topic(game: Game) -> dict[str, set[str]]:
    keys: dict[str, set[str]] = {}
    for message in game.store.outbox.pending(1_000):
        keys.setdefault(message.topic, set()).add(message.key)
    return keys


def test_a_seats_rounds_are_keyed_by_the_seat_not_by_the_round(game: Game) -> None:
    seat = game.seat("casino-war-usd")
    rounds = []
    for key, cards in (("k1", ["Ac", "2d"]), ("k2", ["Kc", "3d"])):
        game.shuffler.stack(*cards)
        view = game.run(game.play.place_bets(ALICE, seat, {"ante": 500}, key, ""))
        rounds.append(game.run(game.play.deal(ALICE, view.round_id)))
    assert [view.phase for view in rounds] == ["settled", "settled"]

    keys = keys_by_topic(game)
    assert keys[ROUND_EVENTS] == {seat}  # opening, deal and settlement of both rounds alike
    assert all(message.envelope.stream_id in {view.round_id for view in rounds}
               for message in game.store.outbox.pending(1_000) if message.topic == ROUND_EVENTS)  # fmt: skip


def test_a_player_dealers_rounds_are_keyed_by_the_dealers_seat(game: Game) -> None:
    dealer_seat = sit_dealer(game, auto_confirm=True)
    player_seat = sit_player(game)
    game.shuffler.stack("9c", "Qd")
    view = game.run(game.play.place_bets(ALICE, player_seat, {"ante": 3_000}, "k1", ""))
    assert game.run(game.play.deal(ALICE, view.round_id)).phase == "settled"

    assert keys_by_topic(game)[ROUND_EVENTS] == {dealer_seat}
