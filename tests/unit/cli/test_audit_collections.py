"""The audit command runs with fewer garbage collections (audit_stores.fewer_collections), and only while it runs."""

from __future__ import annotations

import gc
from contextlib import contextmanager
from types import SimpleNamespace

import pytest

from croupier_cli import audit_stores
from croupier_game.application.full_audit import AuditProgress


def test_the_collector_is_batched_inside_and_as_before_after_even_on_a_failure():
    before = gc.get_threshold()
    with audit_stores.fewer_collections():
        assert gc.get_threshold() == audit_stores.AUDIT_GC_THRESHOLD
        assert gc.get_freeze_count() > 0  # what existed at the start is out of the scans
    assert gc.get_threshold() == before
    with pytest.raises(RuntimeError), audit_stores.fewer_collections():
        raise RuntimeError("a store failed")
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0


def test_the_one_process_audit_runs_with_the_collector_batched(monkeypatch):
    seen = []

    @contextmanager
    def stores(_urls):
        yield SimpleNamespace(game=None, shoes=None, ledger=None)

    async def audit(*_args, **_kwargs):
        seen.append(gc.get_threshold())
        yield AuditProgress(done=True)

    monkeypatch.setattr(audit_stores, "open_stores", stores)
    monkeypatch.setattr(audit_stores, "run_audit", audit)
    before = gc.get_threshold()
    steps = list(audit_stores.audit_steps({}, page=500, jobs=1))
    assert [s.done for s in steps] == [True]
    assert seen == [audit_stores.AUDIT_GC_THRESHOLD]
    assert gc.get_threshold() == before
