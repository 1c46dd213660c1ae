"""AuditAll (the full audit) and ReplayRound against a tampered store: each stored event changed
(a card, an amount) or deleted is found by both, naming the round and the event; so is an event
deleted from the end of a stream, which the hash chain alone cannot show."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import delete, select, update

from croupier_game.adapters.sql import rounds_table
from croupier_game.application.full_audit import AuditProgress, Violation
from croupier_platform.db import events_table
from croupier_platform.errors import PermissionDenied

from .conftest import ALICE, OPERATOR, Game


def war_round(game: Game, cards: list[str], key: str, *, deal: bool = True, table: str = "casino-war-usd") -> str:
    game.shuffler.stack(*cards)
    round_id = game.run(game.tables.place_bets(ALICE, game.seat(table), {"ante": 500}, key, "")).round_id
    if deal:
        game.run(game.tables.deal(ALICE, round_id))
    return round_id


def audit(game: Game, page: int = 2) -> tuple[AuditProgress, list[Violation]]:
    async def run() -> list[AuditProgress]:
        return [step async for step in game.audit.audit_all(OPERATOR, page)]

    steps = game.run(run())
    assert steps[-1].done and not any(s.done for s in steps[:-1])
    return steps[-1], [v for s in steps for v in s.violations]


def by_round(violations: list[Violation]) -> dict[str | None, list[str]]:
    found: dict[str | None, list[str]] = {}
    for v in violations:
        found.setdefault(v.round_id, []).append(f"{v.event}: {v.problem}" if v.event else v.problem)
    return found


def edit_payload(game: Game, round_id: str, version: int, change) -> None:  # noqa: ANN001
    """A rogue administrator edits a stored payload behind the store's back."""
    where = (events_table.c.stream_id == round_id, events_table.c.version == version)
    with game.store.events._engine.begin() as c:  # noqa: SLF001
        payload = json.loads(c.execute(select(events_table.c.payload).where(*where)).scalar_one())
        change(payload)
        c.execute(update(events_table).where(*where).values(payload=json.dumps(payload, sort_keys=True, separators=(",", ":"))))


def delete_events(game: Game, round_id: str, *versions: int) -> None:
    with game.store.events._engine.begin() as c:  # noqa: SLF001
        c.execute(delete(events_table).where(events_table.c.stream_id == round_id, events_table.c.version.in_(versions)))


@pytest.mark.parametrize("store", ["memory", "sqlite"])
def test_a_clean_casino_audits_clean_page_by_page(store: str, game: Game, sql_game: Game) -> None:
    game = game if store == "memory" else sql_game
    settled = war_round(game, ["Ac", "2d"], "k1")
    deciding = war_round(game, ["Ac", "As"], "k2", table="casino-war-play")  # a tie: waiting for raise or surrender
    voided = war_round(game, [], "k3", deal=False, table="battle-royale-usd")
    game.pump()
    game.run(game.audit.void_round(OPERATOR, voided, "shoe malfunction"))
    game.pump()
    lagging = war_round(game, ["Kc", "2d"], "k4", table="war-p2p-i-usd")  # settled, the wallet not told yet

    final, violations = audit(game)

    assert violations == []
    assert (final.rounds, final.total) == (4, 4)
    with game.store.unit_of_work() as uow:
        assert final.events == sum(uow.events.stream_version(r) for r in (settled, deciding, voided, lagging))
    assert final.notes == 1  # the lagging wallet is a note, not a violation
    assert final.ledger is not None and final.ledger.problems == []


def test_a_player_may_not_audit(game: Game) -> None:
    async def run() -> None:
        async for _ in game.audit.audit_all(ALICE):
            pass

    with pytest.raises(PermissionDenied):
        game.run(run())


def test_each_changed_or_deleted_event_is_named_by_the_audit_and_by_replay(sql_game: Game) -> None:
    game = sql_game
    card = war_round(game, ["Ac", "2d"], "card")
    amount = war_round(game, ["Kc", "2d"], "amount")
    middle = war_round(game, ["Qc", "2d"], "middle")
    last = war_round(game, [], "last", deal=False)
    game.pump()
    game.run(game.audit.void_round(OPERATOR, last, "reader malfunction"))
    clean = war_round(game, ["Jc", "2d"], "clean")
    game.pump()

    # A card: the player's Ace becomes a King (v4 CardsDealt).
    edit_payload(game, card, 4, lambda p: p["cards"][0].update(card="Kd"))
    # An amount: the settlement returns 5,000 instead of 1,000 (v5 RoundSettled).
    edit_payload(game, amount, 5, lambda p: p["results"]["ante"].update(returned=5000))
    # An event in the middle: the ShoeCommitted (v3) is gone.
    delete_events(game, middle, 3)
    # The last event: the RoundVoided (v4) is gone. Nothing follows it, so no hash link breaks.
    delete_events(game, last, 4)

    _, violations = audit(game)
    found = by_round(violations)

    assert set(found) == {card, amount, middle, last}, found  # `clean` stays clean
    assert "v4 CardsDealt: hash chain: edited (content does not match its hash)" in found[card]
    assert "v4 CardsDealt: position 0 of the cut shoe is Ac, but Kd (player) was dealt" in found[card]
    assert "v5 RoundSettled: hash chain: edited (content does not match its hash)" in found[amount]
    assert any(f.startswith("v5 RoundSettled: recorded ") for f in found[amount])
    assert "v4 CardsDealt: hash chain: version gap (expected version 3): v3 missing before it" in found[middle]
    # The end of a stream: the round projection (written with every append) and the wallet disagree with the log.
    assert "v4: missing: the round projection recorded the round at v4 (voided), but its stream ends at v3" in found[last]
    assert "v4: missing: the wallet moved the round's money (stake voided), but its log ends dealing at v3" in found[last]
    events = {(v.round_id, v.event, v.event_id) for v in violations if v.event}
    with game.store.unit_of_work() as uow:
        dealt = uow.events.read_stream_records(card)[3]
    assert (card, "v4 CardsDealt", dealt.event_id) in events  # the event is named by its id too

    # ReplayRound runs the same check on one round, and says the same.
    for round_id in (card, amount, middle, last):
        replay = game.run(game.audit.replay_round(OPERATOR, round_id))
        assert replay.disagreements == found[round_id], round_id
    assert game.run(game.audit.replay_round(OPERATOR, clean)).ok


def test_a_deleted_last_event_with_a_doctored_projection_is_still_found_by_the_wallet(sql_game: Game) -> None:
    game = sql_game
    round_id = war_round(game, [], "k1", deal=False)
    game.pump()
    game.run(game.audit.void_round(OPERATOR, round_id, "reader malfunction"))
    game.pump()
    delete_events(game, round_id, 4)
    with game.store.events._engine.begin() as c:  # noqa: SLF001 - the projection made to agree with the cut log
        c.execute(update(rounds_table).where(rounds_table.c.round_id == round_id).values(phase="dealing", version=3))

    _, violations = audit(game)

    assert by_round(violations) == {
        round_id: ["v4: missing: the wallet moved the round's money (stake voided), but its log ends dealing at v3"]
    }


def test_a_whole_round_deleted_from_the_log_is_found_through_the_wallet(sql_game: Game) -> None:
    game = sql_game
    kept = war_round(game, ["Ac", "2d"], "kept")
    gone = war_round(game, ["Kc", "2d"], "gone")
    game.pump()
    with game.store.events._engine.begin() as c:  # noqa: SLF001 - the stream and its projection row
        c.execute(delete(events_table).where(events_table.c.stream_id == gone))
        c.execute(delete(rounds_table).where(rounds_table.c.round_id == gone))

    final, violations = audit(game)

    assert final.rounds == 1
    assert [(v.round_id, v.event) for v in violations] == [(gone, None)]
    assert violations[0].problem.startswith("the wallet moved money for the round (payout (posted), stake (posted)), but the log has no stream")
    assert kept != gone


def test_a_projection_row_without_its_stream_is_a_violation(sql_game: Game) -> None:
    game = sql_game
    first = war_round(game, ["Ac", "2d"], "a")
    second = war_round(game, ["Kc", "2d"], "b")
    game.pump()
    delete_events(game, second, 1, 2, 3, 4, 5)

    _, violations = audit(game, page=1)

    found = by_round(violations)
    assert first not in found
    assert found[second][0] == "the round projection holds the round at v5 (settled), but the log has no stream for it"
