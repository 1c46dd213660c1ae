"""AuditAll (the full audit) and ReplayRound against a tampered store: each stored event changed
(a card, an amount) or deleted is found by both, naming the round and the event; so is an event
deleted from the end of a stream, which the hash chain alone cannot show."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import datetime, timedelta

import pytest
from sqlalchemy import delete, select, update

from croupier_game.adapters.sql import rounds_table
from croupier_game.application.full_audit import AuditProgress, Violation, audit_shares, check_whole_ledger, run_audit
from croupier_game.application.round_ledger import NOT_CHARGED, LagBound
from croupier_platform.db import events_table
from croupier_platform.events import EventRecord, record_hash
from croupier_platform.errors import PermissionDenied
from tests.refusals import raises_reason

from .conftest import ALICE, BOB, OPERATOR, Game


def war_round(game: Game, cards: list[str], key: str, *, deal: bool = True, table: str = "casino-war-usd") -> str:
    game.shuffler.stack(*cards)
    round_id = game.run(game.play.place_bets(ALICE, game.seat(table), {"ante": 500}, key, "")).round_id
    if deal:
        game.run(game.play.deal(ALICE, round_id))
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


def reseal(game: Game, round_id: str) -> None:
    """A rogue administrator who also recomputes the stream's hash chain: every link holds again."""
    columns = [events_table.c[name] for name in EventRecord._fields]
    with game.store.events._engine.begin() as c:  # noqa: SLF001
        rows = c.execute(select(*columns).where(events_table.c.stream_id == round_id).order_by(events_table.c.version)).all()
        previous = None
        for row in rows:
            record = EventRecord._make(row)
            record = record._replace(prev_hash=previous.hash if previous else record.prev_hash)
            record = record._replace(hash=record_hash(record))
            c.execute(update(events_table).where(events_table.c.stream_id == round_id, events_table.c.version == record.version)
                      .values(prev_hash=record.prev_hash, hash=record.hash))  # fmt: skip
            previous = record


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

    with raises_reason("PERMISSION_DENIED", PermissionDenied):
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


def test_a_resealed_edit_is_found_by_the_replay_though_the_audit_reads_each_text_once(sql_game: Game) -> None:
    """The audit parses each distinct rules event text once, and each distinct table once. A rogue
    administrator who re-seals the chain (so only the replay can tell) and writes a text the audit has
    already read (the settlement of another round) or a table it has not is still caught."""
    game = sql_game
    won = war_round(game, ["Ac", "2d"], "won")
    lost = war_round(game, ["2c", "Ad"], "lost")
    table = war_round(game, ["Kc", "2d"], "table")
    clean = war_round(game, ["Qc", "2d"], "clean")
    game.pump()
    assert audit(game)[1] == []  # every text of the casino read (and kept) once
    with game.store.unit_of_work() as uow:
        won_settled = uow.events.read_stream_records(won)[4].payload

    edit_payload(game, lost, 5, lambda p: p.update(json.loads(won_settled)))  # the won round's settlement, as its text
    reseal(game, lost)
    edit_payload(game, table, 1, lambda p: p["table"].update(decks=8))  # RoundOpened's table: an 8-deck shoe
    reseal(game, table)

    _, violations = audit(game)
    found = by_round(violations)

    assert set(found) == {lost, table}, found  # `won` and `clean` stay clean
    assert not any("hash chain" in problem for problems in found.values() for problem in problems)
    assert any(f.startswith("v5 RoundSettled: recorded ") and "the rules give" in f for f in found[lost])
    assert any("not a proper 8-deck shoe" in f for f in found[table]), found[table]
    for round_id in (lost, table):  # ReplayRound (nothing cached for it: detailed) says the same
        assert game.run(game.audit.replay_round(OPERATOR, round_id)).disagreements == found[round_id]
    assert clean not in found


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


def audit_in_shares(game: Game, page: int) -> tuple[AuditProgress, list[Violation], int]:
    """As `croupier audit --jobs N` runs it, here in one process: `run_audit` over each share of
    `audit_shares` without the ledger part, then the ledger as a whole once. Also: how many shares."""

    async def run() -> tuple[AuditProgress, list[Violation], int]:
        total, shares = audit_shares(game.store, page)
        found: list[Violation] = []
        merged = AuditProgress(total=total)
        for after, until in shares:
            async for step in run_audit(game.store, game.shuffler, game.wallet, page=page, after=after, until=until, whole=False):
                found += step.violations
            assert step.done
            merged.rounds, merged.events = merged.rounds + step.rounds, merged.events + step.events
            merged.notes, merged.held = merged.notes + step.notes, merged.held + step.held
        merged.ledger, rest = await check_whole_ledger(game.store, game.wallet, held=merged.held, page=page)
        return merged, found + rest, len(shares)

    return game.run(run())


@pytest.mark.parametrize("page", [1, 2, 3])
def test_the_audit_cut_into_page_shares_finds_what_the_whole_audit_finds_in_the_same_order(sql_game: Game, page: int) -> None:
    game = sql_game
    card = war_round(game, ["Ac", "2d"], "card")
    war_round(game, ["Kc", "2d"], "clean")
    middle = war_round(game, ["Qc", "2d"], "middle")
    last = war_round(game, [], "last", deal=False)
    game.pump()
    game.run(game.audit.void_round(OPERATOR, last, "reader malfunction"))
    orphan = war_round(game, ["Jc", "2d"], "orphan")
    gone = war_round(game, ["Tc", "2d"], "gone")
    game.pump()
    war_round(game, ["9c", "2d"], "lagging")  # a note: the wallet is not told
    edit_payload(game, card, 4, lambda p: p["cards"][0].update(card="Kd"))
    delete_events(game, middle, 3)
    delete_events(game, last, 4)
    delete_events(game, orphan, 1, 2, 3, 4, 5)  # the projection row stays
    with game.store.events._engine.begin() as c:  # noqa: SLF001 - the stream and its projection row
        c.execute(delete(events_table).where(events_table.c.stream_id == gone))
        c.execute(delete(rounds_table).where(rounds_table.c.round_id == gone))

    whole, violations = audit(game, page)
    merged, found, shares = audit_in_shares(game, page)

    assert shares == 5 // page + 1  # five streams left: one share per page, the last open-ended
    assert {v.round_id for v in violations} == {card, middle, last, orphan, gone}
    assert found == violations  # the same findings in the same order
    assert (merged.rounds, merged.events, merged.notes, merged.total) == (whole.rounds, whole.events, whole.notes, whole.total)
    assert (merged.held, merged.ledger) == (whole.held, whole.ledger) and whole.notes == 1


# ---------------------------------------------------------------- war-p2p with a player in the dealer's seat

P2P = "war-p2p-iii-usd"  # antes $25-$350, commission 1.75%


def p2p_seat(game: Game) -> str:
    """Bob in the dealer's seat (every round confirmed in advance), Alice paired with him."""
    game.points.points[("bob", "USD")] = 800
    game.run(game.seats.join_table(BOB, P2P, "dealer", "Bobby", True))
    return game.run(game.seats.join_table(ALICE, P2P, "player", "Al"))[0].seat_id


def p2p_round(game: Game, cards: list[str], key: str, *, deal: bool = True, charge: bool = True) -> str:
    """A $300 round of Alice's against Bob, settled and applied by the wallet; `charge`: the commission
    service has charged its commission too."""
    game.shuffler.stack(*cards)
    round_id = game.run(game.play.place_bets(ALICE, p2p_seat(game), {"ante": 30_000}, key, "")).round_id
    if deal:
        view = game.run(game.play.deal(ALICE, round_id))
        assert view.phase == "settled"
        game.pump()
        if charge:
            assert game.wallet.charge_commission(round_id, view.commission)
    return round_id


def entry(game: Game, transaction_id: str):  # noqa: ANN201
    return next(e for e in game.wallet.entries if e.transaction_id == transaction_id)


def test_a_player_dealers_rounds_audit_clean_and_a_commission_not_charged_yet_is_a_note(game: Game) -> None:
    lost = p2p_round(game, ["9c", "Qd"], "lost")  # the seed's $300 example: the dealer nets $294.75
    won = p2p_round(game, ["Kc", "2d"], "won")  # the dealer pays $300 and the commission
    lagging = p2p_round(game, ["9c", "Qd"], "lagging", charge=False)
    in_play = p2p_round(game, [], "in-play", deal=False)  # the cover and the hold reserved, nothing moved yet
    assert game.wallet.available("bob") == 1_000_000 + 29_475 - 30_525 + 30_000 - 1_050 - 30_000 - 1_050

    final, violations = audit(game)

    assert violations == [] and final.rounds == 4
    assert final.notes == 1  # the lagging commission
    replay = game.run(game.audit.replay_round(OPERATOR, lagging))
    assert replay.ok and replay.notes == [NOT_CHARGED]
    assert json.loads(replay.report_json)["checks"]["wallet"] == "commission not charged yet"
    for round_id in (lost, won, in_play):
        replay = game.run(game.audit.replay_round(OPERATOR, round_id))
        assert replay.ok and replay.notes == [], (round_id, replay.disagreements, replay.notes)
    report = json.loads(game.run(game.audit.replay_round(OPERATOR, won)).report_json)
    assert report["checks"]["wallet"] == "ok"
    assert [(e["player_id"], e["kind"], e["status"], e["amount"]) for e in report["ledger"]] == [
        ("alice", "stake", "posted", -30_000),
        ("bob", "cover", "posted", -30_000),
        ("bob", "commission", "voided", -1_050),  # the hold, released by the charge
        ("alice", "payout", "posted", 60_000),
        ("bob", "commission", "posted", -525),
    ]  # the table's $600 all goes to Alice: no dealer's payout

    game.wallet.charge_commission(lagging, 525)
    assert audit(game)[0].notes == 0


@pytest.mark.parametrize(
    ("tamper", "problems"),
    [
        ("dealer payout", ["v5 RoundSettled: the wallet moved +28475 for the dealer after the commission, "
                           "the round settled the dealer's net at +29475"]),
        ("commission", ["v5 RoundSettled: the wallet charged the dealer 1525 commission, the round settled 525",
                        "v5 RoundSettled: the wallet moved +28475 for the dealer after the commission, "
                        "the round settled the dealer's net at +29475"]),
        ("charged twice", ["v5 RoundSettled: wallet: the dealer's commission is charged 2 times; a round is charged once",
                           "v5 RoundSettled: the wallet charged the dealer 1050 commission, the round settled 525",
                           "v5 RoundSettled: the wallet moved +28950 for the dealer after the commission, "
                           "the round settled the dealer's net at +29475"]),
        ("cover", ["v2 BetsPlaced: wallet: the dealer's cover for the round is [31050], one cover of the ante (30000) was due"]),
    ],
)  # fmt: skip
def test_a_tampered_dealers_transfer_is_named_by_the_audit_and_by_replay(game: Game, tamper: str, problems: list[str]) -> None:
    clean = p2p_round(game, ["9c", "Qd"], "clean")
    round_id = p2p_round(game, ["9c", "Qd"], "tampered")
    if tamper == "dealer payout":  # $10 less paid to the dealer than the table held
        entry(game, f"round:{round_id}:dealer").amount -= 1_000
    elif tamper == "commission":  # $10 more charged than the round's commission
        entry(game, f"round:{round_id}:commission").amount -= 1_000
    elif tamper == "charged twice":
        charged = entry(game, f"round:{round_id}:commission")
        game.wallet.entries.append(replace(charged, transaction_id=f"{charged.transaction_id}-again"))
    else:  # the hold reserved once more with the cover (and paid back with the dealer's payout): nets the same
        entry(game, f"cover:{round_id}:cover").amount -= 1_050
        entry(game, f"round:{round_id}:dealer").amount += 1_050

    _, violations = audit(game)

    assert by_round(violations) == {round_id: problems}
    assert game.run(game.audit.replay_round(OPERATOR, round_id)).disagreements == problems
    assert game.run(game.audit.replay_round(OPERATOR, clean)).ok


def test_a_voided_player_dealer_round_leaves_the_dealer_and_the_house_nothing(game: Game) -> None:
    before_deal = p2p_round(game, [], "before-deal", deal=False)
    game.run(game.audit.void_round(OPERATOR, before_deal, "shoe malfunction"))
    game.pump()
    before_charge = p2p_round(game, ["9c", "Qd"], "before-charge", charge=False)
    game.run(game.audit.void_round(OPERATOR, before_charge, "shoe malfunction"))
    game.pump()
    assert not game.wallet.charge_commission(before_charge, 525)  # nothing is charged for a voided round
    charged = p2p_round(game, ["9c", "Qd"], "charged")
    game.run(game.audit.void_round(OPERATOR, charged, "shoe malfunction"))
    game.pump()  # the cover and the stake refunded, the dealer's payout and the commission reversed
    assert game.wallet.available("alice") == game.wallet.available("bob") == 1_000_000

    final, violations = audit(game)

    assert violations == [] and final.notes == 0 and final.rounds == 3
    # The commission's reversal lost: the house kept the commission, the dealer is short of it.
    game.wallet.entries.remove(entry(game, f"round:{charged}:commission:reversal"))
    _, violations = audit(game)
    assert by_round(violations) == {charged: [
        "v6 RoundVoided: the wallet left the dealer at -525 for the round, a void must leave every balance as before (0)",
        "v6 RoundVoided: the house kept 525 commission from the round, a void leaves it nothing",
    ]}  # fmt: skip


# ---------------------------------------------------------------- over in the game, open in the wallet, past the bound


def audit_at(game: Game, seconds_after: float, bound_s: float = 60) -> tuple[AuditProgress, list[Violation]]:
    """The audit as `croupier audit` runs it, `seconds_after` the last event written, with a lag bound."""
    async def run() -> list[AuditProgress]:
        with game.store.unit_of_work() as uow:
            last = max(e.occurred_at for r in uow.rounds.in_range(None, None) for e in uow.events.read_stream(r.round_id))
        now = datetime.fromisoformat(last) + timedelta(seconds=seconds_after)
        return [step async for step in run_audit(game.store, game.shuffler, game.wallet, lag_bound=LagBound(now, bound_s))]

    steps = game.run(run())
    return steps[-1], [v for s in steps for v in s.violations]


@pytest.mark.parametrize("store", ["memory", "sqlite"])
def test_a_round_left_open_in_the_wallet_past_the_bound_is_a_violation_within_it_a_note(store: str, game: Game, sql_game: Game) -> None:
    game = game if store == "memory" else sql_game
    lost = war_round(game, ["Kc", "2d"], "k1")  # settled in the game; its RoundSettled never reaches the wallet

    final, violations = audit_at(game, 59)
    assert violations == [] and final.notes == 1  # within the bound: the consumers' lag

    final, violations = audit_at(game, 61)
    assert final.notes == 0
    assert [(v.round_id, v.event) for v in violations] == [(lost, "v5 RoundSettled")]
    assert "the wallet has not applied the settlement: the round is over in the game and open in the wallet" in violations[0].problem
    assert "(bound 60 s)" in violations[0].problem

    game.pump()  # the reconciler (or the consumer) applies it: clean again, whatever the age
    assert audit_at(game, 3600)[1] == []


def test_a_commission_left_uncharged_past_the_bound_is_a_violation(game: Game) -> None:
    round_id = p2p_round(game, ["9c", "Qd"], "lagging", charge=False)  # the wallet settled; the commission never charged
    assert audit_at(game, 10)[1] == []
    violations = audit_at(game, 120)[1]
    assert [v.round_id for v in violations] == [round_id]
    assert "the commission is not charged" in violations[0].problem
