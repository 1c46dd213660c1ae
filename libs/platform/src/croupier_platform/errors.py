"""Service errors, each with one gRPC status and a stable reason; the message says what was wrong
and what is allowed.

The one mapping from an exception to the status a client sees is `refusal_for` (and
`grpc_status` for the wire): the code, the message, and a google.rpc.ErrorInfo (reason, domain,
metadata) plus, for bad fields, a google.rpc.BadRequest, sent through grpcio-status. The reasons
are the ErrorReason values of proto/croupier/v1/errors.proto, without their prefix.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

import grpc
from google.protobuf import any_pb2
from google.rpc import error_details_pb2, status_pb2
from grpc_status import rpc_status

from croupier.v1 import errors_pb2

from .faults import DeclaredFault, transient_cause

DOMAIN = "croupier.casino"  # ErrorInfo.domain of every Croupier error
_PREFIX = "ERROR_REASON_"

# The proto's ErrorReason as a Python enum: Reason.INSUFFICIENT_FUNDS == "INSUFFICIENT_FUNDS".
Reason = enum.StrEnum(  # type: ignore[misc]
    "Reason", {name.removeprefix(_PREFIX): name.removeprefix(_PREFIX) for name in errors_pb2.ErrorReason.keys()[1:]}
)


class ServiceError(DeclaredFault):
    """A refusal: `status` and `reason` by class, overridable per raise; `metadata` (the values a
    client may act on, e.g. what is left) and `fields` (field path -> what is wrong with it)."""

    status: grpc.StatusCode = grpc.StatusCode.INTERNAL
    reason: str = "INTERNAL"

    def __init__(
        self, message: str = "", *, reason: str | None = None, metadata: Mapping[str, Any] | None = None,
        fields: Mapping[str, str] | None = None,
    ) -> None:  # fmt: skip
        super().__init__(message)
        if reason is not None:
            self.reason = reason
        self.metadata = {key: str(value) for key, value in (metadata or {}).items()}
        self.fields = dict(fields or {})

    def reworded(self, message: str) -> ServiceError:
        """The same refusal (class, reason, metadata, fields) with another message."""
        error = ServiceError.__new__(type(self))
        ServiceError.__init__(error, message, reason=self.reason, metadata=self.metadata, fields=self.fields)
        return error


class InvalidArgument(ServiceError):
    status = grpc.StatusCode.INVALID_ARGUMENT
    reason = "INVALID_FIELD"


class NotFound(ServiceError):
    status = grpc.StatusCode.NOT_FOUND
    reason = "NOT_FOUND"


class FailedPrecondition(ServiceError):
    status = grpc.StatusCode.FAILED_PRECONDITION
    reason = "ACTION_NOT_ALLOWED"


class PermissionDenied(ServiceError):
    status = grpc.StatusCode.PERMISSION_DENIED
    reason = "PERMISSION_DENIED"


class AlreadyExists(ServiceError):
    """An idempotency key already used for another request."""

    status = grpc.StatusCode.ALREADY_EXISTS
    reason = "IDEMPOTENCY_KEY_REUSED"


class Unauthenticated(ServiceError):
    status = grpc.StatusCode.UNAUTHENTICATED
    reason = "TOKEN_INVALID"


class Conflict(ServiceError):
    """A concurrent change won (optimistic concurrency); the caller may retry."""

    status = grpc.StatusCode.ABORTED
    reason = "CONCURRENT_CHANGE"
    outage = "a concurrent change won"


class Unavailable(ServiceError):
    status = grpc.StatusCode.UNAVAILABLE
    reason = "SERVICE_UNAVAILABLE"
    outage = "a service is unavailable"


class ResourceExhausted(ServiceError):
    """A caller past a per-connection bound (too many streams open, a stream too slow to keep up)."""

    status = grpc.StatusCode.RESOURCE_EXHAUSTED
    reason = "STREAM_LIMIT_REACHED"


# Messages echo what the client sent; a status rides in HTTP/2 trailers, and a long one breaks the reply.
MAX_STATUS_MESSAGE_CHARS = 512
_MAX_DETAIL_CHARS = 200  # each metadata value and field description


@dataclass(frozen=True)
class Refusal:
    """What a client is told: the status code and message, the reason and its details."""

    code: grpc.StatusCode
    message: str
    reason: str
    metadata: Mapping[str, str] = field(default_factory=dict)
    fields: Mapping[str, str] = field(default_factory=dict)
    domain: str = DOMAIN


INTERNAL_REFUSAL = Refusal(grpc.StatusCode.INTERNAL, "internal error; the operation was not applied", "INTERNAL")


# How refusal_for learns the errors of code that knows no gRPC (the event store's conflict; a service's
# own errors map in its entrypoints/errors.py): a rule returns the refusal for an error it knows, None for any other.
RefusalRule = Callable[[Exception], "Refusal | None"]
_refusal_rules: list[RefusalRule] = []


def register_refusal_rule(rule: RefusalRule) -> None:
    """Add `rule` to refusal_for (once, however often it is registered): called by the code that
    knows both the errors and their statuses (a service's entrypoints, the event store)."""
    if rule not in _refusal_rules:
        _refusal_rules.append(rule)


def refusal_for(error: Exception) -> Refusal | None:
    """The refusal for a known error; None for a bug (reported as INTERNAL_REFUSAL, without details)."""
    if isinstance(error, ServiceError):
        return make_refusal(error.status, str(error), error.reason, error.metadata, error.fields)
    for rule in _refusal_rules:
        if (refusal := rule(error)) is not None:
            return refusal
    if isinstance(error, grpc.aio.AioRpcError):  # a peer's refusal passed on as it was given
        peer = peer_refusal(error)
        return make_refusal(peer.code, peer.message, peer.reason, peer.metadata, peer.fields)
    if (cause := transient_cause(error)) is not None:
        # An outage, never INTERNAL: UNAVAILABLE is the status a gRPC client's retry policy retries.
        return make_refusal(grpc.StatusCode.UNAVAILABLE, f"{cause}; the call may be retried", "SERVICE_UNAVAILABLE")
    return None


def grpc_status(refusal: Refusal) -> grpc.Status:
    """The refusal as a grpc.Status with its details, for `context.abort_with_status` (aio or sync)."""
    info = error_details_pb2.ErrorInfo(reason=refusal.reason, domain=refusal.domain, metadata=dict(refusal.metadata))
    details = [_packed(info)]
    if refusal.fields:
        violations = [error_details_pb2.BadRequest.FieldViolation(field=f, description=d) for f, d in refusal.fields.items()]
        details.append(_packed(error_details_pb2.BadRequest(field_violations=violations)))
    status = status_pb2.Status(code=refusal.code.value[0], message=refusal.message, details=details)
    return rpc_status.to_status(status)


def peer_refusal(error: grpc.RpcError) -> Refusal:
    """The refusal a server sent (its ErrorInfo and BadRequest), read from a failed call (sync or aio);
    reason "" when it carries none (a server that is not Croupier's, or a status from the channel)."""
    code = error.code() if callable(getattr(error, "code", None)) else grpc.StatusCode.UNKNOWN
    message = (error.details() if callable(getattr(error, "details", None)) else None) or ""
    reason, metadata, fields, domain = "", {}, {}, ""
    try:
        status = rpc_status.from_call(error)
    except (ValueError, AttributeError):  # details that disagree with the status: ignored, not trusted
        status = None
    for detail in status.details if status is not None else ():
        info, bad_request = error_details_pb2.ErrorInfo(), error_details_pb2.BadRequest()
        if detail.Is(info.DESCRIPTOR) and detail.Unpack(info):
            reason, metadata, domain = info.reason, dict(info.metadata), info.domain
        elif detail.Is(bad_request.DESCRIPTOR) and detail.Unpack(bad_request):
            fields = {v.field: v.description for v in bad_request.field_violations}
    return Refusal(code or grpc.StatusCode.UNKNOWN, message, reason, metadata, fields, domain)


E = TypeVar("E", bound=ServiceError)


def relayed(error_type: type[E], message: str, peer: grpc.RpcError) -> E:
    """`error_type(message)` for a peer service's refusal, carrying the reason, metadata and fields
    the peer sent, so a wallet's INSUFFICIENT_FUNDS reaches the player as it is; the error type's own
    reason when the peer sent none."""
    sent = peer_refusal(peer)
    error = ServiceError.__new__(error_type)
    ServiceError.__init__(error, message, reason=sent.reason or None, metadata=sent.metadata, fields=sent.fields)
    return error


def bounded(message: str, limit: int = MAX_STATUS_MESSAGE_CHARS) -> str:
    """`message` cut to `limit` characters, saying how much was cut."""
    if len(message) <= limit:
        return message
    cut = f"... ({len(message) - limit} more characters)"
    return message[: limit - len(cut)] + cut


def make_refusal(
    code: grpc.StatusCode, message: str, reason: str, metadata: Mapping[str, str] | None = None,
    fields: Mapping[str, str] | None = None,
) -> Refusal:  # fmt: skip
    """A refusal within what a status may carry: messages and details cut to size, a reason the
    proto does not know replaced by the code's default."""
    known = reason in Reason.__members__
    return Refusal(
        code, bounded(message), reason if known else _default_reason(code),
        {k: bounded(str(v), _MAX_DETAIL_CHARS) for k, v in (metadata or {}).items()},
        {bounded(f, _MAX_DETAIL_CHARS): bounded(d, _MAX_DETAIL_CHARS) for f, d in (fields or {}).items()},
    )  # fmt: skip


# A peer's status without a reason (or with one not ours) still leaves with a reason a client knows.
_DEFAULT_REASONS = {
    grpc.StatusCode.INVALID_ARGUMENT: "INVALID_FIELD",
    grpc.StatusCode.NOT_FOUND: "NOT_FOUND",
    grpc.StatusCode.FAILED_PRECONDITION: "ACTION_NOT_ALLOWED",
    grpc.StatusCode.OUT_OF_RANGE: "INVALID_FIELD",
    grpc.StatusCode.PERMISSION_DENIED: "PERMISSION_DENIED",
    grpc.StatusCode.ALREADY_EXISTS: "IDEMPOTENCY_KEY_REUSED",
    grpc.StatusCode.UNAUTHENTICATED: "TOKEN_INVALID",
    grpc.StatusCode.ABORTED: "CONCURRENT_CHANGE",
    grpc.StatusCode.UNAVAILABLE: "SERVICE_UNAVAILABLE",
    grpc.StatusCode.DEADLINE_EXCEEDED: "SERVICE_UNAVAILABLE",
    grpc.StatusCode.RESOURCE_EXHAUSTED: "SERVICE_UNAVAILABLE",
    grpc.StatusCode.DATA_LOSS: "ROUND_LOG_BROKEN",
}


def _default_reason(code: grpc.StatusCode) -> str:
    return _DEFAULT_REASONS.get(code, "INTERNAL")


def _packed(message: Any) -> any_pb2.Any:
    packed = any_pb2.Any()
    packed.Pack(message)
    return packed

