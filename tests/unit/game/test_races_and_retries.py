"""Money under any interleaving: a stake reserved for a decision that lost a race (to another
decision, the keeper's default, an identical retry) is released unless the round records it, and
settlement releases what nobody released; idempotency keys stand for one request; retries of Deal,
Decide and LeaveTable get success; each side of a player-dealer round sees its own view."""

from __future__ import annotations

import asyncio
import json

import grpc
import pytest

from croupier_game.domain.round import KEEPER_CAUSATION
from croupier_platform.errors import AlreadyExists, FailedPrecondition, NotFound, refusal_for
from croupier_platform.eventstore import ConcurrencyConflict
from croupier_rules.errors import RuleError
from croupier_wallet.domain.errors import TransferIdReused
from tests.refusals import raises_reason
from tests.unit.wallet.helpers import make_wallet

from .conftest import ALICE, BOB, OPERATOR, Game

HOLDEM = ["2s", "7d", "Ac", "Ad", "Jh", "Kc", "9s"]


def holdem_deciding(game: Game, key: str = "k1") -> str:
    game.shuffler.stack(*HOLDEM)
    seat = game.seat("casino-holdem-usd")
    view = game.run(game.play.place_bets(ALICE, seat, {"ante": 1000}, key, ""))
    view = game.run(game.play.deal(ALICE, view.round_id))
    assert view.phase == "deciding" and set(view.options) == {"call", "fold"}
    return view.round_id


def pending(game: Game, player: str = "alice") -> list:
    return [e for e in game.wallet.entries if e.player_id == player and e.status == "pending"]


def audited(game: Game, round_id: str) -> None:
    game.pump()
    replay = game.run(game.audit.replay_round(OPERATOR, round_id))
    assert replay.ok and replay.disagreements == [], (replay.disagreements, replay.notes)


@pytest.mark.parametrize("winner", ["fold", "call"])
def test_a_decision_that_loses_the_race_releases_its_stake(game: Game, winner: str) -> None:
    round_id = holdem_deciding(game)
    stale = game.run(game.book.load(round_id))  # noqa: SLF001 - read before the other decision
    game.run(game.play.decide(ALICE, round_id, winner, ""))
    loser = "call" if winner == "fold" else "fold"
    with raises_reason("CONCURRENT_CHANGE", ConcurrencyConflict):  # the keeper's path: the decision on the round as it read it
        game.run(game.play.decide_as_system(stale, loser, "", KEEPER_CAUSATION))
    game.pump()
    assert pending(game) == []
    calls = [e for e in game.wallet.reservations(round_id) if e.bets == {"call": 2000}]
    assert [e.status for e in calls] == (["voided"] if winner == "fold" else ["posted"])
    audited(game, round_id)


def test_the_same_decision_twice_at_once_reserves_once_and_keeps_it(game: Game) -> None:
    round_id = holdem_deciding(game)
    stale = game.run(game.book.load(round_id))  # noqa: SLF001
    game.run(game.play.decide(ALICE, round_id, "call", ""))
    with raises_reason("CONCURRENT_CHANGE", ConcurrencyConflict):
        game.run(game.play.decide_as_system(stale, "call", "", KEEPER_CAUSATION))
    calls = [e for e in game.wallet.reservations(round_id) if e.bets == {"call": 2000}]
    assert len(calls) == 1 and calls[0].status == "pending"  # the winner's: the same transaction, not released
    audited(game, round_id)
    assert pending(game) == []


def test_concurrent_call_and_fold_leave_nothing_reserved(game: Game) -> None:
    async def race(round_id: str) -> list:
        return await asyncio.gather(
            game.play.decide(ALICE, round_id, "call", ""), game.play.decide(ALICE, round_id, "fold", ""),
            return_exceptions=True,
        )

    for n in range(10):
        round_id = holdem_deciding(game, f"k{n}")
        outcomes = game.run(race(round_id))
        assert sum(not isinstance(o, Exception) for o in outcomes) >= 1
        assert all(isinstance(o, (RuleError, FailedPrecondition)) for o in outcomes if isinstance(o, Exception))
        audited(game, round_id)
        assert pending(game) == []


def test_a_stake_never_released_is_released_when_the_round_settles(game: Game) -> None:
    round_id = holdem_deciding(game)
    # A crash between reserving the call and appending it: nothing released it.
    game.run(game.wallet.reserve_stakes(f"{round_id}:stakes:5:ante:call", "alice", round_id, 2000, "USD", {"call": 2000}))
    game.run(game.play.decide(ALICE, round_id, "fold", ""))
    audited(game, round_id)
    assert pending(game) == [] and game.wallet.available("alice") == 1_000_000 - 1000


def test_war_raise_losing_to_surrender_releases_the_raise(game: Game) -> None:
    game.shuffler.stack("7c", "7d")
    seat = game.seat("casino-war-usd")
    view = game.run(game.play.place_bets(ALICE, seat, {"ante": 500}, "k1", ""))
    view = game.run(game.play.deal(ALICE, view.round_id))
    stale = game.run(game.book.load(view.round_id))  # noqa: SLF001
    game.run(game.play.decide(ALICE, view.round_id, "surrender", ""))
    with raises_reason("CONCURRENT_CHANGE", ConcurrencyConflict):
        game.run(game.play.decide_as_system(stale, "raise", "", KEEPER_CAUSATION))
    audited(game, view.round_id)
    assert pending(game) == []


# ---------------------------------------------------------------- idempotency keys


def test_a_key_stands_for_one_request(game: Game) -> None:
    seat = game.seat("casino-war-usd")
    other_seat = game.seat("casino-holdem-usd")
    first = game.run(game.play.place_bets(ALICE, seat, {"ante": 500}, "key-1", "cut"))
    assert game.run(game.play.place_bets(ALICE, seat, {"ante": 500}, "key-1", "cut")).round_id == first.round_id
    for seat_id, bets, cut in ((seat, {"ante": 700}, "cut"), (other_seat, {"ante": 500}, "cut"), (seat, {"ante": 500}, "x")):
        with raises_reason("IDEMPOTENCY_KEY_REUSED", AlreadyExists, match="idempotency_key 'key-1' was already used for another request"):
            game.run(game.play.place_bets(ALICE, seat_id, bets, "key-1", cut))
    with raises_reason("IDEMPOTENCY_KEY_REUSED", AlreadyExists, match="key-1"):  # a Rebet is another request too
        game.run(game.play.rebet(ALICE, seat, "key-1", "cut"))
    assert [e.amount for e in game.wallet.entries if e.player_id == "alice"] == [-500]


def test_deal_decide_and_leave_retried_after_a_lost_reply_succeed(game: Game) -> None:
    game.shuffler.stack("7c", "7d", "2c", "3c", "4c", "Kd", "2h")
    seat = game.seat("casino-war-usd")
    view = game.run(game.play.place_bets(ALICE, seat, {"ante": 500}, "k1", ""))
    dealt = game.run(game.play.deal(ALICE, view.round_id))
    assert game.run(game.play.deal(ALICE, view.round_id)).version == dealt.version
    decided = game.run(game.play.decide(ALICE, view.round_id, "raise", ""))
    assert game.run(game.play.decide(ALICE, view.round_id, "raise", "")).version == decided.version
    game.run(game.seats.leave_table(ALICE, seat))
    game.run(game.seats.leave_table(ALICE, seat))  # left already: OK
    with raises_reason("SEAT_NOT_FOUND", NotFound):  # another player's "retry" of it is not
        game.run(game.seats.leave_table(BOB, seat))
    with raises_reason("SEAT_NOT_FOUND", NotFound):
        game.run(game.seats.leave_table(ALICE, "never-a-seat"))


# ---------------------------------------------------------------- privacy at a player-dealer's table


def test_each_side_of_a_player_dealer_round_sees_its_own_view(game: Game) -> None:
    game.points.points[("bob", "USD")] = 800
    game.run(game.seats.join_table(BOB, "war-p2p-iii-usd", "dealer", "Bobby", True))
    seat, _ = game.run(game.seats.join_table(ALICE, "war-p2p-iii-usd", "player", "Al"))
    game.shuffler.stack("9c", "Qd")
    view = game.run(game.play.place_bets(ALICE, seat.seat_id, {"ante": 10_000}, "k1", ""))
    game.run(game.play.deal(ALICE, view.round_id))
    mine, theirs = (game.run(game.play.get_round(who, view.round_id)) for who in (ALICE, BOB))
    assert (mine.role, mine.opponent_nickname, mine.balance_before) == ("player", "Bobby", 1_000_000)
    assert (theirs.role, theirs.opponent_nickname, theirs.balance_before, theirs.balance_after) == ("dealer", "Al", 0, 0)
    assert theirs.dealer_net > 0 and theirs.cards == mine.cards
    opened = [json.loads(s.payload_json) for s in (mine.steps[0], theirs.steps[0])]
    assert "dealer_player_id" not in opened[0] and "bob" not in mine.steps[0].payload_json
    assert "player_id" not in opened[1] and "balance_before" not in opened[1] and "alice" not in theirs.steps[0].payload_json
    everything = game.run(game.play.get_round(OPERATOR, view.round_id))
    assert everything.role == "" and "bob" in everything.steps[0].payload_json


def test_the_wallet_and_the_game_answer_a_reused_key_with_the_same_status(game: Game, tmp_path) -> None:
    """One status for a reused idempotency key everywhere: the game's PlaceBets and the wallet's TopUpPlayMoney
    (a transaction id is the wallet's key) both answer ALREADY_EXISTS with IDEMPOTENCY_KEY_REUSED."""
    seat = game.seat("casino-war-usd")
    game.run(game.play.place_bets(ALICE, seat, {"ante": 500}, "key-1", ""))
    with pytest.raises(AlreadyExists) as in_game:
        game.run(game.play.place_bets(ALICE, seat, {"ante": 700}, "key-1", ""))
    wallet = make_wallet(f"sqlite:///{tmp_path / 'wallet.db'}")
    try:
        wallet.app.top_up("alice", 500, "PLAY", "key-1")
        with pytest.raises(TransferIdReused) as in_wallet:
            wallet.app.top_up("alice", 700, "PLAY", "key-1")
    finally:
        wallet.engine.dispose()
    statuses = {(r.code, r.reason) for r in (refusal_for(in_game.value), refusal_for(in_wallet.value))}
    assert statuses == {(grpc.StatusCode.ALREADY_EXISTS, "IDEMPOTENCY_KEY_REUSED")}
