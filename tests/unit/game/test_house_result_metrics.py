"""The house's result per round as the game records it for Prometheus (croupier_house_{won,lost}_total):
where the house deals, the stakes less the returns; at a player-dealer's round, which that player banks,
the commission only (the dashboard's 'House result' panel)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from croupier_platform.metrics import Metrics
from tests.unit.platform.test_metrics import samples, value

from .conftest import ALICE, Game
from .test_player_dealer import TABLE as P2P_TABLE, sit_dealer, sit_player


@pytest.fixture
def metrics(game: Game) -> Iterator[Metrics]:
    metrics = Metrics.prometheus("croupier-game-test")
    game.book.metrics = metrics
    yield metrics
    metrics.shutdown()


def house(metrics: Metrics, game_name: str) -> tuple[float | None, float | None]:
    found = samples(metrics)
    labels = {"croupier_game_name": game_name, "croupier_currency": "USD"}
    return value(found, "croupier_house_won_total", **labels), value(found, "croupier_house_lost_total", **labels)


def test_at_a_player_dealers_round_the_house_earns_the_commission_not_the_players_loss(game: Game, metrics: Metrics) -> None:
    sit_dealer(game, auto_confirm=True)
    player_seat = sit_player(game)
    game.shuffler.stack("9c", "Qd")  # the player loses $300 to the dealer
    view = game.run(game.play.deal(ALICE, game.run(game.play.place_bets(ALICE, player_seat, {"ante": 30_000}, "k1", "")).round_id))
    assert (view.phase, view.commission, view.dealer_net) == ("settled", 525, 29_475)
    assert house(metrics, "war-p2p") == (525, None)  # not the 30_000 the player lost: the dealer banked it


def test_where_the_house_deals_it_wins_the_stakes_it_keeps_and_loses_what_it_pays_beyond_them(game: Game, metrics: Metrics) -> None:
    seat = game.seat("casino-war-usd")
    game.shuffler.stack("9c", "Qd")  # the player's 9 against the dealer's queen: the house keeps the ante
    lost = game.run(game.play.deal(ALICE, game.run(game.play.place_bets(ALICE, seat, {"ante": 2_500}, "k1", "")).round_id))
    assert (lost.phase, lost.total_returned) == ("settled", 0)
    game.shuffler.stack("Qd", "9c")  # the player's queen wins even money: the house pays 2_500 beyond the stake
    won = game.run(game.play.deal(ALICE, game.run(game.play.place_bets(ALICE, seat, {"ante": 2_500}, "k2", "")).round_id))
    assert (won.phase, won.total_returned) == ("settled", 5_000)
    assert house(metrics, "casino-war") == (2_500, 2_500)
