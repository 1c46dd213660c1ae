"""Deadlines carried from the caller to internal calls.

An inbound call's remaining time (grpc.aio's ServicerContext.time_remaining(), which an in-process
channel's context gives too) is noted where the call enters the servicer (handles_errors), as an
instant on the monotonic clock in a contextvar. Each internal call then waits at most what is left of
it, capped by a configured default; with less left than a floor it fails fast with DEADLINE_EXCEEDED
rather than start work the caller will not wait for. Background work (consumers, keeper, reconciler)
has no inbound call, so it gets the default.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass

import grpc

from .errors import ServiceError

DEFAULT_INTERNAL_CALL_TIMEOUT_S = 5.0  # a peer known down fails the call at once (grpc_client: fail fast)
# Less than this left of the caller's deadline: not worth a call (a round trip and a transaction).
DEADLINE_FLOOR_S = 0.05

# The inbound call's deadline, time.monotonic() based; None outside a call or when the caller set none.
_inbound_deadline: ContextVar[float | None] = ContextVar("croupier_inbound_deadline", default=None)


class DeadlineSpent(ServiceError):
    """The caller's deadline is (nearly) spent: no internal call is started."""

    status = grpc.StatusCode.DEADLINE_EXCEEDED
    reason = "DEADLINE_SPENT"


class inbound_deadline:  # noqa: N801 - used as a function: `with inbound_deadline(...)`
    """Within the block, internal calls are bounded by `time_remaining` seconds from now (None: no deadline).
    A class, not a generator: it is entered on every call a server answers."""

    __slots__ = ("_deadline", "_marker")

    def __init__(self, time_remaining: float | None, clock: Callable[[], float] = time.monotonic) -> None:
        self._deadline = None if time_remaining is None else clock() + time_remaining

    def __enter__(self) -> None:
        self._marker = _inbound_deadline.set(self._deadline)

    def __exit__(self, *_exc: object) -> None:
        _inbound_deadline.reset(self._marker)


@dataclass(frozen=True)
class CallTimeouts:
    """The timeout of each internal gRPC call: what is left of the inbound call's deadline, at most default_s."""

    default_s: float = DEFAULT_INTERNAL_CALL_TIMEOUT_S
    floor_s: float = DEADLINE_FLOOR_S
    clock: Callable[[], float] = time.monotonic

    def __post_init__(self) -> None:
        if not 0 <= self.floor_s < self.default_s:
            raise ValueError(f"the call timeout ({self.default_s} s) must be above its floor ({self.floor_s} s)")

    def timeout_s(self, cap_s: float | None = None) -> float:
        """Seconds the next internal call may take; `cap_s` replaces the default for long calls (an audit page).
        DeadlineSpent (DEADLINE_EXCEEDED) when the inbound call has less than the floor left."""
        cap = self.default_s if cap_s is None else cap_s
        deadline = _inbound_deadline.get()
        if deadline is None:
            return cap
        remaining = deadline - self.clock()
        if remaining < self.floor_s:
            raise DeadlineSpent(f"the caller's deadline is spent ({max(remaining, 0.0):.3f} s left); nothing was started")
        return min(cap, remaining)
