"""The rounds this process holds (RoundBook): a round it wrote is not read and folded again, only the
events others appended since are; and a round held stale never decides: the append's version check
turns it down, and the command is retried on the round as stored. The shuffler's answers that never
change (a round's committed shoe, a revealed shoe) are asked for once (KnownShoes)."""

from __future__ import annotations

from typing import Any

import pytest

from croupier_game.adapters.memory import InMemoryGameStore
from croupier_game.application.rounds import RoundBook
from croupier_game.domain import round as round_module
from croupier_game.domain import visibility
from croupier_game.domain.opening import OpeningEvents
from croupier_game.domain.round import KEEPER_CAUSATION, Round
from croupier_game.domain.visibility import round_view
from croupier_platform.errors import Unavailable
from croupier_rules.errors import RuleError
from tests.refusals import raises_reason

from .conftest import ALICE, Game, TickingClock, build

HOLDEM = ["2s", "7d", "Ac", "Ad", "Jh", "Kc", "9s"]


@pytest.fixture
def folds(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The ids of the rounds read and folded whole (Round.from_events), from here on."""
    calls: list[str] = []
    fold = Round.from_events.__func__  # type: ignore[attr-defined]

    def counted(cls: type[Round], envelopes: Any) -> Round:
        calls.append(envelopes[0].stream_id)
        return fold(cls, envelopes)

    monkeypatch.setattr(Round, "from_events", classmethod(counted))
    return calls


# As defined: the autouse checks compare each opening's and each append's round with its stream's fold.
_decided, _opening_round = Round.decided, OpeningEvents.round


def holdem_deciding(game: Game) -> str:
    game.shuffler.stack(*HOLDEM)
    seat = game.seat("casino-holdem-usd")
    view = game.run(game.play.place_bets(ALICE, seat, {"ante": 1000}, "k1", ""))
    view = game.run(game.play.deal(ALICE, view.round_id))
    assert view.phase == "deciding"
    return view.round_id


def stored(game: Game, round_id: str) -> Round:
    with game.store.reading() as uow:
        return Round.from_events(uow.events.read_stream(round_id))


def another_replica(game: Game) -> RoundBook:
    """A RoundBook of another process on the same store (it holds none of this one's rounds)."""
    return RoundBook(game.store, TickingClock(), wake_log_readers=lambda: None)


def test_extending_a_round_gives_the_round_its_whole_stream_folds_to(game: Game) -> None:
    round_id = holdem_deciding(game)
    game.run(game.play.decide(ALICE, round_id, "call", ""))
    whole = stored(game, round_id)
    assert whole.is_over and whole.version > 4
    for cut in range(3, whole.version):
        start = Round.from_events(whole.envelopes[:cut])
        assert start.extended(whole.envelopes[cut:]) == whole
        assert start.extended([]) is start
    with pytest.raises(ValueError, match="does not follow"):
        Round.from_events(whole.envelopes[:3]).extended(whole.envelopes[4:])


@pytest.mark.parametrize("store", ["memory", "sqlite"])
def test_a_round_this_process_wrote_is_not_read_and_folded_again(request: pytest.FixtureRequest, folds: list[str], store: str) -> None:
    game: Game = request.getfixturevalue("game" if store == "memory" else "sql_game")
    game.shuffler.stack(*HOLDEM)
    seat = game.seat("casino-holdem-usd")
    round_id = game.run(game.play.place_bets(ALICE, seat, {"ante": 1000}, "k1", "")).round_id
    assert folds == []  # the opening built from what made its events, not parsed and folded from them
    folds.clear()
    assert game.run(game.play.deal(ALICE, round_id)).phase == "deciding"  # on the round as PlaceBets wrote it
    assert game.run(game.play.decide(ALICE, round_id, "call", "")).phase == "settled"  # reads the events after v5 only
    assert folds == []
    assert game.run(game.play.get_round(ALICE, round_id)).version == stored(game, round_id).version


def test_a_decision_reads_what_another_process_appended_meanwhile(game: Game) -> None:
    round_id = holdem_deciding(game)
    held = game.run(game.book.load_latest(round_id))
    elsewhere = another_replica(game)
    game.run(elsewhere.void(game.run(elsewhere.load(round_id)), "voided by another replica"))
    with raises_reason("WRONG_PHASE", RuleError):  # decided on the round as stored: void
        game.run(game.play.decide(ALICE, round_id, "call", ""))
    assert game.run(game.book.load(round_id)).state.void is not None
    assert game.run(game.book.load(round_id)).version == held.version + 1
    assert [e for e in game.wallet.reservations(round_id) if e.bets == {"call": 2000}] == []  # nothing staked


def test_a_stale_held_round_never_decides_the_deal_is_retried_on_the_stored_one(game: Game) -> None:
    game.shuffler.stack("9c", "Qd")
    seat = game.seat("casino-war-usd")
    round_id = game.run(game.play.place_bets(ALICE, seat, {"ante": 500}, "k1", "")).round_id
    held = game.run(game.book.load_latest(round_id))
    elsewhere = another_replica(game)
    game.run(elsewhere.void(game.run(elsewhere.load(round_id)), "voided by another replica", KEEPER_CAUSATION))
    assert game.run(game.book.load_latest(round_id)) is held  # held stale: nothing told this process
    # The deal decided on the stale round conflicts at the append; the retry reads the stored round.
    with raises_reason("WRONG_PHASE", RuleError):
        game.run(game.play.deal(ALICE, round_id))
    after = stored(game, round_id)
    assert after.state.void is not None and after.cards_dealt == 0 and after.version == held.version + 1


def test_a_read_that_ends_after_a_later_append_does_not_replace_it(game: Game) -> None:
    round_id = holdem_deciding(game)
    latest = game.run(game.book.load_latest(round_id))
    earlier = Round.from_events(latest.envelopes[:-1])
    game.book.remember(earlier)
    assert game.run(game.book.load_latest(round_id)) is latest


def test_a_rounds_shoe_and_its_reveal_are_asked_of_the_shuffler_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """And the seat's next round's shoe is drawn with the reveal of the round before it: one call a round."""
    game = build(InMemoryGameStore(), known_shoes=True)
    asked: list[tuple[str, str]] = []
    new_shoe, reveal_shoe, reveal_drawing = game.shuffler.new_shoe, game.shuffler.reveal_shoe, game.shuffler.reveal_drawing

    async def counted_new_shoe(decks: int, round_id: str) -> Any:
        asked.append(("new_shoe", round_id))
        return await new_shoe(decks, round_id)

    async def counted_reveal_shoe(shoe_id: str) -> Any:
        asked.append(("reveal_shoe", shoe_id))
        return await reveal_shoe(shoe_id)

    async def counted_reveal_drawing(shoe_id: str, decks: int, round_id: str) -> Any:
        asked.append(("reveal_drawing", f"{shoe_id} {round_id}"))
        monkeypatch.setattr(game.shuffler, "new_shoe", new_shoe)  # one call: its parts are not counted again
        monkeypatch.setattr(game.shuffler, "reveal_shoe", reveal_shoe)
        try:
            return await reveal_drawing(shoe_id, decks, round_id)
        finally:
            monkeypatch.setattr(game.shuffler, "new_shoe", counted_new_shoe)
            monkeypatch.setattr(game.shuffler, "reveal_shoe", counted_reveal_shoe)

    monkeypatch.setattr(game.shuffler, "new_shoe", counted_new_shoe)
    monkeypatch.setattr(game.shuffler, "reveal_shoe", counted_reveal_shoe)
    monkeypatch.setattr(game.shuffler, "reveal_drawing", counted_reveal_drawing)
    seat = game.seat("casino-war-usd")  # draws the first round's shoe ahead
    status = game.run(game.seats.seat_status(ALICE, seat))
    rounds = []
    for n in range(3):
        view = game.run(game.play.place_bets(ALICE, seat, {"ante": 500}, f"k{n}", ""))
        next_round = game.run(game.seats.seat_status(ALICE, seat)).next_round_id if n == 2 else None
        view = game.run(game.play.deal(ALICE, view.round_id))
        while view.phase == "deciding":
            view = game.run(game.play.decide(ALICE, view.round_id, "raise", ""))
        assert view.revealed_salt and game.run(game.play.get_round(ALICE, view.round_id)).revealed_salt
        rounds.append(view)
    assert rounds[0].commitment == status.next_commitment
    assert [r.commitment for r in rounds[1:]] == [game.run(new_shoe(6, r.round_id)).commitment for r in rounds[1:]]
    # The first round's shoe drawn at the seat; the second's and third's with the reveals of the rounds before
    # them; the fourth's asked by GetSeatStatus while the third was under way, so its reveal is asked alone.
    assert asked == [
        ("new_shoe", rounds[0].round_id),
        ("reveal_drawing", f"{rounds[0].shoe_id} {rounds[1].round_id}"),
        ("reveal_drawing", f"{rounds[1].shoe_id} {rounds[2].round_id}"),
        ("new_shoe", next_round),
        ("reveal_shoe", rounds[2].shoe_id),
    ]


def test_an_opening_voided_at_once_is_built_as_its_stream_folds(
    game: Game, folds: list[str], openings_fold_as_their_streams: list[Round]
) -> None:
    """The opening's round comes from what made its events, its void's too (the autouse check compares
    it with the stream's fold at every opening)."""
    seat = game.seat("casino-war-usd")

    async def away(decks: int, round_id: str) -> Any:
        raise Unavailable("the shuffler is away")

    game.shuffler.new_shoe = away  # type: ignore[method-assign]
    with raises_reason("SERVICE_UNAVAILABLE", Unavailable, match="was voided"):
        game.run(game.play.place_bets(ALICE, seat, {"ante": 500}, "k1", ""))
    [voided] = openings_fold_as_their_streams
    assert voided.state.void is not None and voided.shoe is None and folds == []


def test_an_events_step_is_built_once_and_as_a_fresh_view_builds_it(game: Game, monkeypatch: pytest.MonkeyPatch) -> None:
    """A reply's steps: an event's step is serialised once per what it depends on (a CardsDealt's hidden
    cards shown once the round is over), not again in every later reply; each view's steps are those a
    view of the stored stream, folded afresh, shows (hidden cards blank before the end)."""
    serialised: list[str] = []
    canonical_json = visibility.canonical_json

    def counted(value: Any) -> bytes:
        serialised.append(value.get("round_id", "") if isinstance(value, dict) else "")
        return canonical_json(value)

    monkeypatch.setattr(visibility, "canonical_json", counted)
    game.shuffler.stack(*HOLDEM)
    seat = game.seat("casino-holdem-usd")
    bet = game.run(game.play.place_bets(ALICE, seat, {"ante": 1000}, "k1", ""))
    assert len(serialised) == bet.version == 3
    dealt = game.run(game.play.deal(ALICE, bet.round_id))
    assert dealt.phase == "deciding" and len(serialised) == dealt.version  # only the deal's events
    over = game.run(game.play.decide(ALICE, bet.round_id, "call", ""))
    dealt_before = sum(1 for s in dealt.steps if s.event_type == "CardsDealt")
    assert over.phase == "settled" and len(serialised) == over.version + dealt_before  # the hole cards shown now
    for view, version in ((bet, 3), (dealt, dealt.version), (over, over.version)):
        fresh = Round.from_events(stored(game, bet.round_id).envelopes[:version])
        assert view.steps == round_view(fresh, viewer="alice", operator=False).steps
    operator = round_view(game.run(game.book.load(bet.round_id)), operator=True)
    assert operator.steps == round_view(stored(game, bet.round_id), operator=True).steps


def test_an_append_builds_the_round_from_its_decision_without_parsing_the_events(
    game: Game, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A deal's and a decision's round come from the decided events and state (Round.decided), not from
    parsing the payloads just stored and evolving them again (the autouse check, off here so that its own
    parsing is not counted, compares every other test's openings and appends with their streams' fold)."""
    monkeypatch.setattr(Round, "decided", _decided)
    monkeypatch.setattr(OpeningEvents, "round", _opening_round)
    parsed: list[str] = []
    read = round_module._read  # noqa: SLF001

    def counted(round_id: str, envelope: Any) -> Any:
        parsed.append(envelope.event_type)
        return read(round_id, envelope)

    monkeypatch.setattr(round_module, "_read", counted)
    round_id = holdem_deciding(game)  # PlaceBets, Deal: the hole cards and the decision required
    view = game.run(game.play.decide(ALICE, round_id, "call", ""))  # the call, the board, the settlement
    assert view.phase == "settled" and parsed == []
    assert game.run(game.book.load(round_id)) == stored(game, round_id)
