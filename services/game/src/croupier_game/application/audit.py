"""AuditService use cases (operators only): replay a round from its log and check it; void it."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from croupier_platform.auth import Identity
from croupier_platform.errors import InvalidArgument, NotFound
from croupier_platform.events import EventEnvelope, verify_chain
from croupier_rules import fairness
from croupier_rules.deciders import decider_for
from croupier_rules.commands import VoidRound
from croupier_rules.errors import RuleError
from croupier_rules.events import EVENT_TYPES, CardsDealt, RoundEvent, event_from_dict
from croupier_rules.replay import command_for

from ..domain.round import ROUND_OPENED, SHOE_COMMITTED, STREAM_TYPE, Round, RoundOpened, ShoeCommitted, table_from_json
from ..domain.timeline import describe_step
from .ports import LedgerEntry, Stakes
from .rounds import RoundBook, retrying

NOT_APPLIED = "wallet has not applied the {what} yet"


@dataclass
class Replay:
    round_id: str
    disagreements: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    timeline: list[str] = field(default_factory=list)
    report: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.disagreements

    @property
    def report_json(self) -> str:
        body = {"round_id": self.round_id, "ok": self.ok, "disagreements": self.disagreements,
                "notes": self.notes, "timeline": self.timeline, **self.report}  # fmt: skip
        return json.dumps(body, indent=2, sort_keys=False, default=str)


@dataclass(frozen=True)
class VoidResult:
    round_id: str
    voided_now: bool
    refunds: dict[str, int]
    reason: str


def _compact(event: RoundEvent) -> str:
    return json.dumps(event.model_dump(mode="json", exclude={"schema_version"}), sort_keys=True)


class AuditUseCases:
    def __init__(self, book: RoundBook, stakes: Stakes) -> None:
        self._book = book
        self._stakes = stakes

    async def void_round(self, actor: Identity, round_id: str, reason: str) -> VoidResult:
        actor.require_operator()
        if not reason.strip():
            raise InvalidArgument("a void needs a reason, e.g. 'dealer shoe malfunction'")

        async def attempt() -> VoidResult:
            return await self._void(await self._book.load(round_id), reason)

        return await retrying(attempt, "VoidRound")

    async def void_as_system(self, round_: Round, reason: str, causation_id: str) -> VoidResult:
        """VoidRound for a round a failure left unable to finish (the keeper): the same events and
        refunds as an operator's void, `causation_id` on the envelope. Made on the round as
        given, without a retry: should it have progressed since it was read, ConcurrencyConflict
        propagates and nothing is written."""
        return await self._void(round_, reason, causation_id)

    async def _void(self, round_: Round, reason: str, causation_id: str | None = None) -> VoidResult:
        round_id = round_.round_id
        if (done := round_.state.void) is not None:
            return VoidResult(round_id, False, dict(done.refunds), done.reason)
        _, events = round_.decider.execute(round_.state, VoidRound(reason=reason))
        voided = (await self._book.append(round_, events, causation_id=causation_id)).state.void
        assert voided is not None
        return VoidResult(round_id, True, dict(voided.refunds), voided.reason)

    async def replay_round(self, actor: Identity, round_id: str) -> Replay:
        actor.require_operator()
        envelopes: list[EventEnvelope] = await self._book.in_transaction(lambda uow: uow.events.read_stream(round_id))
        if not round_id or not envelopes or envelopes[0].stream_type != STREAM_TYPE:
            raise NotFound(f"no round {round_id!r}")
        replay = Replay(round_id=round_id, timeline=[describe_step(e) for e in envelopes])
        checks: dict[str, str] = {}
        replay.report["checks"] = checks
        say = replay.disagreements.append

        # 1. The hash chain: nothing edited, missing or reordered.
        violations = verify_chain(envelopes)
        for v in violations:
            say(f"v{v.version}: hash chain: {v.kind} ({v.detail})")
        checks["hash_chain"] = "ok" if not violations else f"{len(violations)} violation(s)"

        # 2. Read the events (a payload edited into nonsense is named by its version).
        opened: tuple[int, RoundOpened] | None = None
        shoe: tuple[int, ShoeCommitted] | None = None
        rules: list[tuple[int, RoundEvent]] = []
        for e in envelopes:
            try:
                if e.event_type == ROUND_OPENED:
                    opened = (e.version, RoundOpened.model_validate(e.payload))
                elif e.event_type == SHOE_COMMITTED:
                    shoe = (e.version, ShoeCommitted.model_validate(e.payload))
                elif e.event_type in EVENT_TYPES:
                    rules.append((e.version, event_from_dict(e.payload)))
                else:
                    replay.notes.append(f"v{e.version} {e.event_type}: not a round event; ignored")
            except ValueError as exc:
                say(f"v{e.version} {e.event_type}: the payload does not read ({exc.__class__.__name__}: {str(exc)[:200]})")
        if opened is None:
            say("v1: the stream has no RoundOpened event; nothing more can be checked")
            return replay
        opened_version, opened_event = opened
        try:
            table = table_from_json(opened_event.game, opened_event.table)
        except RuleError as exc:
            say(f"v{opened_version} RoundOpened: the recorded table does not read ({exc})")
            return replay
        replay.report["round"] = opened_event.model_dump(mode="json")

        # 3. The shoe: revealed, matching its commitment, a proper shoe, the cut recomputed.
        cut: list[str] | None = None
        if shoe is None:
            say("the stream has no ShoeCommitted event: the cards cannot be checked")
        else:
            cut = await self._check_shoe(replay, shoe[0], shoe[1], table.decks, checks)

        # 4. Every dealt card: the next card of the committed shoe, positions 0, 1, 2, …
        dealt: list[dict[str, Any]] = []
        position = 0
        card_problems = 0
        for version, event in rules:
            if not isinstance(event, CardsDealt):
                continue
            for card in event.cards:
                dealt.append({"version": version, **card.model_dump(mode="json")})
                if card.position != position:
                    card_problems += 1
                    say(f"v{version} CardsDealt: {card.card} ({card.hand}) recorded at position {card.position}, "
                        f"but the next card of the shoe is position {position}")  # fmt: skip
                if cut is not None:
                    expected = cut[position] if position < len(cut) else None
                    if expected != card.card:
                        card_problems += 1
                        say(f"v{version} CardsDealt: position {position} of the cut shoe is {expected}, "
                            f"but {card.card} ({card.hand}) was dealt")  # fmt: skip
                position += 1
        replay.report["cards"] = dealt
        checks["cards"] = ("ok" if not card_problems else f"{card_problems} problem(s)") if cut is not None else "not checked"

        # 5. The rules again: each recorded command must give exactly the recorded events.
        state, rule_problems = self._rerun(replay, opened_event.game, table, rules)
        checks["rules"] = "ok" if not rule_problems else f"{rule_problems} problem(s)"
        if state.settlement is not None:
            replay.report["settlement"] = state.settlement.model_dump(mode="json")
        if state.void is not None:
            replay.report["void"] = state.void.model_dump(mode="json")

        # 6. The wallet's ledger for the round.
        await self._check_ledger(replay, round_id, state, rules, checks)
        return replay

    async def _check_shoe(
        self, replay: Replay, version: int, shoe: ShoeCommitted, decks: int, checks: dict[str, str]
    ) -> list[str] | None:
        say = replay.disagreements.append
        before = len(replay.disagreements)
        head = f"v{version} ShoeCommitted"
        try:
            revealed = await self._book.shuffler.reveal_shoe(shoe.shoe_id)
        except Exception as exc:  # noqa: BLE001 - an unreachable shuffler leaves the shoe unchecked, reported
            revealed = None
            replay.notes.append(f"the shuffler could not be asked ({exc})")
        if revealed is None:
            say(f"{head}: shoe {shoe.shoe_id} could not be revealed, so the commitment and the cards are not checked")
            checks["shoe"] = "not revealed"
            return None
        replay.report["shoe"] = {"shoe_id": shoe.shoe_id, "commitment": shoe.commitment, "salt_hex": revealed.salt_hex,
                                 "cards": list(revealed.cards), "cut_seed": shoe.cut_seed, "cut_offset": shoe.cut_offset}  # fmt: skip
        if revealed.commitment and revealed.commitment != shoe.commitment:
            say(f"{head}: the shuffler holds commitment {revealed.commitment} for shoe {shoe.shoe_id}, "
                f"the round recorded {shoe.commitment}")  # fmt: skip
        try:
            recomputed = fairness.commitment(bytes.fromhex(revealed.salt_hex), revealed.cards)
        except (ValueError, RuleError) as exc:
            recomputed = f"(not computable: {exc})"
        if recomputed != shoe.commitment:
            say(f"{head}: SHA-256 of the revealed salt and shoe is {recomputed}, the recorded commitment is {shoe.commitment}")
        for problem in fairness.check_shoe(revealed.cards, decks):
            say(f"{head}: the revealed shoe is not a proper {decks}-deck shoe: {problem}")
        if shoe.size != len(revealed.cards):
            say(f"{head}: recorded size {shoe.size}, the revealed shoe holds {len(revealed.cards)} cards")
        offset = fairness.cut_offset(shoe.commitment, shoe.cut_seed, len(revealed.cards)) if revealed.cards else 0
        if offset != shoe.cut_offset:
            say(f"{head}: recorded cut offset {shoe.cut_offset}, but the commitment and cut seed "
                f"{shoe.cut_seed!r} give {offset}")  # fmt: skip
        checks["shoe"] = "ok" if len(replay.disagreements) == before else "failed"
        return fairness.cut_shoe(revealed.cards, offset)

    @staticmethod
    def _rerun(replay: Replay, game: str, table: Any, rules: list[tuple[int, RoundEvent]]) -> tuple[Any, int]:
        say = replay.disagreements.append
        decider = decider_for(game)
        state = decider.initial_state(table)
        problems = 0
        index = 0
        while index < len(rules):
            version, event = rules[index]
            command = command_for(event)
            if command is None:
                problems += 1
                say(f"v{version} {event.event_type}: recorded where the rules expected a command's first event")
                index += 1
                continue
            try:
                state, produced = decider.execute(state, command)
            except RuleError as exc:
                problems += 1
                say(f"v{version} {event.event_type}: the rules refuse the recorded {type(command).__name__} ({exc})")
                try:
                    state = decider.evolve(state, event)
                except RuleError:
                    pass
                index += 1
                continue
            for offset, expected in enumerate(produced):
                if index + offset >= len(rules):
                    problems += 1
                    say(f"v{version}: the rules then give {expected.event_type} {_compact(expected)}, which is not recorded")
                    continue
                at, recorded = rules[index + offset]
                if recorded != expected:
                    problems += 1
                    say(f"v{at} {recorded.event_type}: recorded {_compact(recorded)}, the rules give {_compact(expected)}")
            index += max(1, len(produced))
        return state, problems

    async def _check_ledger(
        self, replay: Replay, round_id: str, state: Any, rules: list[tuple[int, RoundEvent]], checks: dict[str, str]
    ) -> None:
        say = replay.disagreements.append
        try:
            entries: list[LedgerEntry] = await self._stakes.list_round_transactions(round_id)
        except Exception as exc:  # noqa: BLE001 - reported, never a stack trace
            say(f"wallet: the round's transactions could not be listed ({exc}); the ledger is not checked")
            checks["wallet"] = "not checked"
            return
        replay.report["ledger"] = [e.__dict__ for e in entries]
        before = len(replay.disagreements)
        staked = state.total_staked

        def total(kind: str, *, live: bool = True) -> int:
            return sum(abs(e.amount) for e in entries if e.kind == kind and (not live or e.status != "voided"))

        reserved = total("stake", live=False)
        if reserved != staked:
            say(f"wallet: stakes of {reserved} are recorded for the round, the round staked {staked}")
        pending = any(e.kind == "stake" and e.status == "pending" for e in entries)
        # The player's net over the round: the signed changes still standing (a released stake counts nothing).
        net = sum(e.amount for e in entries if e.status != "voided")
        last = {type(e).__name__: v for v, e in rules}
        if state.phase == "settled":
            returned = sum(r.returned for r in state.settlement.results.values())
            if pending and not total("payout"):
                replay.notes.append(NOT_APPLIED.format(what="settlement"))
                checks["wallet"] = "settlement not applied yet"
                return
            if net != returned - staked:
                say(f"v{last.get('RoundSettled')} RoundSettled: the wallet moved {net:+} for the player, "
                    f"the round returns {returned} of {staked} staked ({returned - staked:+})")  # fmt: skip
        elif state.phase == "voided":
            if pending:
                replay.notes.append(NOT_APPLIED.format(what="void"))
                checks["wallet"] = "void not applied yet"
                return
            if net != 0:
                say(f"v{last.get('RoundVoided')} RoundVoided: the wallet left the player at {net:+} for the round, "
                    "a void must leave every balance as before (0)")  # fmt: skip
        elif total("payout"):
            say(f"wallet: payouts of {total('payout')} for a round that is not settled")
        checks["wallet"] = "ok" if len(replay.disagreements) == before else "failed"
