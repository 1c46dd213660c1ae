"""A game service wired to fakes (in-memory store or SQLite, fake shuffler, dealer and wallet) by the
service's own wiring (application/use_cases.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from croupier_game.adapters.memory import InMemoryGameStore
from croupier_game.adapters.sql import SqlGameStore, game_metadata
from croupier_game.application.audit import AuditUseCases
from croupier_game.application.dealer_qualification import DealerQualification
from croupier_game.application.feed import LogFeed
from croupier_game.application.play import PlayUseCases
from croupier_game.application.rounds import RoundBook
from croupier_game.application.seats import SeatUseCases
from croupier_game.application.use_cases import wire_use_cases
from croupier_game.application.watching import Presence, WatchUseCases
from croupier_game.config import DEFAULT_TABLES_FILE, GameSettings
from croupier_game.domain.catalogue import Catalogue
from croupier_game.domain.opening import OpeningEvents
from croupier_game.domain.round import Round
from croupier_platform.auth import Identity
from croupier_platform.db import create_schema, make_engine

from .fakes import FakeDealer, FakeDealerPoints, FakeShuffler, FakeWallet

ALICE = Identity("alice", "player")
BOB = Identity("bob", "player")
OPERATOR = Identity("ops", "operator")


class TickingClock:
    def __init__(self) -> None:
        self._now = datetime(2025, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        self._now += timedelta(milliseconds=1)
        return self._now


@dataclass
class Game:
    store: Any
    shuffler: FakeShuffler
    dealer: FakeDealer
    wallet: FakeWallet
    seats: SeatUseCases
    play: PlayUseCases
    dealers: DealerQualification
    audit: AuditUseCases
    commits: list[int]
    points: FakeDealerPoints
    book: RoundBook
    feed: LogFeed
    presence: Presence
    watching: WatchUseCases

    def run(self, coroutine: Any) -> Any:
        return asyncio.run(coroutine)

    def seat(self, table_id: str, who: Identity = ALICE) -> str:
        return self.run(self.seats.join_table(who, table_id))[0].seat_id

    def pump(self) -> int:
        """Deliver the committed outbox to the wallet's consumer, as the relay and bus would."""
        pending = self.store.outbox.pending(1_000)
        for message in pending:
            self.wallet.apply(message.envelope)
        self.store.outbox.mark_published([m.id for m in pending])
        return len(pending)


def build(
    store: Any, *, clock: Any = None, tables_file: Path | None = None, queue_size: int = 256, known_shoes: bool = False
) -> Game:
    """`known_shoes`: the use cases ask the shuffler through KnownShoes, as in the service (off by default:
    FakeShuffler.stack replaces a shoe the seat committed ahead, which KnownShoes would not ask for again)."""
    shuffler = FakeShuffler()
    dealer = FakeDealer(shuffler)
    wallet = FakeWallet()
    commits: list[int] = []
    feeds: list[LogFeed] = []
    clock = clock or TickingClock()
    book = RoundBook(store, clock, wake_log_readers=lambda: (commits.append(1), *(f.wake() for f in feeds)))
    points = FakeDealerPoints()
    settings = GameSettings(
        watch_poll_interval_s=0.05, watch_queue_size=queue_size, watch_max_streams_per_player=4, presence_heartbeat_s=0.05
    )
    wired = wire_use_cases(
        book, Catalogue.from_toml(tables_file or DEFAULT_TABLES_FILE), settings, clock, shuffler=shuffler, dealer=dealer,
        wallet=wallet, points=points, shoes=shuffler, ledger=wallet, known_shoes=known_shoes,
    )  # fmt: skip
    feeds.append(wired.feed)
    game = Game(
        store, shuffler, dealer, wallet, wired.seats, wired.play, wired.dealers, wired.audit, commits, points, book,
        wired.feed, wired.presence, wired.watching,
    )  # fmt: skip
    for who in ("alice", "bob"):
        wallet.fund(who, 1_000_000, "USD")
        wallet.fund(who, 1_000_000, "PLAY")
    return game


_fold_whole = Round.from_events  # as defined (a test may count the calls of a replaced one)


@pytest.fixture(autouse=True)
def openings_fold_as_their_streams(monkeypatch: pytest.MonkeyPatch) -> list[Round]:
    """Every round an opening builds from what made its events (OpeningEvents.round, not parsed again) is
    the round its stream folds to: checked at each opening of every test here (voided at once, without a
    shoe, a player-dealer's…). The rounds checked, for a test that wants to see it ran."""
    checked: list[Round] = []
    built = OpeningEvents.round

    def compared(self: OpeningEvents, appended: Any) -> Round:
        round_ = built(self, appended)
        assert round_ == _fold_whole(appended), "the opening's round differs from its stream's fold"
        checked.append(round_)
        return round_

    monkeypatch.setattr(OpeningEvents, "round", compared)
    return checked


@pytest.fixture(autouse=True)
def appends_fold_as_their_streams(monkeypatch: pytest.MonkeyPatch) -> list[Round]:
    """Every round an append builds from its decision (Round.decided: the decided events and state, not
    parsed and evolved again) is the round its stream folds to, and the round `extended` gives: checked
    at each append of every test here (deals, decisions, the keeper's, voids). The rounds checked."""
    checked: list[Round] = []
    built = Round.decided

    def compared(self: Round, appended: Any, decision: Any) -> Round:
        round_ = built(self, appended, decision)
        assert round_ == self.extended(appended), "the appended round differs from the events folded on"
        assert round_ == _fold_whole([*self.envelopes, *appended]), "the appended round differs from its stream's fold"
        checked.append(round_)
        return round_

    monkeypatch.setattr(Round, "decided", compared)
    return checked


@pytest.fixture
def game() -> Game:
    return build(InMemoryGameStore())


@pytest.fixture
def sql_game(tmp_path: Path) -> Iterator[Game]:
    engine = make_engine(f"sqlite:///{tmp_path / 'game.db'}")
    create_schema(engine)
    create_schema(engine, game_metadata)
    yield build(SqlGameStore(engine))
    engine.dispose()
