"""One rate-limited log line per kind of event, for what can repeat many times a second (a consumer
retrying through an outage, hostile or broken clients): the first line at once, then at most one
per interval, each saying how many were held back since the last."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from opentelemetry import trace

from .tracing import current_round_id

_MAX_KEYS = 1024  # keys come from clients too: bounded, the oldest forgotten first


class RateLimitedLog:
    def __init__(self, logger: logging.Logger, interval_s: float = 10.0, clock: Callable[[], float] = time.monotonic) -> None:
        self._logger = logger
        self._interval_s = interval_s
        self._clock = clock
        self._last: dict[str, tuple[float, int]] = {}  # key -> (when last logged, held back since)

    def log(self, level: int, key: str, message: str, *args: object) -> bool:
        """Log `message % args` unless a line of `key` went out less than the interval ago; True if logged."""
        now = self._clock()
        last = self._last.get(key)
        if last is not None and now - last[0] < self._interval_s:
            self._last[key] = (last[0], last[1] + 1)
            return False
        if len(self._last) >= _MAX_KEYS and key not in self._last:
            del self._last[next(iter(self._last))]
        self._last.pop(key, None)
        self._last[key] = (now, 0)
        held = last[1] if last else 0
        suffix = f" ({held} more like it since the last such line)" if held else ""
        self._logger.log(level, message + suffix, *args)
        return True

    def warning(self, key: str, message: str, *args: object) -> bool:
        return self.log(logging.WARNING, key, message, *args)


# ---------------------------------------------------------------- the process's log setup

# The fields of every line, in this order; a line inside a round adds trace_id and round_id, and
# `extra={...}` adds its own (the access line's method, code, duration_ms, subject).
_FIELDS = ("levelname", "name", "message")
_RENAMED = {"levelname": "level", "name": "logger"}


class RoundContext(logging.Filter):
    """Adds the current trace id (the span's: a round's is derived from its id, tracing on or off)
    and round id to a record; lines outside any trace or round get neither."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "trace_id"):
            context = trace.get_current_span().get_span_context()
            if context.is_valid:
                record.trace_id = format(context.trace_id, "032x")
        if not hasattr(record, "round_id") and (round_id := current_round_id()) is not None:
            record.round_id = round_id
        return True


class _JsonLines(logging.StreamHandler):
    """The one handler configure_logging installs (found again by its type, so a second call replaces it)."""


def configure_logging(level: str | int = "INFO", stream: object = None) -> logging.Handler:
    """Every line of this process as one JSON object on stderr (or `stream`) at `level` and above:
    level, logger, message, time (ISO 8601, UTC), then trace_id/round_id inside a round and any `extra` fields.
    Called once by each server process (`croupier serve`); calling it again replaces the setup."""
    # orjson's formatter: a line in well under half the stdlib json one's time (one access line a call).
    from pythonjsonlogger.orjson import OrjsonFormatter

    handler = _JsonLines(stream)  # type: ignore[arg-type]
    handler.setFormatter(OrjsonFormatter(list(_FIELDS), rename_fields=_RENAMED, timestamp="time"))
    handler.addFilter(RoundContext())
    # No line shows the caller's file, line, thread or process: a record need not look them up (the
    # logging HOWTO's "Optimization"; findCaller walks the stack on every record).
    logging._srcfile = None
    logging.logThreads = logging.logProcesses = logging.logMultiprocessing = False
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, _JsonLines)]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    return handler
