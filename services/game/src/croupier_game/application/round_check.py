"""One round checked from its log: the one check that ReplayRound and the full audit both run.

`RoundCheck(records, projection)` reads the round's stored records: the hash chain (nothing
edited, missing or reordered), the events, the recorded table, and the round projection's phase
and version against the stream's head (the projection is written in the same transaction as every
append, so a head below it means the last events were deleted, which the chain alone cannot show).
`finish(revealed, entries)` completes it with what the shuffler reveals and the wallet holds:
the revealed shoe against its commitment, the cut, every dealt card the next of the cut shoe, the
rules re-run on the recorded commands (the rules library's `round_checker`, the checks a player's
`croupier verify` runs; here every finding is kept), and the wallet's transfers for the round
(round_ledger.py's `LedgerChecks`).

Nothing here does I/O: the callers fetch (one round at a time for ReplayRound, in pages for the
audit) and this decides. Each payload is parsed and validated in one pass from its stored text
(pydantic's JSON mode: cheaper than json.loads and an unvalidated model_construct); what does not
read is named by its version.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from croupier_platform.events import EventRecord, ViolationKind, record_envelope, verify_records
from croupier_rules.errors import RuleError
from croupier_rules.events import EVENT_TYPES, CardsDealt, RoundEvent, event_from_json
from croupier_rules.round_checker import RevealedShoe, check_card, check_commitment, check_cut, check_shoe, cut_of, rerun
from croupier_rules.round_decider import RoundState
from croupier_rules.table_config import TableConfig

from ..domain.round import ROUND_OPENED, SHOE_COMMITTED, RoundOpened, ShoeCommitted, table_from_json
from ..domain.timeline import describe_step
from .ports import LedgerEntry, RoundRow
from .round_ledger import LagBound, LedgerChecks

@dataclass(frozen=True)
class Finding:
    """One disagreement: the event it is about ("v5 RoundSettled"; None for the round as a whole
    or the wallet's side) and what is wrong."""

    event: str | None
    problem: str
    event_id: str | None = None

    def __str__(self) -> str:
        return f"{self.event}: {self.problem}" if self.event else self.problem


@dataclass
class Replay:
    round_id: str
    findings: list[Finding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    timeline: list[str] = field(default_factory=list)
    report: dict[str, Any] = field(default_factory=dict)
    phase: str = ""  # the round's phase as its log folds (empty when it does not)

    @property
    def ok(self) -> bool:
        return not self.findings

    @property
    def disagreements(self) -> list[str]:
        return [str(f) for f in self.findings]

    @property
    def report_json(self) -> str:
        body = {"round_id": self.round_id, "ok": self.ok, "disagreements": self.disagreements,
                "notes": self.notes, "timeline": self.timeline, **self.report}  # fmt: skip
        return json.dumps(body, indent=2, sort_keys=False, default=str)


@lru_cache(maxsize=256)
def _table(game: str, table_json: str) -> TableConfig:
    """Tables repeat across rounds: each distinct recorded table is validated once."""
    return table_from_json(game, json.loads(table_json))


def _table_text(opened_payload: str) -> str | None:
    """The table's JSON inside a RoundOpened payload as sealed (canonical: keys sorted, so "table" is
    followed by "table_id", the last key): the cache key of `_table`, without re-serialising it."""
    start, end = opened_payload.find('"table":{'), opened_payload.rfind(',"table_id":')
    return opened_payload[start + 8 : end] if 0 < start < end else None


@lru_cache(maxsize=16384)
def _rules_event(payload: str) -> RoundEvent:
    """A rules event from its stored text. Most payloads recur across rounds (the same bets, decisions and
    settlements; events are frozen models), so each distinct text is parsed and validated once."""
    return event_from_json(payload)


def _opened_without_table(payload: str, table_text: str) -> RoundOpened:
    """RoundOpened validated with its table left out (`table` read as {}): the table's text is the cache key
    of `_table`, which validates it once per distinct table, so it is not parsed again for every round."""
    at = payload.index(table_text)
    return RoundOpened.model_validate_json(payload[:at] + "{}" + payload[at + len(table_text) :])


def _timeline_line(record: EventRecord) -> str:
    try:
        return describe_step(record_envelope(record))
    except ValueError:
        return f"v{record.version} {record.event_type}: (payload does not read: {record.payload[:200]})"


class _Unset:
    pass


UNSET: Any = _Unset()  # no projection was read (the caller has none to compare)


class RoundCheck(LedgerChecks):
    def __init__(
        self, records: Sequence[EventRecord], projection: RoundRow | None = UNSET, *, detailed: bool = False,
        lag_bound: LagBound | None = None,
    ) -> None:
        """`lag_bound`: past it, what the wallet has not applied of a round over is a violation (None: a note)."""
        if not records:
            raise ValueError("a round check needs the round's records")
        self.round_id = records[0].stream_id
        self.records = records
        self.detailed = detailed
        self.lag_bound = lag_bound
        self.replay = Replay(round_id=self.round_id)
        self.checks: dict[str, str] = {}
        self.opened: tuple[int, RoundOpened] | None = None
        self.shoe: tuple[int, ShoeCommitted] | None = None
        self.rules: list[tuple[int, RoundEvent]] = []
        self.table: TableConfig | None = None
        self._projection: RoundRow | None = None
        if detailed:
            self.replay.timeline = [_timeline_line(r) for r in records]
            self.replay.report["checks"] = self.checks
        edited = self._check_chain()
        self._read_events(edited)
        if projection is not UNSET:
            self._check_projection(projection)

    # -------------------------------------------------------------- helpers

    def say(self, version: int | None, problem: str) -> None:
        if version is None:
            self.replay.findings.append(Finding(None, problem))
            return
        stored = next((r for r in self.records if r.version == version), None)  # None: an event that is missing
        event = f"v{version} {stored.event_type}" if stored else f"v{version}"
        self.replay.findings.append(Finding(event, problem, stored.event_id if stored else None))

    @property
    def shoe_id(self) -> str | None:
        return self.shoe[1].shoe_id if self.shoe is not None else None

    # -------------------------------------------------------------- from the records alone

    def _check_chain(self) -> set[int]:
        """1. The hash chain: nothing edited, missing or reordered. Returns the edited versions."""
        violations = verify_records(self.records)
        previous = {r.version: (self.records[i - 1].version if i else 0) for i, r in enumerate(self.records)} if violations else {}
        for v in violations:
            before = previous.get(v.version, 0)
            if v.kind == ViolationKind.VERSION_GAP and v.version > before + 1:
                gone = f"v{before + 1}" if v.version == before + 2 else f"v{before + 1}..v{v.version - 1}"
                self.say(v.version, f"hash chain: {v.kind} ({v.detail}): {gone} missing before it")
            else:
                self.say(v.version, f"hash chain: {v.kind} ({v.detail})")
        self.checks["hash_chain"] = "ok" if not violations else f"{len(violations)} violation(s)"
        return {v.version for v in violations if v.kind == ViolationKind.EDITED}

    def _read_events(self, edited: set[int]) -> None:
        """2. Read the events (a payload edited into nonsense is named by its version). Each payload is
        parsed and validated in one pass from its stored text (pydantic's JSON mode)."""
        table_text = None
        for r in self.records:
            try:
                if r.event_type == ROUND_OPENED:
                    # A sealed payload (not edited): its table's text is taken as is, and read once per distinct table.
                    text = _table_text(r.payload) if r.version not in edited else None
                    opened = None
                    if text is not None and not self.detailed:
                        try:
                            opened = _opened_without_table(r.payload, text)
                        except ValueError:
                            text = None  # judged as a whole below, and named if it does not read
                    self.opened = (r.version, opened or RoundOpened.model_validate_json(r.payload))
                    table_text = text
                elif r.event_type == SHOE_COMMITTED:
                    self.shoe = (r.version, ShoeCommitted.model_validate_json(r.payload))
                elif r.event_type in EVENT_TYPES:
                    self.rules.append((r.version, _rules_event(r.payload)))
                else:
                    self.replay.notes.append(f"v{r.version} {r.event_type}: not a round event; ignored")
            except ValueError as exc:
                self.say(r.version, f"the payload does not read ({exc.__class__.__name__}: {str(exc)[:200]})")
        if self.opened is None:
            self.say(self.records[0].version, "the stream has no RoundOpened event; nothing more can be checked")
            return
        version, opened = self.opened
        try:
            self.table = _table(opened.game, table_text or json.dumps(opened.table, sort_keys=True, separators=(",", ":")))
        except (RuleError, ValueError, TypeError) as exc:
            self.say(version, f"the recorded table does not read ({exc})")
        if self.detailed:
            self.replay.report["round"] = opened.model_dump(mode="json")

    def _check_projection(self, projection: RoundRow | None) -> None:
        """The round projection (phase, version) is written with every append: a stream that ends
        below it lost its last events, which the hash chain cannot show (nothing follows them)."""
        if projection is None:
            self.say(None, "the round projection holds no row for this round (opened without one, or the row was deleted)")
            return
        if projection.version > self.head:
            more = f" (v{self.head + 1}..v{projection.version})" if projection.version > self.head + 1 else ""
            self.say(self.head + 1, f"missing{more}: the round projection recorded the round at v{projection.version} "
                                    f"({projection.phase}), but its stream ends at v{self.head}")  # fmt: skip
        elif projection.version < self.head:
            # Only a reader racing an append sees this (the projection read first); never a tamper signal.
            self.replay.notes.append(f"the round projection is at v{projection.version}, the stream at v{self.head}")
        self._projection = projection

    # -------------------------------------------------------------- with the shoe and the wallet

    def finish(
        self,
        revealed: RevealedShoe | None,
        entries: list[LedgerEntry] | None,
        *,
        shoe_problem: str | None = None,
        ledger_problem: str | None = None,
    ) -> Replay:
        """`revealed`: the shuffler's shoe (None: not revealed, `shoe_problem` says why if known);
        `entries`: the wallet's transfers touching the round's player or its player-dealer (None: not
        available, see `ledger_problem`; an empty list: the wallet holds nothing for the round)."""
        replay = self.replay
        if self.opened is None or self.table is None:
            return replay
        table = self.table

        # 3. The shoe: revealed, matching its commitment, a proper shoe, the cut recomputed.
        cut: tuple[tuple[str, ...], int] | None = None
        if self.shoe is None:
            kinds = {type(e).__name__ for _, e in self.rules}
            if "RoundVoided" in kinds and "CardsDealt" not in kinds:
                # PlaceBets whose shuffler or dealer failed after the stakes were reserved: voided at once.
                replay.notes.append("voided before a shoe was committed: no cards to check")
            else:
                self.say(None, "the stream has no ShoeCommitted event: the cards cannot be checked")
        else:
            if shoe_problem:
                replay.notes.append(shoe_problem)
            cut = self._check_shoe(revealed, table.decks)

        # 4. Every dealt card: the next card of the committed shoe, positions 0, 1, 2, …
        self._check_cards(cut)

        # 5. The rules again: each recorded command must give exactly the recorded events.
        state = self._rerun(table)
        replay.phase = state.phase
        if self.detailed:
            if state.settlement is not None:
                replay.report["settlement"] = state.settlement.model_dump(mode="json")
            if state.void is not None:
                replay.report["void"] = state.void.model_dump(mode="json")
        projection = self._projection
        if projection is not None and projection.version == self.head and projection.phase != state.phase:
            self.say(None, f"the round projection says {projection.phase}, its log folds to {state.phase}")

        # 6. The wallet's ledger for the round.
        if entries is None:
            self.say(None, f"wallet: the round's transactions could not be listed ({ledger_problem}); the ledger is not checked")
            self.checks["wallet"] = "not checked"
        else:
            self._check_ledger(state, entries)
        return replay

    def _check_shoe(self, revealed: RevealedShoe | None, decks: int) -> tuple[tuple[str, ...], int] | None:
        assert self.shoe is not None
        version, shoe = self.shoe
        before = len(self.replay.findings)
        if revealed is None:
            self.say(version, f"shoe {shoe.shoe_id} could not be revealed, so the commitment and the cards are not checked")
            self.checks["shoe"] = "not revealed"
            return None
        if self.detailed:
            self.replay.report["shoe"] = {"shoe_id": shoe.shoe_id, "commitment": shoe.commitment, "salt_hex": revealed.salt_hex,
                                          "cards": list(revealed.cards), "cut_seed": shoe.cut_seed, "cut_offset": shoe.cut_offset}  # fmt: skip
        if revealed.commitment and revealed.commitment != shoe.commitment:
            self.say(version, f"the shuffler holds commitment {revealed.commitment} for shoe {shoe.shoe_id}, "
                              f"the round recorded {shoe.commitment}")  # fmt: skip
        size = len(revealed.cards)
        wrong_cut = list(check_cut(shoe, size))
        for finding in (*check_commitment(shoe.commitment, revealed), *check_shoe(shoe.size, revealed.cards, decks), *wrong_cut):
            self.say(version, finding.problem)
        offset = cut_of(shoe, size) if wrong_cut else shoe.cut_offset  # the cut the commitment and seed give
        self.checks["shoe"] = "ok" if len(self.replay.findings) == before else "failed"
        return (tuple(revealed.cards), offset)

    def _check_cards(self, cut: tuple[tuple[str, ...], int] | None) -> None:
        dealt: list[dict[str, Any]] = []
        shoe, offset = cut if cut is not None else (None, 0)
        position = 0
        problems = 0
        for version, event in self.rules:
            if not isinstance(event, CardsDealt):
                continue
            for card in event.cards:
                if self.detailed:
                    dealt.append({"version": version, **card.model_dump(mode="json")})
                for finding in check_card(position, card, shoe, offset):
                    problems += 1
                    self.say(version, finding.problem)
                position += 1
        if self.detailed:
            self.replay.report["cards"] = dealt
        self.checks["cards"] = ("ok" if not problems else f"{problems} problem(s)") if cut is not None else "not checked"

    def _rerun(self, table: TableConfig) -> RoundState:
        checked = rerun(table, self.rules)
        for finding in checked.findings:
            self.say(finding.version, finding.problem)
        self.checks["rules"] = "ok" if not checked.findings else f"{len(checked.findings)} problem(s)"
        return checked.state
