"""The audit command's own process: fewer garbage collections while it runs (audit_stores.fewer_collections), and
the length of an audit over processes given before any worker is done."""

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


def test_an_audit_over_processes_gives_its_length_before_the_workers_finish_a_share(monkeypatch):
    """A progress bar knows how many rounds are to come from the first step on, not after a worker's first share."""
    shares = [(None, "b"), ("b", "d"), ("d", None)]
    first_steps = []

    @contextmanager
    def stores(_urls):
        yield SimpleNamespace(game=None, shoes=None, ledger=None)

    class Pool:
        def __init__(self, *_args):
            pass

        def map(self, _work, tasks):
            for _task in tasks:
                assert first_steps, "a share was audited before the count was given"
                yield AuditProgress(rounds=2, events=10, violations=[])

        def shutdown(self, **_kwargs):
            pass

    async def whole_ledger(*_args, **_kwargs):
        return None, []

    monkeypatch.setattr(audit_stores, "open_stores", stores)
    monkeypatch.setattr(audit_stores, "audit_shares", lambda _game, _page: (6, shares))
    monkeypatch.setattr(audit_stores, "ProcessPoolExecutor", Pool)
    monkeypatch.setattr(audit_stores, "check_whole_ledger", whole_ledger)
    steps = audit_stores.audit_steps({}, page=2, jobs=2)
    first_steps.append(next(steps))
    assert (first_steps[0].total, first_steps[0].rounds, first_steps[0].done) == (6, 0, False)
    rest = list(steps)
    assert [s.rounds for s in rest] == [2, 4, 6, 6] and rest[-1].done and all(s.total == 6 for s in rest)
