"""WatchSeat and WatchRound with the in-memory store and fakes: fan-out, resume, visibility, bounds."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from croupier_game.adapters.memory import InMemoryGameStore
from croupier_platform.errors import NotFound, ResourceExhausted
from tests.refusals import raises_reason

from .conftest import ALICE, BOB, Game, build

WAIT_S = 10  # a bound on waiting for a notice, never an assertion on time

HOLDEM_CARDS = ["As", "Ad", "2c", "7d", "Ah", "Kc", "9s", "3d", "4h"]


async def take(stream: AsyncIterator[Any], count: int) -> list[Any]:
    return [await asyncio.wait_for(anext(stream), WAIT_S) for _ in range(count)]


def kind(notice: Any) -> str:
    if notice.round_update is not None:
        return notice.round_update.step.event_type
    return f"ended:{notice.ended}" if notice.ended is not None else f"seat:{notice.changed.change}"


async def play_holdem(game: Game, seat: str, key: str = "k1") -> str:
    game.shuffler.stack(*HOLDEM_CARDS)
    view = await game.play.place_bets(ALICE, seat, {"ante": 1000}, key, "")
    await game.play.deal(ALICE, view.round_id)
    await game.play.decide(ALICE, view.round_id, "call", "")
    return view.round_id


def run(game: Game, scenario: Any) -> None:
    async def with_feed() -> None:
        game.feed.start()
        game.presence.start()
        try:
            await scenario(game)
        finally:
            await game.presence.stop()
            await game.feed.stop()

    asyncio.run(with_feed())


HOLDEM_STEPS = ["RoundOpened", "BetsPlaced", "ShoeCommitted", "CardsDealt", "DecisionRequired", "DecisionMade",
                "CardsDealt", "RoundSettled"]  # fmt: skip


def test_a_seat_watcher_sees_every_step_and_a_resumed_one_exactly_the_rest() -> None:
    async def scenario(game: Game) -> None:
        seat = (await game.seats.join_table(ALICE, "casino-holdem-usd"))[0].seat_id
        watcher = game.watching.watch_seat(ALICE, seat)
        first = await take(watcher, 1)
        assert kind(first[0]) == "seat:current" and first[0].changed.status.seat_id == seat
        round_id = await play_holdem(game, seat)
        seen = await take(watcher, len(HOLDEM_STEPS) + 1)
        assert [kind(n) for n in seen] == HOLDEM_STEPS + ["seat:round_over"]
        assert seen[-1].changed.status.last_round_id == round_id
        # Hidden until over: the dealer's cards are blank in every update before the settlement.
        deciding = seen[HOLDEM_STEPS.index("DecisionRequired")].round_update.view
        assert [c.card for c in deciding.cards if c.hand == "dealer"] == ["", ""]
        assert deciding.revealed_shoe == [] and deciding.phase == "deciding"
        # The last update is what GetRound shows.
        assert seen[-2].round_update.view == await game.play.get_round(ALICE, round_id)
        await watcher.aclose()

        # Resumed from the position of the DecisionRequired step: exactly what followed it.
        resume_at = HOLDEM_STEPS.index("DecisionRequired")
        resumed = game.watching.watch_seat(ALICE, seat, seen[resume_at].position)
        rest = await take(resumed, len(seen) - resume_at - 1)
        assert [n.position for n in rest] == [n.position for n in seen[resume_at + 1 :]]
        # ... then live: the next round's first step, nothing repeated.
        game.shuffler.stack(*HOLDEM_CARDS)
        await game.play.place_bets(ALICE, seat, {"ante": 1000}, "k2", "")
        nxt = await take(resumed, 1)
        assert kind(nxt[0]) == "RoundOpened" and nxt[0].round_update.view.round_id != round_id
        # Resuming between the two notices of one event (the settlement, then round_over) sends the second.
        between = game.watching.watch_seat(ALICE, seat, seen[-2].position)
        assert [n.position for n in await take(between, 2)] == [seen[-1].position, nxt[0].position]
        await resumed.aclose()
        await between.aclose()

    run(build(InMemoryGameStore()), scenario)


def test_a_round_watcher_gets_every_step_once_and_the_stream_ends_with_the_round() -> None:
    async def scenario(game: Game) -> None:
        seat = (await game.seats.join_table(ALICE, "casino-holdem-usd"))[0].seat_id
        game.shuffler.stack(*HOLDEM_CARDS)
        view = await game.play.place_bets(ALICE, seat, {"ante": 1000}, "k1", "")
        watcher = game.watching.watch_round(ALICE, view.round_id)
        opening = await take(watcher, 3)
        assert [n.update.step.event_type for n in opening] == HOLDEM_STEPS[:3]
        await game.play.deal(ALICE, view.round_id)
        dealt = await take(watcher, 2)
        assert [n.position for n in dealt] == ["4", "5"]
        await watcher.aclose()  # dropped mid-round
        await game.play.decide(ALICE, view.round_id, "call", "")
        resumed = [n async for n in game.watching.watch_round(ALICE, view.round_id, dealt[-1].position)]
        assert [n.update.step.event_type for n in resumed] == HOLDEM_STEPS[5:]
        assert resumed[-1].update.view == await game.play.get_round(ALICE, view.round_id)
        assert [n.update.step.version for n in resumed] == [6, 7, 8]

    run(build(InMemoryGameStore()), scenario)


def test_another_players_seat_or_round_is_not_found() -> None:
    async def scenario(game: Game) -> None:
        seat = (await game.seats.join_table(ALICE, "casino-holdem-usd"))[0].seat_id
        round_id = await play_holdem(game, seat)
        with raises_reason("SEAT_NOT_FOUND", NotFound):
            await anext(game.watching.watch_seat(BOB, seat))
        with raises_reason("ROUND_NOT_FOUND", NotFound):
            await anext(game.watching.watch_round(BOB, round_id))
        with raises_reason("SEAT_NOT_FOUND", NotFound):
            await anext(game.watching.watch_seat(ALICE, "made-up"))

    run(build(InMemoryGameStore()), scenario)


def test_a_watcher_too_slow_is_told_and_resumes_from_its_last_position() -> None:
    async def scenario(game: Game) -> None:
        seat = (await game.seats.join_table(ALICE, "casino-holdem-usd"))[0].seat_id
        watcher = game.watching.watch_seat(ALICE, seat)
        current = (await take(watcher, 1))[0]
        await play_holdem(game, seat)  # 8 events for a queue of 2
        for _ in range(WAIT_S * 20):
            if game.feed.watching and all(s.overflowed for s in game.feed._subscriptions):
                break
            await asyncio.sleep(0.05)
        with raises_reason("STREAM_TOO_SLOW", ResourceExhausted, match="fell behind"):
            await take(watcher, 3)
        resumed = game.watching.watch_seat(ALICE, seat, current.position)
        assert [kind(n) for n in await take(resumed, len(HOLDEM_STEPS) + 1)] == HOLDEM_STEPS + ["seat:round_over"]
        await resumed.aclose()

    run(build(InMemoryGameStore(), queue_size=2), scenario)


def test_a_player_holds_a_bounded_number_of_streams() -> None:
    async def scenario(game: Game) -> None:
        seat = (await game.seats.join_table(ALICE, "casino-holdem-usd"))[0].seat_id
        streams = [game.watching.watch_seat(ALICE, seat) for _ in range(4)]
        for stream in streams:
            await take(stream, 1)
        with raises_reason("STREAM_LIMIT_REACHED", ResourceExhausted, match="4 streams"):
            await anext(game.watching.watch_seat(ALICE, seat))
        await streams[0].aclose()
        extra = game.watching.watch_seat(ALICE, seat)
        await take(extra, 1)  # one closed: room for another
        for stream in [*streams[1:], extra]:
            await stream.aclose()

    run(build(InMemoryGameStore()), scenario)


def test_a_player_dealer_sees_the_opponent_join_bet_and_leave() -> None:
    async def scenario(game: Game) -> None:
        game.points.points[("bob", "USD")] = 10_000
        dealer_seat = (await game.seats.join_table(BOB, "war-p2p-i-usd", role="dealer", nickname="Bo"))[0].seat_id
        watcher = game.watching.watch_seat(BOB, dealer_seat)
        assert kind((await take(watcher, 1))[0]) == "seat:current"
        seat = (await game.seats.join_table(ALICE, "war-p2p-i-usd", nickname="Al"))[0].seat_id
        paired = (await take(watcher, 1))[0]
        assert kind(paired) == "seat:paired" and paired.changed.status.opponent_nickname == "Al"
        assert paired.changed.may_deal is True
        await game.seats.confirm_round(BOB, dealer_seat)
        assert kind((await take(watcher, 1))[0]) == "seat:confirmed"
        game.shuffler.stack("Kc", "2h")
        view = await game.play.place_bets(ALICE, seat, {"ante": 500}, "k1", "")
        opened = (await take(watcher, 3))
        assert [kind(n) for n in opened] == ["RoundOpened", "BetsPlaced", "ShoeCommitted"]
        assert opened[0].round_update.view.role == "dealer"
        assert "alice" not in opened[0].round_update.step.payload_json  # the opponent by nickname only
        await game.play.deal(ALICE, view.round_id)
        settled = await take(watcher, 3)
        assert [kind(n) for n in settled] == ["CardsDealt", "RoundSettled", "seat:round_over"]
        await game.seats.leave_table(ALICE, seat)
        assert kind((await take(watcher, 1))[0]) == "seat:opponent_left"
        await game.seats.leave_table(BOB, dealer_seat)
        assert kind((await take(watcher, 1))[0]) == "ended:left"
        with pytest.raises(StopAsyncIteration):
            await anext(watcher)

    run(build(InMemoryGameStore()), scenario)


def test_a_new_watcher_is_not_sent_again_what_its_first_notice_already_shows(monkeypatch: pytest.MonkeyPatch) -> None:
    """On PostgreSQL the log's committed head (where a new subscription starts) stays behind events committed
    while an older transaction still runs; the tail hands them over later. The seat's join and its last round,
    shown by the `current` notice, must not come again after it."""
    from croupier_platform.eventstore import memory

    monkeypatch.setattr(memory._MemoryEventLog, "last_position", lambda self: 0)  # the head held back to the start

    async def scenario(game: Game) -> None:
        seat = (await game.seats.join_table(ALICE, "casino-holdem-usd"))[0].seat_id
        played = await play_holdem(game, seat)
        watcher = game.watching.watch_seat(ALICE, seat)
        current = (await take(watcher, 1))[0]
        assert kind(current) == "seat:current" and current.changed.status.last_round_id == played
        round_id = await play_holdem(game, seat, "k2")
        seen = await take(watcher, len(HOLDEM_STEPS) + 1)
        assert [kind(n) for n in seen] == HOLDEM_STEPS + ["seat:round_over"]
        assert seen[0].round_update.view.round_id == round_id != played
        await watcher.aclose()

    run(build(InMemoryGameStore()), scenario)
