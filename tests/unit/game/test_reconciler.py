"""The reconciler: a round over in the game is driven to closed in the wallet, revealed in the shuffler and
charged in the commission service from its own events, however its messages were lost; pending
reservations past their expiry resolve through their round, once; only the leader acts."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from croupier_game.adapters.memory import InMemoryGameStore
from croupier_game.adapters.sql import SqlGameStore, game_metadata
from croupier_game.application.book_loop import Pace
from croupier_game.application.reconciler import Reconciler, ReconcilerPass
from croupier_game.application.play import PlayUseCases
from croupier_game.application.rounds import RoundBook
from croupier_game.application.seats import SeatUseCases
from croupier_game.application.settling import SettledFigures
from croupier_game.application.use_cases import wire_use_cases
from croupier_game.config import DEFAULT_TABLES_FILE, GameSettings
from croupier_game.domain.catalogue import Catalogue
from croupier_platform.db import create_schema, make_engine
from croupier_platform.errors import FailedPrecondition, Unavailable

from .conftest import ALICE, BOB
from .fakes import FakeDealer, FakeDealerPoints, FakeShuffler
from .reconciler_fakes import CountingSink, ExpiringWallet
from .test_keeper import ManualClock, Recorded

START = 1_000_000
BOUND_S = 30.0
WIN = ["Kc", "2d"]  # casino war: the player's king beats the dealer's two, settled at the deal


@dataclass
class World:
    store: Any
    clock: ManualClock
    wallet: ExpiringWallet
    shuffler: CountingSink
    commission: CountingSink
    seats: SeatUseCases
    play: PlayUseCases
    book: RoundBook
    cards: FakeShuffler

    def run(self, coroutine: Any) -> Any:
        return asyncio.run(coroutine)

    def reconciler(self, leadership: Recorded | None = None, book: RoundBook | None = None) -> Reconciler:
        """`book`: another replica's (it ended none of the rounds played here); this one's by default."""
        sinks = [self.wallet, self.shuffler, self.commission]
        return Reconciler(book or self.book, sinks, self.wallet, self.clock, Pace(0.01, leadership=leadership), settle_after_s=BOUND_S)

    def another_replica(self) -> RoundBook:
        return RoundBook(self.store, self.clock, wake_log_readers=lambda: None)

    def counting_stream_reads(self, book: RoundBook) -> list[str]:
        """The ids of the rounds whose streams `book`'s reads fetch with read_each_stream, from now on."""
        read_ids: list[str] = []
        read = book.read

        async def counted(work):  # noqa: ANN001, ANN202
            def spied(uow):  # noqa: ANN001, ANN202
                each = uow.events.read_each_stream

                def read_each_stream(ids):  # noqa: ANN001, ANN202
                    read_ids.extend(ids)
                    return each(ids)

                uow.events.read_each_stream = read_each_stream
                return work(uow)

            return await read(spied)

        book.read = counted  # type: ignore[method-assign]
        return read_ids

    def deliver(self, *, drop: tuple[str, ...] = ()) -> list:
        """The relay and the bus: every committed round event to each consumer, except the event types dropped
        (dead-lettered, skipped). Returns the envelopes published."""
        pending = self.store.outbox.pending(1_000)
        for message in pending:
            envelope = message.envelope
            if envelope.event_type in drop:
                continue
            self.wallet.apply(envelope)
            self.shuffler.consume(envelope)
            self.commission.consume(envelope)
        self.store.outbox.mark_published([m.id for m in pending])
        return [m.envelope for m in pending]

    def play_round(self, table: str = "casino-war-usd", cards: list[str] = WIN, key: str = "k1", who=ALICE) -> str:  # noqa: ANN001
        self.cards.stack(*cards)
        seat = self.run(self.seats.join_table(who, table))[0].seat_id
        view = self.run(self.play.place_bets(who, seat, {"ante": 1000}, key, ""))
        return self.run(self.play.deal(who, view.round_id)).round_id

    def phase(self, round_id: str) -> str:
        return self.run(self.play.get_round(ALICE, round_id)).phase


def world(store: Any, *, settled_figures: bool = False) -> World:
    """`settled_figures`: the game drives a round's ending to the wallet and the commission service itself
    (settling.SettledFigures, as the service is wired); by default only the bus and the reconciler do."""
    clock = ManualClock()
    cards = FakeShuffler()
    wallet = ExpiringWallet(clock=clock, timeout_s=120)
    for who in ("alice", "bob"):
        wallet.fund(who, START, "USD")
    shuffler = CountingSink("shuffler")
    commission = CountingSink("commission", handles=("RoundOpened", "RoundSettled", "RoundVoided"))
    figures = SettledFigures([wallet, shuffler, commission]) if settled_figures else None
    book = RoundBook(store, clock, wake_log_readers=lambda: None, figures=figures)
    points = FakeDealerPoints(points={("bob", "USD"): 800})
    wired = wire_use_cases(
        book, Catalogue.from_toml(DEFAULT_TABLES_FILE), GameSettings(), clock, shuffler=cards, dealer=FakeDealer(cards),
        wallet=wallet, points=points, shoes=cards, ledger=wallet, known_shoes=False,
    )  # fmt: skip
    return World(store, clock, wallet, shuffler, commission, wired.seats, wired.play, book, cards)


@pytest.fixture(params=["memory", "sqlite"])
def w(request: pytest.FixtureRequest, tmp_path: Path) -> World:
    if request.param == "memory":
        return world(InMemoryGameStore())
    engine = make_engine(f"sqlite:///{tmp_path / 'game.db'}")
    create_schema(engine)
    create_schema(engine, game_metadata)
    return world(SqlGameStore(engine))


def settled_with_its_message_lost(w: World) -> str:
    """A round settled whose RoundSettled never reached the wallet or the shuffler, past the bound."""
    round_id = w.play_round()
    w.deliver(drop=("RoundSettled",))
    w.clock.advance(BOUND_S + 1)
    return round_id


async def shuffler_away(*_args: object) -> None:
    raise Unavailable("the shuffler service is unavailable; try again")


async def shuffler_refuses(*_args: object) -> None:
    raise FailedPrecondition("the shuffler refuses this event")


# ---------------------------------------------------------------- rounds over in the game


def test_a_settlement_whose_message_was_dropped_is_applied_once_and_a_late_redelivery_is_a_no_op(
    w: World, caplog: pytest.LogCaptureFixture
) -> None:
    reconciler = w.reconciler()
    round_id = w.play_round()
    assert w.phase(round_id) == "settled"
    published = w.deliver(drop=("RoundSettled",))  # dead-lettered for the wallet and the shuffler alike
    assert w.wallet.available("alice") == START - 1000  # the stake still reserved

    w.clock.advance(BOUND_S)  # within the bound: the consumers' lag, not the reconciler's yet
    assert w.run(reconciler.run_once()) == ReconcilerPass()
    w.clock.advance(1)
    with caplog.at_level(logging.WARNING, logger="croupier_game.application.reconciler"):
        done = w.run(reconciler.run_once())
    assert done.redriven == [(round_id, "wallet", "RoundSettled"), (round_id, "shuffler", "RoundSettled")]
    assert done.reconciled == [round_id] and done.failed == []
    assert w.wallet.available("alice") == START + 1000  # the ante back and its win
    assert w.shuffler.applied == [(round_id, "RoundSettled")]
    assert any("the wallet had not applied RoundSettled" in r.getMessage() for r in caplog.records)

    # The message arrives after all (dlq replay): nothing more happens.
    settled = next(e for e in published if e.event_type == "RoundSettled")
    assert not w.run(w.wallet.apply_round_event(settled))
    w.wallet.apply(settled)
    assert w.wallet.available("alice") == START + 1000
    assert not w.shuffler.consume(settled)
    # Marked: the next passes do not look at it again.
    w.clock.advance(60)
    assert w.run(reconciler.run_once()) == ReconcilerPass()


def test_a_round_every_service_applied_is_marked_without_a_warning(w: World, caplog: pytest.LogCaptureFixture) -> None:
    reconciler = w.reconciler()
    round_id = w.play_round()
    w.deliver()
    w.clock.advance(BOUND_S + 1)
    with caplog.at_level(logging.WARNING, logger="croupier_game.application.reconciler"):
        done = w.run(reconciler.run_once())
    assert done == ReconcilerPass(reconciled=[round_id])
    assert caplog.records == []


def test_a_page_of_rounds_every_service_applied_costs_one_status_query_per_service_and_no_re_drive(w: World) -> None:
    reconciler = w.reconciler()
    rounds = [w.play_round(key=f"k{n}") for n in range(3)]
    w.deliver()
    w.clock.advance(BOUND_S + 1)
    done = w.run(reconciler.run_once())
    assert sorted(done.reconciled) == sorted(rounds) and done.redriven == []
    assert (w.wallet.status_queries, w.shuffler.status_queries) == (1, 1)
    assert w.shuffler.redrive_calls == 0
    assert w.commission.status_queries == 0 and w.commission.redrive_calls == 0  # no event of its games: not asked


def test_a_round_first_seen_within_the_bound_has_its_stream_read_once_unless_it_moved(w: World) -> None:
    # A round is seen first within the bound (to learn when it is due) and again past it: one read of
    # its stream, kept with its version; a round whose version moved meanwhile (voided after its
    # settlement) is read again, so its void is what gets driven. (The reconciler of another replica:
    # this one's knows the endings of the rounds it played, next test.)
    elsewhere = w.another_replica()
    reconciler = w.reconciler(book=elsewhere)
    read_ids = w.counting_stream_reads(elsewhere)
    kept, moved = w.play_round(), w.play_round(key="k2", who=BOB)
    w.deliver()
    assert w.run(reconciler.run_once()) == ReconcilerPass()
    assert sorted(read_ids) == sorted([kept, moved])
    w.run(w.book.void(w.run(w.book.load(moved)), "an operator's correction"))
    w.deliver()
    w.clock.advance(BOUND_S + 1)
    assert sorted(w.run(reconciler.run_once()).reconciled) == sorted([kept, moved])
    assert sorted(read_ids) == sorted([kept, moved, moved])


def test_the_rounds_this_replica_ended_are_reconciled_without_reading_their_streams(w: World) -> None:
    # The RoundBook keeps the endings of the rounds it saw end, with their versions; a round voided since
    # by another replica (its version moved) is read, so its void is what gets driven.
    reconciler = w.reconciler()
    read_ids = w.counting_stream_reads(w.book)
    kept, moved = w.play_round(), w.play_round(key="k2", who=BOB)
    w.deliver(drop=("RoundSettled",))
    assert w.run(reconciler.run_once()) == ReconcilerPass()
    elsewhere = w.another_replica()
    w.run(elsewhere.void(w.run(elsewhere.load(moved)), "an operator's correction, on another replica"))
    w.clock.advance(BOUND_S + 1)
    done = w.run(reconciler.run_once())
    assert sorted(done.reconciled) == sorted([kept, moved]) and read_ids == [moved]
    assert (kept, "wallet", "RoundSettled") in done.redriven and (moved, "wallet", "RoundVoided") in done.redriven
    assert w.wallet.available("alice") == START + 1000 and w.wallet.available("bob") == START  # won; voided: returned


def test_a_service_that_cannot_say_what_it_applied_leaves_the_page_for_a_later_pass(w: World) -> None:
    reconciler = w.reconciler()
    round_id = settled_with_its_message_lost(w)
    w.shuffler.unapplied = shuffler_away  # type: ignore[method-assign]
    done = w.run(reconciler.run_once())
    assert done.failed == [round_id] and done.reconciled == [] and done.redriven == []
    assert w.wallet.available("alice") == START - 1000  # nothing re-driven to anyone while the page is unknown
    del w.shuffler.unapplied  # back
    w.clock.advance(5)
    done = w.run(reconciler.run_once())
    assert done.reconciled == [round_id]
    assert done.redriven == [(round_id, "wallet", "RoundSettled"), (round_id, "shuffler", "RoundSettled")]


def test_a_player_dealer_round_is_charged_in_the_commission_service_with_its_opening(w: World) -> None:
    reconciler = w.reconciler()
    w.run(w.seats.join_table(BOB, "war-p2p-i-usd", "dealer", "Bobby", auto_confirm=True))
    round_id = w.play_round("war-p2p-i-usd")
    w.deliver(drop=("RoundOpened", "RoundSettled", "RoundVoided"))
    w.clock.advance(BOUND_S + 1)
    done = w.run(reconciler.run_once())
    assert (round_id, "commission", "RoundOpened") in done.redriven and (round_id, "commission", "RoundSettled") in done.redriven
    assert w.commission.applied == [(round_id, "RoundOpened"), (round_id, "RoundSettled")]
    assert w.wallet.available("alice") == START + 1000


def test_a_service_that_refuses_leaves_the_round_unmarked_and_it_is_retried_after_a_backoff(w: World) -> None:
    reconciler = w.reconciler()
    round_id = settled_with_its_message_lost(w)
    w.shuffler.apply_round_event = shuffler_refuses  # type: ignore[method-assign]
    done = w.run(reconciler.run_once())
    assert done.failed == [round_id] and done.reconciled == []
    del w.shuffler.apply_round_event  # back
    w.clock.advance(0.005)  # backing off: not yet
    assert w.run(reconciler.run_once()).reconciled == []
    w.clock.advance(5)
    done = w.run(reconciler.run_once())
    assert done.reconciled == [round_id] and done.redriven == [(round_id, "shuffler", "RoundSettled")]
    assert w.wallet.available("alice") == START + 1000  # applied once, by the first pass


def test_a_round_failed_by_an_outage_is_retried_at_the_next_pass_however_long_the_outage(w: World) -> None:
    """Issue 27 item 9: an outage is not the round's fault; backing its rounds off (up to 300 s) left the
    reconciler idle long after the service was back."""
    reconciler = w.reconciler()
    round_id = settled_with_its_message_lost(w)
    w.shuffler.apply_round_event = shuffler_away  # type: ignore[method-assign]
    for _ in range(8):
        assert w.run(reconciler.run_once()).failed == [round_id]
        w.clock.advance(reconciler.interval_s)
    del w.shuffler.apply_round_event  # back
    done = w.run(reconciler.run_once())
    assert done.reconciled == [round_id] and done.redriven == [(round_id, "shuffler", "RoundSettled")]


def test_a_service_that_goes_away_mid_page_is_not_called_for_the_rest_of_the_pass(w: World) -> None:
    reconciler = w.reconciler()
    rounds = [w.play_round(key=f"k{n}") for n in range(20)]
    w.deliver(drop=("RoundSettled",))
    w.clock.advance(BOUND_S + 1)
    calls: list[str] = []

    async def away(envelope: Any) -> bool:
        calls.append(envelope.stream_id)
        raise Unavailable("the shuffler service is unavailable; try again")

    w.shuffler.apply_round_event = away  # type: ignore[method-assign]
    done = w.run(reconciler.run_once())
    assert sorted(done.failed) == sorted(rounds) and len(calls) <= 16  # those already under way when it failed
    del w.shuffler.apply_round_event
    assert sorted(w.run(reconciler.run_once()).reconciled) == sorted(rounds)


def test_a_failed_pass_is_retried_after_the_interval_not_a_grown_backoff(w: World) -> None:
    """After a database outage the loop's backoff had grown to 20 s, and nothing was re-driven meanwhile."""
    reconciler = w.reconciler()
    assert [reconciler.backoff_s(failures) for failures in (1, 5, 30)] == [reconciler.interval_s] * 3


def test_a_backlog_drains_in_back_to_back_passes_of_a_page_each(w: World, caplog: pytest.LogCaptureFixture) -> None:
    """Issue 27 item 9: a broker outage left thousands of rounds for the reconciler, which took a page per
    interval. Here the interval is an hour: only back-to-back passes drain the backlog, a page each."""
    reconciler = Reconciler(w.book, [w.wallet, w.shuffler, w.commission], w.wallet, w.clock, Pace(3600, 4), settle_after_s=BOUND_S)
    rounds = [w.play_round(key=f"k{n}") for n in range(10)]
    w.deliver(drop=("RoundSettled",))
    w.clock.advance(BOUND_S + 1)
    passes: list[ReconcilerPass] = []
    run_once = reconciler.run_once

    async def counted() -> ReconcilerPass:
        passes.append(await run_once())
        return passes[-1]

    reconciler.run_once = counted  # type: ignore[method-assign]

    async def main() -> None:
        reconciler.start()
        for _ in range(200):
            if w.wallet.available("alice") == START + 10 * 1000:
                break
            await asyncio.sleep(0.01)
        await reconciler.stop()

    with caplog.at_level(logging.WARNING, logger="croupier_game.application.reconciler"):
        w.run(main())
    assert w.wallet.available("alice") == START + 10 * 1000
    assert [len(p.reconciled) for p in passes[:3]] == [4, 4, 2]
    assert sorted(r for p in passes for r in p.reconciled) == sorted(rounds)
    # One WARNING a pass for what the services had missed, not one per round and service.
    assert len([r for r in caplog.records if "had not applied" in r.getMessage()]) == 3


def test_a_full_page_that_reaches_rounds_within_the_bound_waits_for_the_interval(w: World) -> None:
    """Through a broker outage the page was full of rounds not yet due: a pass at once each time one became
    due ran ~1.5 passes a second (and logged each) for a round or two."""
    reconciler = Reconciler(w.book, [w.wallet, w.shuffler, w.commission], w.wallet, w.clock, Pace(5, 3), settle_after_s=BOUND_S)
    wakes: list[bool] = []
    reconciler.wake = lambda: wakes.append(True)  # type: ignore[method-assign]
    due = [w.play_round(key=f"due{n}") for n in range(2)]
    w.deliver(drop=("RoundSettled",))
    w.clock.advance(BOUND_S + 1)
    w.play_round(key="recent")  # ended now: within the bound
    w.deliver(drop=("RoundSettled",))
    done = w.run(reconciler.run_once())
    assert sorted(done.reconciled) == sorted(due) and wakes == []
    for n in range(4):
        w.play_round(key=f"more{n}")
    w.deliver(drop=("RoundSettled",))
    w.clock.advance(BOUND_S + 1)  # all due now: a full page of them, and more behind it
    assert len(w.run(reconciler.run_once()).reconciled) == 3 and wakes == [True]


# ---------------------------------------------------------------- pending reservations past their expiry


def test_a_reservation_for_a_round_never_written_is_released_after_its_expiry_once(w: World) -> None:
    reconciler = w.reconciler()
    w.run(w.wallet.reserve_stakes("t-crash", "alice", "never-written", 700, "USD", {"ante": 700}))  # then the game crashed
    assert w.wallet.available("alice") == START - 700
    w.clock.advance(119)
    assert w.run(reconciler.run_once()).released == []
    w.clock.advance(2)
    done = w.run(reconciler.run_once())
    assert done.released == ["never-written"] and done.failed == []
    assert w.wallet.available("alice") == START
    assert w.run(reconciler.run_once()) == ReconcilerPass()  # resolved: nothing left to do


def test_a_seat_whose_next_round_was_released_moves_on_to_a_new_round(w: World) -> None:
    """PlaceBets reserved the seat's next round and crashed before writing it: once the reconciler released
    that round, the seat's next round is a new one, so betting again opens it instead of a closed round."""
    reconciler = w.reconciler()
    seat = w.run(w.seats.join_table(ALICE, "casino-war-usd"))[0]
    crashed = seat.next_round_id
    w.run(w.wallet.reserve_stakes("t-crash", "alice", crashed, 1000, "USD", {"ante": 1000}))
    w.clock.advance(121)
    assert w.run(reconciler.run_once()).released == [crashed]
    w.cards.stack(*WIN)
    view = w.run(w.play.place_bets(ALICE, seat.seat_id, {"ante": 1000}, "after-the-crash", ""))
    assert view.round_id not in ("", crashed) and w.phase(view.round_id) == "dealing"


def test_an_open_rounds_reservation_is_left_alone(w: World) -> None:
    reconciler = w.reconciler()
    round_id = w.play_round(cards=["Kc", "Kd"])  # a tie: waiting for the player's war or surrender
    assert w.phase(round_id) == "deciding"
    w.deliver()
    w.clock.advance(200)
    done = w.run(reconciler.run_once())
    assert done.left_open == [round_id] and done.released == [] and done.redriven == []
    assert w.phase(round_id) == "deciding" and w.wallet.available("alice") == START - 1000


def test_an_expired_reservation_of_a_round_over_has_its_settlement_re_driven(w: World) -> None:
    reconciler = w.reconciler()
    round_id = w.play_round()
    w.deliver(drop=("RoundSettled",))
    w.clock.advance(121)  # past the reservation's expiry and the bound alike: re-driven once, not twice
    done = w.run(reconciler.run_once())
    assert [r for r in done.redriven if r[1] == "wallet"] == [(round_id, "wallet", "RoundSettled")]
    assert w.run(w.wallet.expired_reservations(10)) == []
    assert w.wallet.available("alice") == START + 1000


# ---------------------------------------------------------------- one reconciler among the replicas


def test_of_two_reconcilers_only_the_leader_acts(w: World) -> None:
    leader, other = Recorded(True), Recorded(False)
    first, second = w.reconciler(leader), w.reconciler(other)
    round_id = w.play_round()
    w.deliver(drop=("RoundSettled",))
    w.clock.advance(BOUND_S + 1)
    assert w.run(second.run_once()) == ReconcilerPass(leading=False)
    assert w.wallet.available("alice") == START - 1000
    assert w.run(first.run_once()).reconciled == [round_id]
    assert w.wallet.available("alice") == START + 1000
    leader.leads, other.leads = False, True  # the leader went away: the other takes over, with nothing left
    assert w.run(first.run_once()) == ReconcilerPass(leading=False)
    assert w.run(second.run_once()) == ReconcilerPass()


def test_the_background_task_reconciles_and_gives_the_lead_up_at_stop(w: World) -> None:
    lead = Recorded(True)
    reconciler = w.reconciler(lead)
    w.play_round()
    w.deliver(drop=("RoundSettled",))
    w.clock.advance(BOUND_S + 1)

    async def main() -> None:
        reconciler.start()
        for _ in range(500):
            if w.wallet.available("alice") == START + 1000:
                break
            await asyncio.sleep(0.01)
        await reconciler.stop()

    w.run(main())
    assert w.wallet.available("alice") == START + 1000
    assert lead.calls[-1] == "release" and not reconciler.running
