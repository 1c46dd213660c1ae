"""Thin servicers: proto in, use case, proto out. Errors map in entrypoints/errors.py."""

from __future__ import annotations

import dataclasses

import grpc

from croupier.v1 import audit_pb2, audit_pb2_grpc, common_pb2, table_pb2, table_pb2_grpc
from croupier_platform.auth import current_identity
from croupier_platform.errors import InvalidArgument
from croupier_platform.tracing import round_span
from croupier_platform.wire_enums import WireEnum
from croupier_rules.round_decider import PHASES
from croupier_rules.game_registry import all_choices
from croupier_rules.table_config import GAMES

from ..application.audit import AuditUseCases
from ..application.play import PlayUseCases
from ..application.seats import SeatStatus, SeatUseCases
from ..application.watching import RoundUpdate, SeatNotice, WatchUseCases
from ..domain.catalogue import TableEntry
from ..domain.seat import SEAT_ROLES
from ..domain.visibility import RoundView, StepView
from .errors import handles_errors


# The enums whose values the rules library defines, and the seat roles the game's own.
GAME = WireEnum(common_pb2.Game.DESCRIPTOR, GAMES)
ROUND_PHASE = WireEnum(common_pb2.RoundPhase.DESCRIPTOR, PHASES)
CHOICE = WireEnum(common_pb2.Choice.DESCRIPTOR, all_choices())
SEAT_ROLE = WireEnum(common_pb2.SeatRole.DESCRIPTOR, SEAT_ROLES)


def table_info(entry: TableEntry) -> table_pb2.TableInfo:
    config = entry.config
    return table_pb2.TableInfo(
        table_id=entry.table_id,
        game=entry.game,
        table_type=entry.table_type,
        currency=entry.currency,
        chips=list(config.chips),
        limits={name: table_pb2.BetLimit(min=limit.min, max=limit.max) for name, limit in config.limits.items()},
        decks=config.decks,
        decision_timeout_s=config.decision_timeout_s,
        default_action=config.default_action,
        over_limit=config.over_limit,
        bets=list(entry.bet_names),
        dealer=entry.dealer,
        presence_grace_s=config.presence_grace_s,
        idle_limit_s=config.idle_limit_s,
        game_enum=GAME.number(entry.game),
    )


def step_message(step: StepView) -> common_pb2.RoundStep:
    return common_pb2.RoundStep(
        version=step.version, event_type=step.event_type, occurred_at=step.occurred_at, payload_json=step.payload_json,
        caused_by=step.caused_by, caused_by_reason=step.caused_by_reason,
    )  # fmt: skip


def round_message(view: RoundView) -> table_pb2.RoundView:
    return table_pb2.RoundView(
        round_id=view.round_id,
        table_id=view.table_id,
        seat_id=view.seat_id,
        game=view.game,
        currency=view.currency,
        phase=view.phase,
        bets=view.bets,
        cards=[common_pb2.Card(card=c.card, hand=c.hand, face_up=c.face_up, position=c.position) for c in view.cards],
        pending_bets=view.pending_bets,
        options=view.options,
        results=[
            common_pb2.BetResult(bet=r.bet, stake=r.stake, returned=r.returned, net=r.net, outcome=r.outcome)
            for r in view.results
        ],
        total_staked=view.total_staked,
        total_returned=view.total_returned,
        shoe_id=view.shoe_id,
        commitment=view.commitment,
        cut_seed=view.cut_seed,
        cut_offset=view.cut_offset,
        revealed_salt=view.revealed_salt,
        revealed_shoe=view.revealed_shoe,
        void_reason=view.void_reason,
        steps=[
            step_message(s) for s in view.steps
        ],
        balance_before=view.balance_before,
        balance_after=view.balance_after,
        hand_values=view.hand_values,
        commission=view.commission,
        dealer_net=view.dealer_net,
        version=view.version,
        role=view.role,
        opponent_nickname=view.opponent_nickname,
        game_enum=GAME.number(view.game),
        phase_enum=ROUND_PHASE.number(view.phase),
        options_enum=CHOICE.numbers(view.options),
        role_enum=SEAT_ROLE.number(view.role),
        decision_deadline=view.decision_deadline,
        option_costs=view.option_costs,
    )


AUTO_CONFIRM = {"": None, "on": True, "off": False}


def seat_message(status: SeatStatus) -> table_pb2.SeatStatus:
    return table_pb2.SeatStatus(
        **dataclasses.asdict(status), role_enum=SEAT_ROLE.number(status.role),
        last_round_phase_enum=ROUND_PHASE.number(status.last_round_phase),
    )  # fmt: skip


def update_message(update: RoundUpdate) -> table_pb2.RoundUpdate:
    step = update.step
    return table_pb2.RoundUpdate(
        step=step_message(step),
        caused_by=update.caused_by, round=round_message(update.view),
    )  # fmt: skip


def seat_notice_message(notice: SeatNotice) -> table_pb2.WatchSeatResponse:
    if notice.round_update is not None:
        return table_pb2.WatchSeatResponse(position=notice.position, round_update=update_message(notice.round_update))
    if notice.ended is not None:
        return table_pb2.WatchSeatResponse(position=notice.position, seat_ended=table_pb2.SeatEnded(reason=notice.ended))
    assert notice.changed is not None
    changed = notice.changed
    return table_pb2.WatchSeatResponse(
        position=notice.position,
        seat_changed=table_pb2.SeatChanged(
            change=changed.change, status=seat_message(changed.status) if changed.status else None,
            may_deal=changed.may_deal, may_deal_missing=changed.may_deal_missing,
        ),
    )  # fmt: skip


class TableServicer(table_pb2_grpc.TableServiceServicer):
    def __init__(self, seats: SeatUseCases, play: PlayUseCases, watching: WatchUseCases) -> None:
        self._seats = seats
        self._play = play
        self._watching = watching

    @handles_errors
    async def ListTables(self, request, context):  # noqa: ANN001, ANN201, N802
        current_identity()
        return table_pb2.ListTablesResponse(tables=[table_info(e) for e in self._seats.list_tables(GAME.value("game", request.game, request.game_enum))])

    @handles_errors
    async def JoinTable(self, request, context):  # noqa: ANN001, ANN201, N802
        identity = current_identity()
        seat, entry = await self._seats.join_table(
            identity, request.table_id, SEAT_ROLE.value("role", request.role, request.role_enum), request.nickname,
            request.auto_confirm,
        )
        status = await self._seats.seat_status(identity, seat.seat_id)
        return table_pb2.JoinTableResponse(seat_id=seat.seat_id, table=table_info(entry), status=seat_message(status))

    @handles_errors
    async def ConfirmRound(self, request, context):  # noqa: ANN001, ANN201, N802
        identity = current_identity()
        switch = request.auto_confirm.strip().lower()
        if switch not in AUTO_CONFIRM:
            raise InvalidArgument(
                f"auto_confirm {request.auto_confirm!r} is not allowed; send on, off, or leave it empty", fields={"auto_confirm": "on, off or empty"}
            )
        seen = request.after_round_id if request.HasField("after_round_id") else None
        await self._seats.confirm_round(identity, request.seat_id, AUTO_CONFIRM[switch], seen)
        return table_pb2.ConfirmRoundResponse(status=seat_message(await self._seats.seat_status(identity, request.seat_id)))

    @handles_errors
    async def GetSeatStatus(self, request, context):  # noqa: ANN001, ANN201, N802
        return table_pb2.GetSeatStatusResponse(status=seat_message(await self._seats.seat_status(current_identity(), request.seat_id)))

    @handles_errors
    async def LeaveTable(self, request, context):  # noqa: ANN001, ANN201, N802
        await self._seats.leave_table(current_identity(), request.seat_id)
        return table_pb2.LeaveTableResponse()

    @handles_errors
    async def PlaceBets(self, request, context):  # noqa: ANN001, ANN201, N802
        # The round's span starts inside, once the seat's next round id is known.
        view = await self._play.place_bets(
            current_identity(), request.seat_id, dict(request.bets), request.idempotency_key, request.cut_seed
        )
        return table_pb2.PlaceBetsResponse(round=round_message(view))

    @handles_errors
    async def Deal(self, request, context):  # noqa: ANN001, ANN201, N802
        with round_span("Deal", request.round_id):
            view = await self._play.deal(current_identity(), request.round_id, request.version)
        return table_pb2.DealResponse(round=round_message(view))

    @handles_errors
    async def Decide(self, request, context):  # noqa: ANN001, ANN201, N802
        with round_span("Decide", request.round_id):
            view = await self._play.decide(
                current_identity(), request.round_id, CHOICE.value("choice", request.choice, request.choice_enum), request.bet,
                request.version,
            )
        return table_pb2.DecideResponse(round=round_message(view))

    @handles_errors
    async def Rebet(self, request, context):  # noqa: ANN001, ANN201, N802
        view = await self._play.rebet(current_identity(), request.seat_id, request.idempotency_key, request.cut_seed)
        return table_pb2.RebetResponse(round=round_message(view))

    @handles_errors
    async def GetRound(self, request, context):  # noqa: ANN001, ANN201, N802
        return table_pb2.GetRoundResponse(round=round_message(await self._play.get_round(current_identity(), request.round_id)))

    @handles_errors
    async def ListRounds(self, request, context):  # noqa: ANN001, ANN201, N802
        page = await self._play.list_rounds(current_identity(), request.page_size, request.page_token, request.limit)
        return table_pb2.ListRoundsResponse(rounds=[round_message(v) for v in page.items], next_page_token=page.next_page_token)

    @handles_errors.stream
    async def WatchSeat(self, request, context):  # noqa: ANN001, ANN201, N802
        async for notice in self._watching.watch_seat(current_identity(), request.seat_id, request.after_position):
            yield seat_notice_message(notice)

    @handles_errors.stream
    async def WatchRound(self, request, context):  # noqa: ANN001, ANN201, N802
        async for notice in self._watching.watch_round(current_identity(), request.round_id, request.after_position):
            yield table_pb2.WatchRoundResponse(position=notice.position, round_update=update_message(notice.update))


class AuditServicer(audit_pb2_grpc.AuditServiceServicer):
    def __init__(self, audit: AuditUseCases) -> None:
        self._audit = audit

    @handles_errors
    async def ReplayRound(self, request, context):  # noqa: ANN001, ANN201, N802
        replay = await self._audit.replay_round(current_identity(), request.round_id)
        return audit_pb2.ReplayRoundResponse(
            round_id=replay.round_id, ok=replay.ok, disagreements=replay.disagreements,
            timeline=replay.timeline, report_json=replay.report_json,
        )  # fmt: skip

    @handles_errors
    async def VoidRound(self, request, context):  # noqa: ANN001, ANN201, N802
        result = await self._audit.void_round(current_identity(), request.round_id, request.reason)
        return audit_pb2.VoidRoundResponse(
            round_id=result.round_id, voided_now=result.voided_now, refunds=result.refunds, reason=result.reason
        )

    @handles_errors.stream
    async def AuditAll(self, request, context):  # noqa: ANN001, ANN201, N802
        async for step in self._audit.audit_all(current_identity(), request.page_size):
            yield audit_pb2.AuditAllResponse(
                rounds=step.rounds, events=step.events, rounds_total=step.total,
                violations=[
                    audit_pb2.AuditViolation(round_id=v.round_id or "", event=v.event or "", event_id=v.event_id or "", problem=v.problem)
                    for v in step.violations
                ],
                rounds_with_notes=step.notes, done=step.done, seconds=step.seconds,
                ledger_accounts=step.ledger.accounts if step.ledger else 0,
                ledger_entries=step.ledger.entries if step.ledger else 0,
            )  # fmt: skip


def register(server: grpc.aio.Server, seats: SeatUseCases, play: PlayUseCases, audit: AuditUseCases, watching: WatchUseCases) -> None:
    table_pb2_grpc.add_TableServiceServicer_to_server(TableServicer(seats, play, watching), server)
    audit_pb2_grpc.add_AuditServiceServicer_to_server(AuditServicer(audit), server)


SERVICE_NAMES = [
    table_pb2.DESCRIPTOR.services_by_name["TableService"].full_name,
    audit_pb2.DESCRIPTOR.services_by_name["AuditService"].full_name,
]
