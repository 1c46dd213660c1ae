"""What the game's commands send to the database, counted on SQLite: a cut in statements is kept by a
test that fails without it, beside one that the behaviour it must keep still holds."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, event

from croupier_game.adapters.sql import SqlGameStore, game_metadata
from croupier_platform.db import create_schema, make_engine
from croupier_platform.errors import AlreadyExists
from tests.refusals import raises_reason

from .conftest import ALICE, Game, build


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    engine = make_engine(f"sqlite:///{tmp_path / 'game.db'}")
    create_schema(engine)
    create_schema(engine, game_metadata)
    yield engine
    engine.dispose()


@pytest.fixture
def sql_game(engine: Engine) -> Game:
    return build(SqlGameStore(engine))


@pytest.fixture
def statements(engine: Engine) -> Iterator[list[str]]:
    """The statements sent from here on (SQLAlchemy's count: a listener sends Prepared ones its way too)."""
    sent: list[str] = []

    def count(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        sent.append(statement)

    event.listen(engine, "before_cursor_execute", count)
    yield sent
    event.remove(engine, "before_cursor_execute", count)


def statements_before_the_stake(game: Game, statements: list[str], monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """For each stake reserved from here on, the statements sent before it since the last one."""
    seen: list[list[str]] = []
    reserve = game.wallet.reserve_stakes

    async def counted(*args: Any, **kwargs: Any) -> Any:
        seen.append(list(statements))
        return await reserve(*args, **kwargs)

    monkeypatch.setattr(game.wallet, "reserve_stakes", counted)
    return seen


def test_place_bets_reads_its_key_and_seat_in_one_statement(
    sql_game: Game, statements: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    seat = sql_game.seat("casino-war-usd")
    sql_game.shuffler.stack("Kd", "2h")  # no tie: the round ends at the deal
    sql_game.run(sql_game.play.deal(ALICE, sql_game.run(sql_game.play.place_bets(ALICE, seat, {"ante": 500}, "k0", "")).round_id))
    seen = statements_before_the_stake(sql_game, statements, monkeypatch)
    statements.clear()
    sql_game.run(sql_game.play.place_bets(ALICE, seat, {"ante": 500}, "k1", ""))
    assert len(seen) == 1
    [read] = [sql for sql in seen[0] if sql != "BEGIN"]  # the snapshot's BEGIN (SQLite), then one SELECT
    assert "game_idempotency_keys" in read and "game_seats" in read


def test_a_key_is_found_with_its_seat_or_without_it(sql_game: Game) -> None:
    seat = sql_game.seat("casino-war-usd")
    sql_game.shuffler.stack("Kd", "2h")  # no tie: the round ends at the deal
    first = sql_game.run(sql_game.play.place_bets(ALICE, seat, {"ante": 500}, "k1", ""))
    sql_game.run(sql_game.play.deal(ALICE, first.round_id))
    again = sql_game.run(sql_game.play.place_bets(ALICE, seat, {"ante": 500}, "k1", ""))
    assert (again.round_id, again.version) == (first.round_id, first.version + 2) and again.phase == "settled"
    with raises_reason("IDEMPOTENCY_KEY_REUSED", AlreadyExists):
        sql_game.run(sql_game.play.place_bets(ALICE, seat, {"ante": 700}, "k1", ""))
    sql_game.run(sql_game.seats.leave_table(ALICE, seat))
    # The seat is gone (its row deleted): a retry of the same request still gets its round.
    assert sql_game.run(sql_game.play.place_bets(ALICE, seat, {"ante": 500}, "k1", "")).round_id == first.round_id
    assert [e.amount for e in sql_game.wallet.entries if e.player_id == "alice" and e.kind == "stake"] == [-500]
