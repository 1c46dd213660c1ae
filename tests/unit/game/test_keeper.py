"""The keeper: decisions left past the table's timeout get the table's default action (as a
player's Decide would), rounds that cannot finish are voided with refunds, a player deciding at
the same moment wins, and a restarted keeper finishes what the last one left."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from croupier_game.adapters.memory import InMemoryGameStore
from croupier_game.adapters.sql import SqlGameStore, game_metadata
from croupier_game.application.audit import AuditUseCases
from croupier_game.application.book_loop import Pace
from croupier_game.application.keeper import Keeper, KeeperPass
from croupier_game.application.play import PlayUseCases
from croupier_game.application.rounds import RoundBook
from croupier_game.application.seats import SeatUseCases
from croupier_game.application.use_cases import wire_use_cases
from croupier_game.config import DEFAULT_TABLES_FILE, GameSettings
from croupier_game.domain.catalogue import Catalogue
from croupier_game.domain.round import KEEPER_CAUSATION
from croupier_platform.db import create_schema, make_engine
from croupier_platform.errors import Unavailable
from croupier_platform.leadership import Leadership
from croupier_rules.events import DecisionMade
from tests.refusals import raises_reason

from .conftest import ALICE, BOB, OPERATOR
from .fakes import FakeDealer, FakeDealerPoints, FakeShuffler, FakeWallet

START = 1_000_000
HOLDEM_DECIDING = ["2s", "7d", "Ac", "Ad", "Jh", "Kc", "9s"]  # Call/Fold asked after the first deal


class ManualClock:
    """Time stands still until the test moves it."""

    def __init__(self) -> None:
        self.now = datetime(2025, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@dataclass
class Fakes:
    """The other services and the clock: they outlive a restart of the game service."""

    clock: ManualClock
    shuffler: FakeShuffler
    dealer: FakeDealer
    wallet: FakeWallet


@dataclass
class Service:
    """A game service (book, use cases, keeper) on a store, as one process would run it."""

    store: Any
    fakes: Fakes
    book: RoundBook
    seats: SeatUseCases
    play: PlayUseCases
    audit: AuditUseCases
    keeper: Keeper

    @property
    def clock(self) -> ManualClock:
        return self.fakes.clock

    @property
    def wallet(self) -> FakeWallet:
        return self.fakes.wallet

    def run(self, coroutine: Any) -> Any:
        return asyncio.run(coroutine)

    def keep(self) -> KeeperPass:
        return self.run(self.keeper.run_once())

    def pump(self) -> None:
        pending = self.store.outbox.pending(1_000)
        for message in pending:
            self.wallet.apply(message.envelope)
        self.store.outbox.mark_published([m.id for m in pending])

    def open_round(self, table: str, bets: dict[str, int], cards: list[str], key: str = "k1", *, deal: bool = True) -> str:
        self.fakes.shuffler.stack(*cards)
        seat = self.run(self.seats.join_table(ALICE, table))[0].seat_id
        view = self.run(self.play.place_bets(ALICE, seat, bets, key, ""))
        if deal:
            view = self.run(self.play.deal(ALICE, view.round_id))
        return view.round_id

    def view(self, round_id: str):  # noqa: ANN201
        return self.run(self.play.get_round(ALICE, round_id))

    def envelopes(self, round_id: str) -> list:
        return self.run(self.book.in_transaction(lambda uow: uow.events.read_stream(round_id)))

    def replay_ok(self, round_id: str) -> list[str]:
        self.pump()
        replay = self.run(self.audit.replay_round(OPERATOR, round_id))
        assert replay.disagreements == [] and replay.notes == []
        assert json.loads(replay.report_json)["checks"]["wallet"] == "ok"
        return replay.timeline


def fakes() -> Fakes:
    shuffler = FakeShuffler()
    wallet = FakeWallet()
    wallet.fund("alice", START, "USD")
    return Fakes(ManualClock(), shuffler, FakeDealer(shuffler), wallet)


def service(
    store: Any, world: Fakes, *, tables_file: Path = DEFAULT_TABLES_FILE, stuck_after_s: float = 300,
    leadership: Leadership | None = None,
) -> Service:
    book = RoundBook(store, world.clock, wake_log_readers=lambda: None)
    points = FakeDealerPoints(points={("bob", "USD"): 800})  # Bob may deal at every war-p2p table
    wired = wire_use_cases(
        book, Catalogue.from_toml(tables_file), GameSettings(), world.clock, shuffler=world.shuffler, dealer=world.dealer,
        wallet=world.wallet, points=points, shoes=world.shuffler, ledger=world.wallet, known_shoes=False,
    )  # fmt: skip
    keeper = Keeper(book, wired.seats, wired.play, wired.audit, world.clock, Pace(0.01, leadership=leadership), stuck_after_s=stuck_after_s)
    return Service(store, world, book, wired.seats, wired.play, wired.audit, keeper)


@pytest.fixture
def svc() -> Service:
    return service(InMemoryGameStore(), fakes())


def results(view) -> dict[str, tuple[int, int, str]]:  # noqa: ANN001
    return {r.bet: (r.stake, r.returned, r.outcome) for r in view.results}


def decisions(s: Service, round_id: str) -> list[tuple[dict, str | None]]:
    return [(e.payload, e.causation_id) for e in s.envelopes(round_id) if e.event_type == "DecisionMade"]


# ---------------------------------------------------------------- decisions left past the timeout


def test_holdem_left_at_call_or_fold_is_folded_after_the_table_timeout(svc: Service) -> None:
    round_id = svc.open_round("casino-holdem-usd", {"ante": 1000, "aa_bonus": 500}, HOLDEM_DECIDING)
    assert svc.view(round_id).phase == "deciding"
    svc.clock.advance(29)
    assert not svc.keep().acted
    svc.clock.advance(1)  # exactly the timeout: not yet "longer than"
    assert not svc.keep().acted and svc.view(round_id).phase == "deciding"
    svc.clock.advance(0.001)
    done = svc.keep()
    assert done.decided == [(round_id, "ante", "fold")] and done.voided == [] and done.skipped == []

    view = svc.view(round_id)
    assert view.phase == "settled"
    assert results(view) == {"ante": (1000, 0, "fold"), "aa_bonus": (500, 0, "fold")}
    # The rules event is exactly a player's fold; the envelope says the keeper made it.
    assert decisions(svc, round_id) == [(DecisionMade(bet="ante", choice="fold").model_dump(mode="json"), KEEPER_CAUSATION)]
    kept = [e for e in svc.envelopes(round_id) if e.causation_id == KEEPER_CAUSATION]
    assert [e.event_type for e in kept] == ["DecisionMade", "RoundSettled"]
    assert all(e.causation_id is None for e in svc.envelopes(round_id)[:-2])
    timeline = svc.replay_ok(round_id)
    assert timeline[-2] == "v6 DecisionMade (by the keeper): ante fold"
    assert svc.wallet.available("alice") == START - 1500  # the wallet settled the fold
    assert not svc.keep().acted  # over: nothing more


def test_casino_war_tie_left_is_surrendered_for_half_the_ante(svc: Service) -> None:
    round_id = svc.open_round("casino-war-usd", {"ante": 1000}, ["Kc", "Kd"])
    svc.clock.advance(30.5)
    assert svc.keep().decided == [(round_id, "ante", "surrender")]
    assert results(svc.view(round_id)) == {"ante": (1000, 500, "surrender")}
    svc.replay_ok(round_id)
    assert svc.wallet.available("alice") == START - 500


def test_a_player_gone_with_a_tie_pending_against_a_player_dealer_surrenders_the_ante(svc: Service) -> None:
    # docs/rules.md §2: after the deal with a tie pending, the round goes on as if the player surrendered.
    svc.wallet.fund("bob", START, "USD")
    svc.run(svc.seats.join_table(BOB, "war-p2p-i-usd", "dealer", "Bobby", auto_confirm=True))
    round_id = svc.open_round("war-p2p-i-usd", {"ante": 1000}, ["Kc", "Kd"])
    svc.clock.advance(30.5)
    assert svc.keep().decided == [(round_id, "ante", "surrender")]
    view = svc.view(round_id)
    assert results(view) == {"ante": (1000, 0, "surrender")} and (view.commission, view.dealer_net) == (18, 1000 - 18)
    svc.pump()
    assert svc.wallet.charge_commission(round_id, view.commission)  # the commission service's part
    assert svc.wallet.available("alice") == START - 1000 and svc.wallet.available("bob") == START + view.dealer_net


def test_a_player_gone_before_the_deal_against_a_player_dealer_is_refunded_after_the_timeout(svc: Service) -> None:
    svc.wallet.fund("bob", START, "USD")
    svc.run(svc.seats.join_table(BOB, "war-p2p-i-usd", "dealer", "Bobby", auto_confirm=True))
    round_id = svc.open_round("war-p2p-i-usd", {"ante": 1000}, [], deal=False)
    svc.clock.advance(30)
    assert not svc.keep().acted  # the table's decision timeout, not yet passed
    svc.clock.advance(0.5)
    assert svc.keep().voided == [round_id]
    svc.pump()
    assert svc.wallet.available("alice") == START and svc.wallet.available("bob") == START


def test_dueling_tie_with_both_bets_pending_surrenders_each(svc: Service) -> None:
    round_id = svc.open_round("dueling-for-dollars-usd", {"player": 1000, "dealer": 600}, ["9c", "9d"])
    assert svc.view(round_id).pending_bets == ["player", "dealer"]
    svc.clock.advance(31)
    done = svc.keep()
    assert done.decided == [(round_id, "player", "surrender"), (round_id, "dealer", "surrender")]
    assert results(svc.view(round_id)) == {"player": (1000, 500, "surrender"), "dealer": (600, 300, "surrender")}
    assert [(p["bet"], p["choice"], c) for p, c in decisions(svc, round_id)] == [
        ("player", "surrender", KEEPER_CAUSATION), ("dealer", "surrender", KEEPER_CAUSATION)]  # fmt: skip
    svc.replay_ok(round_id)
    assert svc.wallet.available("alice") == START - 800


def test_dueling_bet_the_player_left_gets_the_default_and_the_war_is_dealt(svc: Service) -> None:
    round_id = svc.open_round("dueling-for-dollars-usd", {"player": 1000, "dealer": 600}, ["9c", "9d", "2c", "3c", "4c", "Ks", "5d"])
    svc.clock.advance(10)
    svc.run(svc.play.decide(ALICE, round_id, "war", "player"))  # the player answered one bet only
    svc.clock.advance(20.5)  # 30.5 s after the decision was asked, though 20.5 s after the player's answer
    assert svc.keep().decided == [(round_id, "dealer", "surrender")]
    view = svc.view(round_id)
    assert view.phase == "settled"  # the keeper's answer sent the round to war; the cards were dealt
    assert results(view)["dealer"] == (600, 300, "surrender") and results(view)["player"] == (1000, 2000, "win after war")
    assert [c for _, c in decisions(svc, round_id)] == [None, KEEPER_CAUSATION]
    svc.replay_ok(round_id)


def test_the_timeout_is_the_tables_as_the_round_recorded_it(tmp_path: Path) -> None:
    text = DEFAULT_TABLES_FILE.read_text(encoding="utf-8")
    quick = tmp_path / "tables.toml"
    quick.write_text(text.replace('table_id = "casino-holdem-usd"\ngame = "casino-holdem"\ncurrency = "USD"\n',
                                  'table_id = "casino-holdem-usd"\ngame = "casino-holdem"\ncurrency = "USD"\n'
                                  '[tables.table]\ndecision_timeout_s = 5\n'), encoding="utf-8")  # fmt: skip
    s = service(InMemoryGameStore(), fakes(), tables_file=quick)
    round_id = s.open_round("casino-holdem-usd", {"ante": 1000}, HOLDEM_DECIDING)
    s.clock.advance(5)
    assert not s.keep().acted
    s.clock.advance(0.5)
    assert s.keep().decided == [(round_id, "ante", "fold")]


# ---------------------------------------------------------------- rounds that cannot finish


def test_round_in_dealing_with_the_dealer_failing_is_voided_with_every_stake_refunded(svc: Service) -> None:
    async def unreachable(*args: Any) -> Any:
        raise Unavailable("dealer unreachable")

    svc.fakes.dealer.deal_cards = unreachable  # type: ignore[method-assign]
    round_id = svc.open_round("casino-war-usd", {"ante": 1000, "tie": 500}, [], deal=False)
    with raises_reason("SERVICE_UNAVAILABLE", Unavailable):
        svc.run(svc.play.deal(ALICE, round_id))
    assert svc.view(round_id).phase == "dealing" and svc.wallet.available("alice") == START - 1500
    svc.clock.advance(300)
    assert not svc.keep().acted
    svc.clock.advance(1)
    done = svc.keep()
    assert done.voided == [round_id] and done.decided == []
    view = svc.view(round_id)
    assert view.phase == "voided"
    voided = next(e for e in svc.envelopes(round_id) if e.event_type == "RoundVoided")
    assert voided.causation_id == KEEPER_CAUSATION
    assert voided.payload == {"event_type": "RoundVoided", "schema_version": 1,
                              "reason": "unable to finish: no progress for 301 s (keeper)",
                              "refunds": {"ante": 1000, "tie": 500}}  # fmt: skip
    svc.replay_ok(round_id)
    assert svc.wallet.available("alice") == START  # every stake back


def test_war_stake_taken_then_the_dealer_fails_is_voided_with_both_stakes_back(svc: Service) -> None:
    round_id = svc.open_round("casino-war-usd", {"ante": 1000}, ["Kc", "Kd"])

    async def unreachable(*args: Any) -> Any:
        raise Unavailable("dealer unreachable")

    svc.fakes.dealer.deal_cards = unreachable  # type: ignore[method-assign]
    with raises_reason("SERVICE_UNAVAILABLE", Unavailable):
        svc.run(svc.play.decide(ALICE, round_id, "raise", ""))  # the raise is reserved, the war not dealt
    assert svc.view(round_id).phase == "dealing" and svc.wallet.available("alice") == START - 2000
    svc.clock.advance(301)
    assert svc.keep().voided == [round_id]
    svc.replay_ok(round_id)
    assert svc.wallet.available("alice") == START


def test_nothing_happens_before_the_timeouts(svc: Service) -> None:
    deciding = svc.open_round("casino-holdem-usd", {"ante": 1000}, HOLDEM_DECIDING)
    dealing = svc.open_round("casino-war-usd", {"ante": 1000}, [], key="k2", deal=False)
    for _ in range(3):
        svc.clock.advance(9)
        assert svc.keep() == KeeperPass()
    assert svc.view(deciding).phase == "deciding" and svc.view(dealing).phase == "dealing"
    svc.clock.advance(4)  # the decision is due (31 s); the round waiting for Deal is not (300 s)
    assert svc.keep().decided == [(deciding, "ante", "fold")]
    assert svc.view(dealing).phase == "dealing"
    svc.clock.advance(269)  # 300 s: not longer than the stuck timeout yet
    assert not svc.keep().acted
    svc.clock.advance(1)
    assert svc.keep().voided == [dealing]


def test_a_pass_reads_no_stream_of_a_round_this_process_wrote_at_the_projections_version() -> None:
    # At 64 players the open rounds' streams, read and folded at each of their steps, were most of the
    # keeper's cost; a round this process wrote is remembered at its version. One another replica moved
    # on (a second service on the same store) is read, and acting always reads the round afresh.
    world, store = fakes(), InMemoryGameStore()
    mine, other = service(store, world), service(store, world)
    deciding = mine.open_round("casino-war-usd", {"ante": 1000}, ["Kc", "Kd"])
    loads: list[str] = []
    load = mine.book.load

    async def counted(round_id: str):  # noqa: ANN202
        loads.append(round_id)
        return await load(round_id)

    mine.book.load = counted  # type: ignore[method-assign]
    assert mine.keep() == KeeperPass() and loads == []
    mine.run(other.play.decide(ALICE, deciding, "raise", ""))  # another replica's step: a version not remembered here
    assert other.view(deciding).phase == "settled"
    dealing = other.open_round("casino-war-usd", {"ante": 1000}, [], key="k2", deal=False)
    mine.clock.advance(301)
    assert mine.keep().voided == [dealing]
    assert loads == [dealing, dealing]  # its due (another replica wrote it), then afresh to act


# ---------------------------------------------------------------- races, leadership and restarts


def test_a_player_deciding_at_the_same_moment_wins(svc: Service) -> None:
    round_id = svc.open_round("casino-holdem-usd", {"ante": 1000}, HOLDEM_DECIDING)
    assert not svc.keep().acted  # the keeper has read the round once
    svc.clock.advance(31)
    load = svc.book.load
    armed = True

    async def load_then_the_player_decides(rid: str):  # noqa: ANN202
        nonlocal armed
        round_ = await load(rid)
        if armed and rid == round_id:
            armed = False
            await svc.play.decide(ALICE, round_id, "call", "")  # between the keeper's read and its append
        return round_  # what the keeper read: stale now

    svc.book.load = load_then_the_player_decides  # type: ignore[method-assign]
    done = svc.keep()
    assert done.skipped == [round_id] and done.decided == [] and not armed
    assert [(p["choice"], c) for p, c in decisions(svc, round_id)] == [("call", None)]
    assert svc.view(round_id).phase == "settled"
    assert svc.keep() == KeeperPass()  # and nothing later either
    svc.replay_ok(round_id)


def test_the_keeper_first_then_the_player_is_refused(svc: Service) -> None:
    round_id = svc.open_round("casino-war-usd", {"ante": 1000}, ["Kc", "Kd"])
    svc.clock.advance(31)
    assert svc.keep().decided == [(round_id, "ante", "surrender")]
    with pytest.raises(Exception, match="settled"):
        svc.run(svc.play.decide(ALICE, round_id, "raise", ""))
    assert len(decisions(svc, round_id)) == 1


class Recorded(Leadership):
    def __init__(self, leads: bool) -> None:
        self.leads = leads
        self.calls: list[str] = []

    def acquire(self) -> bool:
        self.calls.append("acquire")
        return self.leads

    def release(self) -> None:
        self.calls.append("release")


def test_a_keeper_that_does_not_lead_leaves_the_rounds_alone() -> None:
    world = fakes()
    lead = Recorded(False)
    s = service(InMemoryGameStore(), world, leadership=lead)
    round_id = s.open_round("casino-war-usd", {"ante": 1000}, ["Kc", "Kd"])
    s.clock.advance(60)
    assert s.keep() == KeeperPass(leading=False)
    assert s.view(round_id).phase == "deciding"
    lead.leads = True  # the leader went away: this one takes over
    assert s.keep().decided == [(round_id, "ante", "surrender")]


def test_the_background_task_keeps_and_gives_the_lead_up_at_stop() -> None:
    world = fakes()
    lead = Recorded(True)
    s = service(InMemoryGameStore(), world, leadership=lead)
    round_id = s.open_round("casino-war-usd", {"ante": 1000}, ["Kc", "Kd"])
    s.clock.advance(31)

    async def main() -> None:
        s.keeper.start()
        for _ in range(500):
            if (await s.play.get_round(ALICE, round_id)).phase == "settled":
                break
            await asyncio.sleep(0.01)
        await s.keeper.stop()

    s.run(main())
    assert s.view(round_id).phase == "settled" and not s.keeper.running
    assert lead.calls[0] == "acquire" and lead.calls[-1] == "release"


def test_a_restarted_keeper_finishes_what_the_old_one_left(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'game.db'}"
    engine = make_engine(url)
    create_schema(engine)
    create_schema(engine, game_metadata)
    world = fakes()
    old = service(SqlGameStore(engine), world)
    dueling = old.open_round("dueling-for-dollars-usd", {"player": 1000, "dealer": 600}, ["9c", "9d"], key="d")
    stuck = old.open_round("casino-war-usd", {"ante": 1000}, [], key="w", deal=False)
    assert not old.keep().acted
    world.clock.advance(31)
    decide = old.play.decide_as_system
    calls = 0

    async def crash_after_the_first(*args: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls > 1:
            raise RuntimeError("the process died")
        return await decide(*args)

    old.play.decide_as_system = crash_after_the_first  # type: ignore[method-assign]
    done = old.keep()
    assert done.decided == [(dueling, "player", "surrender")] and done.failed == [dueling]
    engine.dispose()  # the old process is gone; nothing of it is kept

    world.clock.advance(270)
    engine = make_engine(url)
    new = service(SqlGameStore(engine), world)
    done = new.keep()
    assert done.decided == [(dueling, "dealer", "surrender")] and done.voided == [stuck]
    assert results(new.view(dueling)) == {"player": (1000, 500, "surrender"), "dealer": (600, 300, "surrender")}
    assert new.view(stuck).phase == "voided"
    for round_id in (dueling, stuck):
        new.replay_ok(round_id)
    assert world.wallet.available("alice") == START - 800
    assert new.keep() == KeeperPass()
    engine.dispose()


def test_keeper_settings_from_arguments_then_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert (GameSettings().keeper_interval_s, GameSettings().stuck_round_void_after_s) == (1.0, 300.0)
    monkeypatch.setenv("CROUPIER_KEEPER_INTERVAL_S", "0.2")
    monkeypatch.setenv("CROUPIER_STUCK_ROUND_VOID_AFTER_S", "5")
    assert (GameSettings().keeper_interval_s, GameSettings().stuck_round_void_after_s) == (0.2, 5.0)
    assert GameSettings(stuck_round_void_after_s=2).stuck_round_void_after_s == 2.0


def test_the_keepers_lock_is_its_own_and_the_outboxs_is_unchanged() -> None:
    from croupier_platform.leadership import outbox_lock_key

    assert outbox_lock_key("wallet") == outbox_lock_key("wallet", "outbox") == -3210774257860591482
    assert outbox_lock_key("game", "keeper") not in {outbox_lock_key("game"), outbox_lock_key("wallet", "keeper")}


# ---------------------------------------------------------------- presence (a WatchSeat stream's drop)

GRACE_S, IDLE_S = 5, 120


@pytest.fixture
def present(tmp_path: Path) -> Service:
    """Every table with a 5 s presence grace and a 120 s idle limit (decisions still time out after 30 s)."""
    catalogue = DEFAULT_TABLES_FILE.read_text(encoding="utf-8")
    tables = tmp_path / "tables.toml"
    entries = []
    for block in catalogue.split("[[tables]]")[1:]:
        body, _, _ = block.partition("[tables.table]")
        extra = block[len(body):].replace("[tables.table]", "").strip()
        entries.append(f"[[tables]]{body.rstrip()}\n[tables.table]\npresence_grace_s = {GRACE_S}\nidle_limit_s = {IDLE_S}\n{extra}\n")
    tables.write_text("\n".join(entries), encoding="utf-8")
    return service(InMemoryGameStore(), fakes(), tables_file=tables)


def watched(s: Service, seat_id: str) -> None:
    """A WatchSeat stream beats for the seat now (Presence marks it seen, through a stream)."""
    s.run(s.book.in_transaction(lambda uow: uow.seats.mark_seen([seat_id], s.book.now(), watched=True)))


def seat_of(s: Service, round_id: str) -> str:
    return s.view(round_id).seat_id


def test_a_watched_player_gone_with_a_decision_pending_gets_the_default_after_the_grace(present: Service) -> None:
    round_id = present.open_round("casino-holdem-usd", {"ante": 1000}, HOLDEM_DECIDING)
    seat = seat_of(present, round_id)
    watched(present, seat)
    present.clock.advance(GRACE_S - 1)
    watched(present, seat)  # a heartbeat: still there
    present.clock.advance(GRACE_S - 1)
    assert not present.keep().acted
    present.clock.advance(1.5)  # the stream dropped GRACE_S + 0.5 s ago, long before the 30 s decision timeout
    done = present.keep()
    assert done.decided == [(round_id, "ante", "fold")] and done.disconnected == [seat]
    assert present.view(round_id).phase == "settled"
    assert decisions(present, round_id)[-1][1] == KEEPER_CAUSATION
    assert not present.keep().acted  # acted on once
    present.replay_ok(round_id)


def test_a_watched_player_gone_before_the_deal_gets_the_bets_back(present: Service) -> None:
    round_id = present.open_round("casino-war-usd", {"ante": 1000}, [], deal=False)
    watched(present, seat_of(present, round_id))
    present.clock.advance(GRACE_S + 0.5)
    done = present.keep()
    assert done.voided == [round_id] and done.disconnected == [seat_of(present, round_id)]
    view = present.view(round_id)
    assert view.phase == "voided" and "connection dropped before the deal" in view.void_reason
    present.pump()
    assert present.wallet.available("alice") == START


def test_a_player_who_never_watched_is_left_to_the_decision_timeout(present: Service) -> None:
    round_id = present.open_round("casino-holdem-usd", {"ante": 1000}, HOLDEM_DECIDING)
    present.clock.advance(GRACE_S * 3)
    assert not present.keep().acted and present.view(round_id).phase == "deciding"


def test_a_watched_dealer_gone_mid_round_lets_the_round_go_on(present: Service) -> None:
    present.wallet.fund("bob", START, "USD")
    dealer_seat = present.run(present.seats.join_table(BOB, "war-p2p-i-usd", "dealer", "Bobby", auto_confirm=True))[0].seat_id
    round_id = present.open_round("war-p2p-i-usd", {"ante": 1000}, ["Kc", "Kd"])
    watched(present, dealer_seat)
    present.clock.advance(GRACE_S + 0.5)
    done = present.keep()
    assert done.disconnected == [dealer_seat] and done.decided == [] and done.voided == []
    assert present.view(round_id).phase == "deciding"  # the player may still decide


def test_a_seat_unseen_past_the_idle_limit_is_given_up(present: Service) -> None:
    seat = present.run(present.seats.join_table(ALICE, "casino-war-usd"))[0].seat_id
    present.clock.advance(IDLE_S - 1)
    assert present.keep().ended == []
    present.clock.advance(1.5)
    assert present.keep().ended == [seat]
    stream = present.run(present.book.in_transaction(lambda uow: uow.events.read_stream(seat)))
    assert [(e.event_type, e.payload.get("reason"), e.causation_id) for e in stream][-1] == ("SeatLeft", "idle", KEEPER_CAUSATION)
    with pytest.raises(Exception, match="no seat"):
        present.run(present.seats.seat_status(ALICE, seat))


def test_a_seat_with_a_round_open_is_not_idle(present: Service) -> None:
    round_id = present.open_round("casino-war-usd", {"ante": 1000}, [], deal=False)
    present.clock.advance(IDLE_S + 1)  # the stuck-round rule (300 s) has not voided it yet
    assert present.keep().ended == [] and present.view(round_id).phase == "dealing"
