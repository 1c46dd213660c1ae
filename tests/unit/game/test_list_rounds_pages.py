"""ListRounds a page at a time: keyset pages over the in-memory and the SQL store walk every round once,
rounds opened between pages neither repeat nor drop one, and bad tokens and sizes are refused."""

from __future__ import annotations

import pytest

from croupier_platform.errors import InvalidArgument
from tests.refusals import raises_reason
from croupier_platform.paging import encode_page_token

from .conftest import ALICE, BOB, Game


@pytest.fixture(params=["memory", "sql"])
def store_game(request) -> Game:  # noqa: ANN001
    return request.getfixturevalue("game" if request.param == "memory" else "sql_game")


def play(game: Game, seat: str, n: int) -> str:
    game.shuffler.stack("Ac", "2d")
    view = game.run(game.play.place_bets(ALICE, seat, {"ante": 500}, f"key-{n}", ""))
    game.run(game.play.deal(ALICE, view.round_id))
    return view.round_id


def test_pages_walk_every_round_once_with_rounds_opened_in_between(store_game: Game) -> None:
    game = store_game
    seat = game.seat("casino-war-usd")
    before = [play(game, seat, n) for n in range(7)]
    seen, token, pages, later = [], "", 0, []
    while True:
        page = game.run(game.play.list_rounds(ALICE, 3, token))
        assert len(page.items) <= 3
        seen += [r.round_id for r in page.items]
        pages += 1
        later.append(play(game, seat, 100 + pages))  # a new round between pages
        token = page.next_page_token
        if not token:
            break
    assert seen == before[::-1]  # newest first, none missed or repeated; the later ones are newer than page one
    assert pages == 3  # 3 + 3 + 1: no empty last page
    assert [r.round_id for r in game.run(game.play.list_rounds(ALICE, 0)).items][:3] == later[::-1]
    assert game.run(game.play.list_rounds(BOB, 0)).next_page_token == ""


def test_an_exact_last_page_has_no_next_token(store_game: Game) -> None:
    game = store_game
    seat = game.seat("casino-war-usd")
    for n in range(4):
        play(game, seat, n)
    first = game.run(game.play.list_rounds(ALICE, 2))
    second = game.run(game.play.list_rounds(ALICE, 2, first.next_page_token))
    assert (len(first.items), len(second.items), second.next_page_token) == (2, 2, "")


def test_limit_still_names_the_page_size_when_page_size_is_zero(game: Game) -> None:
    seat = game.seat("casino-war-usd")
    for n in range(3):
        play(game, seat, n)
    assert len(game.run(game.play.list_rounds(ALICE, 0, "", limit=2)).items) == 2
    assert len(game.run(game.play.list_rounds(ALICE, 1, "", limit=2)).items) == 1  # page_size wins


@pytest.mark.parametrize(("page_size", "limit", "field"), [(-1, 0, "page_size"), (101, 0, "page_size"), (0, 101, "limit"), (0, -5, "limit")])
def test_page_sizes_out_of_bounds_are_refused(game: Game, page_size: int, limit: int, field: str) -> None:
    with raises_reason("INVALID_FIELD", InvalidArgument, match=f"{field} .* out of range; ask for 1-100 rounds"):
        game.run(game.play.list_rounds(ALICE, page_size, "", limit=limit))
    assert game.run(game.play.list_rounds(ALICE, 100)).items == []  # the bound itself is fine


@pytest.mark.parametrize("token", [
    "garbage!", "AQ", encode_page_token("ListTransactions", 5), encode_page_token("ListRounds", "5"),
    encode_page_token("ListRounds", True), "AlsiTGlzdFJvdW5kcyIsNV0",  # another version byte
])  # fmt: skip
def test_a_token_this_list_did_not_give_is_refused(game: Game, token: str) -> None:
    with raises_reason("INVALID_FIELD", InvalidArgument, match="page_token is not one ListRounds gave"):
        game.run(game.play.list_rounds(ALICE, 10, token))


@pytest.mark.parametrize("key", [2**63, -(2**63) - 1])
def test_a_forged_token_beyond_the_stores_integers_is_refused_not_an_internal_error(sql_game: Game, key: int) -> None:
    with raises_reason("INVALID_FIELD", InvalidArgument, match="page_token is not one ListRounds gave"):
        sql_game.run(sql_game.play.list_rounds(ALICE, 10, encode_page_token("ListRounds", key)))
