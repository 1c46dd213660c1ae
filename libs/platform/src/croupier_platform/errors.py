"""Service errors, each with one gRPC status; the message says what was wrong and what is allowed."""

from __future__ import annotations

import grpc


class ServiceError(Exception):
    status: grpc.StatusCode = grpc.StatusCode.INTERNAL


class InvalidArgument(ServiceError):
    status = grpc.StatusCode.INVALID_ARGUMENT


class NotFound(ServiceError):
    status = grpc.StatusCode.NOT_FOUND


class FailedPrecondition(ServiceError):
    status = grpc.StatusCode.FAILED_PRECONDITION


class PermissionDenied(ServiceError):
    status = grpc.StatusCode.PERMISSION_DENIED


class AlreadyExists(ServiceError):
    """An idempotency key already used for another request."""

    status = grpc.StatusCode.ALREADY_EXISTS


class Unauthenticated(ServiceError):
    status = grpc.StatusCode.UNAUTHENTICATED


class Conflict(ServiceError):
    """A concurrent change won (optimistic concurrency); the caller may retry."""

    status = grpc.StatusCode.ABORTED


class Unavailable(ServiceError):
    status = grpc.StatusCode.UNAVAILABLE


class ResourceExhausted(ServiceError):
    """A caller past a per-connection bound (too many streams open, a stream too slow to keep up)."""

    status = grpc.StatusCode.RESOURCE_EXHAUSTED


# Messages echo what the client sent; a status rides in HTTP/2 trailers, and a long one breaks the reply.
MAX_STATUS_MESSAGE_CHARS = 512


def status_for(error: Exception) -> tuple[grpc.StatusCode, str] | None:
    """The status and message for a known error; None for a bug (reported as INTERNAL, without details)."""
    mapped = _status_for(error)
    return None if mapped is None else (mapped[0], bounded(mapped[1]))


def bounded(message: str, limit: int = MAX_STATUS_MESSAGE_CHARS) -> str:
    """`message` cut to `limit` characters, saying how much was cut."""
    if len(message) <= limit:
        return message
    cut = f"... ({len(message) - limit} more characters)"
    return message[: limit - len(cut)] + cut


def _status_for(error: Exception) -> tuple[grpc.StatusCode, str] | None:
    from croupier_rules.errors import InvalidInput, RuleError

    from .eventstore import ConcurrencyConflict
    from .faults import transient_cause

    if isinstance(error, ServiceError):
        return error.status, str(error)
    if isinstance(error, InvalidInput):
        return grpc.StatusCode.INVALID_ARGUMENT, str(error)
    if isinstance(error, RuleError):
        return grpc.StatusCode.FAILED_PRECONDITION, str(error)
    if isinstance(error, ConcurrencyConflict):
        return grpc.StatusCode.ABORTED, f"the round changed meanwhile, try again ({error})"
    if isinstance(error, grpc.aio.AioRpcError):
        return error.code(), error.details() or error.code().name
    if (cause := transient_cause(error)) is not None:
        # An outage, never INTERNAL: UNAVAILABLE is the status a gRPC client's retry policy retries.
        return grpc.StatusCode.UNAVAILABLE, f"{cause}; the call may be retried"
    return None
