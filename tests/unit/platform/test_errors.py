"""The one error mapping (croupier_platform.errors): every error a service raises becomes a status
with a google.rpc.ErrorInfo whose reason is a value of proto/croupier/v1/errors.proto, the reasons
in the code are all in the proto, and docs/api.md lists them all."""

from __future__ import annotations

import ast
import re

import grpc
import psycopg
import pytest
from google.rpc import error_details_pb2, status_pb2
from grpc_status import rpc_status
from sqlalchemy.exc import OperationalError

from croupier.v1 import errors_pb2
from croupier_platform.errors import (
    DOMAIN, INTERNAL_REFUSAL, Conflict, FailedPrecondition, InvalidArgument, NotFound, Reason, Refusal, ServiceError,
    Unavailable, grpc_status, peer_refusal, refusal_for, relayed,
)  # fmt: skip
from croupier_game.entrypoints.errors import handles_errors as game_errors
from croupier_platform.eventstore import ConcurrencyConflict
from croupier_rules.errors import InvalidInput, RuleError
from tests.conftest import ROOT


@pytest.mark.parametrize(
    "error, code, reason, metadata, fields",
    [
        (NotFound("no round 'r1'", reason="ROUND_NOT_FOUND", metadata={"round_id": "r1"}),
         grpc.StatusCode.NOT_FOUND, "ROUND_NOT_FOUND", {"round_id": "r1"}, {}),
        (InvalidArgument("seat_id is empty", fields={"seat_id": "required"}), grpc.StatusCode.INVALID_ARGUMENT, "INVALID_FIELD", {}, {"seat_id": "required"}),
        (RuleError("bets are only taken before the deal", reason="WRONG_PHASE", metadata={"phase": "deciding"}),
         grpc.StatusCode.FAILED_PRECONDITION, "WRONG_PHASE", {"phase": "deciding"}, {}),
        (RuleError("a rule says no"), grpc.StatusCode.FAILED_PRECONDITION, "ACTION_NOT_ALLOWED", {}, {}),
        (InvalidInput("unknown decision 'x'", field="choice"), grpc.StatusCode.INVALID_ARGUMENT, "INVALID_FIELD", {}, {"choice": "unknown decision 'x'"}),
        (ConcurrencyConflict("r1", 3, 4), grpc.StatusCode.ABORTED, "CONCURRENT_CHANGE", {}, {}),
        (Conflict("the round kept changing"), grpc.StatusCode.ABORTED, "CONCURRENT_CHANGE", {}, {}),
        (OperationalError("SELECT 1", {}, psycopg.OperationalError("connection refused")),
         grpc.StatusCode.UNAVAILABLE, "SERVICE_UNAVAILABLE", {}, {}),
        (Unavailable("the wallet is away"), grpc.StatusCode.UNAVAILABLE, "SERVICE_UNAVAILABLE", {}, {}),
    ],
)
def test_each_kind_of_error_maps_to_its_status_and_reason(error, code, reason, metadata, fields) -> None:
    refusal = refusal_for(game_errors.translate(error))  # as the game's servicers do: the rules' errors are the game's to map

    assert refusal is not None
    assert (refusal.code, refusal.reason, dict(refusal.metadata), dict(refusal.fields)) == (code, reason, metadata, fields)
    assert refusal.domain == DOMAIN


def test_a_bug_is_not_mapped_and_leaves_as_internal_with_a_reason() -> None:
    assert refusal_for(KeyError("oops")) is None
    assert (INTERNAL_REFUSAL.code, INTERNAL_REFUSAL.reason) == (grpc.StatusCode.INTERNAL, "INTERNAL")


def test_the_grpc_status_carries_error_info_and_bad_request_in_its_details() -> None:
    refusal = Refusal(grpc.StatusCode.INVALID_ARGUMENT, "bet ante of 1 is under the table minimum 100", "BET_BELOW_TABLE_MIN",
                      {"bet": "ante", "amount": "1"}, {"bets.ante": "under the table minimum"})  # fmt: skip

    status = grpc_status(refusal)

    assert (status.code, status.details) == (grpc.StatusCode.INVALID_ARGUMENT, refusal.message)
    [(key, raw)] = status.trailing_metadata
    assert key == "grpc-status-details-bin"
    rich = status_pb2.Status.FromString(raw)
    info, bad_request = error_details_pb2.ErrorInfo(), error_details_pb2.BadRequest()
    assert rich.details[0].Unpack(info) and rich.details[1].Unpack(bad_request)
    assert (info.reason, info.domain, dict(info.metadata)) == ("BET_BELOW_TABLE_MIN", DOMAIN, {"bet": "ante", "amount": "1"})
    assert [(v.field, v.description) for v in bad_request.field_violations] == [("bets.ante", "under the table minimum")]


class _FailedCall(grpc.RpcError):
    """A failed call as a client sees it (code, details, trailers), for the peer side of the mapping."""

    def __init__(self, status: grpc.Status) -> None:
        self._status = status

    def code(self) -> grpc.StatusCode:
        return self._status.code

    def details(self) -> str:
        return self._status.details

    def trailing_metadata(self):  # noqa: ANN201
        return self._status.trailing_metadata


def test_a_peers_refusal_is_passed_on_with_its_reason_and_metadata() -> None:
    sent = grpc_status(refusal_for(FailedPrecondition("balance 100 cannot cover stakes of 150 (PLAY)", reason="INSUFFICIENT_FUNDS",
                                                      metadata={"available": 100, "amount": 150, "currency": "PLAY"})))  # fmt: skip
    call = _FailedCall(sent)

    class StakesRefused(FailedPrecondition):
        pass

    error = relayed(StakesRefused, "the wallet refused the stakes of 150 PLAY: balance 100 ...", call)

    assert isinstance(error, StakesRefused)
    refusal = refusal_for(error)
    assert (refusal.code, refusal.reason) == (grpc.StatusCode.FAILED_PRECONDITION, "INSUFFICIENT_FUNDS")
    assert refusal.metadata == {"available": "100", "amount": "150", "currency": "PLAY"}
    assert refusal.message.startswith("the wallet refused")


def test_a_peer_status_without_details_keeps_the_errors_own_reason() -> None:
    bare = _FailedCall(rpc_status.to_status(status_pb2.Status(code=grpc.StatusCode.UNAVAILABLE.value[0], message="connect failed")))

    assert peer_refusal(bare).reason == ""
    assert refusal_for(relayed(Unavailable, "the wallet is unavailable", bare)).reason == "SERVICE_UNAVAILABLE"


def test_an_unknown_reason_falls_back_to_the_status_default_rather_than_leaving_without_one() -> None:
    assert refusal_for(FailedPrecondition("no", reason="NOT_A_REASON")).reason == "ACTION_NOT_ALLOWED"


def test_reworded_keeps_the_class_reason_metadata_and_fields() -> None:
    original = NotFound("no seat 's1'", reason="SEAT_NOT_FOUND", metadata={"seat_id": "s1"}, fields={"seat_id": "unknown"})

    reworded = original.reworded("no seat 's1' of yours")

    assert type(reworded) is NotFound and str(reworded) == "no seat 's1' of yours"
    assert (reworded.reason, reworded.metadata, reworded.fields) == ("SEAT_NOT_FOUND", {"seat_id": "s1"}, {"seat_id": "unknown"})


def test_reason_is_the_proto_enum_without_its_prefix() -> None:
    names = [name.removeprefix("ERROR_REASON_") for name in errors_pb2.ErrorReason.keys() if name != "ERROR_REASON_UNSPECIFIED"]

    assert list(Reason.__members__) == names and Reason.INSUFFICIENT_FUNDS == "INSUFFICIENT_FUNDS"


def _reasons_in_source() -> dict[str, list[str]]:
    """Every reason the code names: `reason="X"` arguments and `reason = "X"` class attributes."""
    found: dict[str, list[str]] = {}
    for root in ("libs", "services", "cli"):
        for path in (ROOT / root).rglob("*.py"):
            if "/src/" not in str(path) or "croupier/v1" in str(path):
                continue
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                value = None
                if isinstance(node, ast.keyword) and node.arg == "reason":
                    value = node.value
                elif isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["reason"]:
                    value = node.value
                if isinstance(value, ast.Constant) and isinstance(value.value, str) and value.value.isupper():
                    found.setdefault(value.value, []).append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return found


def test_every_reason_the_code_sends_is_in_the_proto() -> None:
    used = _reasons_in_source()

    assert {"INSUFFICIENT_FUNDS", "BET_ABOVE_TABLE_MAX", "TOKEN_EXPIRED", "WRONG_PHASE"} <= used.keys()  # the scan finds them
    unknown = {reason: where for reason, where in used.items() if reason not in Reason.__members__}
    assert unknown == {}


def test_the_api_page_lists_every_reason() -> None:
    page = (ROOT / "docs" / "api.md").read_text()
    section = page.split("\n## Errors", 1)[1].split("\n## ", 1)[0]
    listed = re.findall(r"^\| `([A-Z_]+)` \|", section, flags=re.MULTILINE)

    assert listed == list(Reason.__members__)


def test_a_service_error_without_a_subclass_is_internal() -> None:
    assert refusal_for(ServiceError("?")).reason == "INTERNAL"
