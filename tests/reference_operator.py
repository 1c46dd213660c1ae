"""The reference casino wallet for the tests (the process: croupier_reference_operator.process), and the check
that a casino's ledger and Croupier's reconciliation agree line for line."""

from __future__ import annotations

from typing import Any

from croupier_reference_operator.process import ReferenceOperator, free_port, reference_operator

__all__ = ["ReferenceOperator", "assert_reconciles", "free_port", "reference_operator"]


def assert_reconciles(calls: list[dict[str, Any]], casino_ledger: dict[str, Any], players: set[str] | None = None) -> None:
    """Croupier's reconciliation equals the casino's own ledger line for line. `calls`: every call Croupier's
    reconciliation lists, as dicts (transaction_id, kind, player_id, round_id, amount_minor, state, references).
    Each is in the casino's ledger under its transaction id, of the same kind, player, round and amount (a
    rollback moves what its debit took, or nothing of a debit the casino never applied), applied there exactly
    when Croupier has it acknowledged (a debit without an answer may or may not have landed: its rollback
    decides); the casino holds no call Croupier did not list; every applied debit has exactly one credit or
    rollback. `players`: only theirs (a casino shared with other tests' players)."""
    if players is not None:
        calls = [c for c in calls if c["player_id"] in players]
    theirs = {t["transaction_id"]: t for t in casino_ledger["transactions"]
              if t["status"] != "tombstone" and (players is None or t["player_id"] in players)}  # fmt: skip
    landed = {tx for tx, t in theirs.items() if t["kind"] == "debit" and t["status"] in ("applied", "rolled_back")}
    closings: dict[str, int] = {}
    for call in calls:
        if call["state"] == "unknown" and call["transaction_id"] not in theirs:
            continue  # a debit that never reached the casino (its rollback is there)
        line = theirs.pop(call["transaction_id"])
        rollback_of_nothing = call["kind"] == "rollback" and call["references"][0] not in landed
        amount = 0 if rollback_of_nothing else call["amount_minor"]
        assert (line["kind"], line["player_id"], line["round_id"], line["amount_minor"]) == (
            call["kind"], call["player_id"], call["round_id"], amount), (call, line)
        applied = line["status"] in ("applied", "rolled_back")
        assert applied == (call["state"] == "acknowledged") or call["state"] == "unknown", (call, line)
        if call["kind"] != "debit" and applied:
            for debit in call["references"]:
                closings[debit] = closings.get(debit, 0) + 1
    assert not theirs, f"calls at the casino that Croupier did not make: {theirs}"
    assert {d: closings.get(d, 0) for d in landed} == dict.fromkeys(landed, 1), "a debit without exactly one credit or rollback"
