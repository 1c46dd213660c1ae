"""The game's events are built by the game itself (the domain's drafts, `new_event`, `rules_event`, appended
through application/recording.py's `trusted`): not validated again, and the same events, sealed to the same
chain, as validated ones."""

import pytest

from croupier_game.application.recording import trusted
from croupier_game.domain.round import new_event, rules_event
from croupier_platform.eventstore import NewEvent
from croupier_platform.eventstore.port import seal_batch
from croupier_rules.events import BetResult, BetsPlaced, CardsDealt, DealtCard, RoundSettled

AT = "2026-12-02T10:00:00.123456+00:00"


class _Refused:
    def __getattr__(self, name: str) -> object:
        raise AssertionError("a NewEvent validated: the game's own events are built trusted (NewEvent.trusted)")


def test_the_games_events_are_not_validated_again_and_seal_as_validated_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    rules = [
        BetsPlaced(bets={"ante": 500}),
        CardsDealt(stage="initial", cards=(DealtCard(card="Ac", hand="player", face_up=True, position=7),)),
        RoundSettled(results={"ante": BetResult(stake=500, returned=1000, outcome="win")}, hands={"player": "ace"}),
    ]
    with monkeypatch.context() as patched:
        patched.setattr(NewEvent, "__pydantic_validator__", _Refused())
        drafts = [new_event("RoundOpened", {"round_id": "r1", "table": {"min": 1}}, AT, "r1")]
        drafts += [rules_event(event, AT, "r1", causation_id="keeper") for event in rules]
        built = trusted(drafts)
    validated = [NewEvent(**event.model_dump()) for event in built]
    assert built == validated
    assert [e.payload for e in built[1:]] == [event.model_dump(mode="json") for event in rules]
    assert all(e.correlation_id == "r1" and e.schema_version == 1 for e in built)
    assert seal_batch("r1", "round", 0, None, built) == seal_batch("r1", "round", 0, None, validated)
