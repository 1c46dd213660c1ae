"""One rate-limited log line per kind of event, for what can repeat many times a second (a consumer
retrying through an outage, hostile or broken clients, the Kafka client's own lines while the broker
is away): the first line at once, then at most one per interval, each saying how many were held back
since the last."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence

from opentelemetry import trace

from .tracing import current_round_id

_MAX_KEYS = 1024  # keys come from clients too: bounded, the oldest forgotten first
# Libraries that log a line per attempt while a peer is away (aiokafka: ERROR per reconnect, metadata
# refresh and fetch, ~280 lines a second through a broker outage); their repeats are throttled.
THROTTLED_LIBRARIES = ("aiokafka", "kafka")
LIBRARY_REPEAT_INTERVAL_S = 10.0


class Throttle:
    """Per key, the first event at once, then at most one per interval."""

    def __init__(self, interval_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._interval_s = interval_s
        self._clock = clock
        self._last: dict[object, tuple[float, int]] = {}  # key -> (when last let through, held back since)

    def admit(self, key: object) -> int | None:
        """None when an event of `key` went through less than the interval ago (this one is held back);
        else how many were held back since that one."""
        now = self._clock()
        last = self._last.get(key)
        if last is not None and now - last[0] < self._interval_s:
            self._last[key] = (last[0], last[1] + 1)
            return None
        if len(self._last) >= _MAX_KEYS and key not in self._last:
            del self._last[next(iter(self._last))]
        self._last.pop(key, None)
        self._last[key] = (now, 0)
        return last[1] if last else 0


def _held_back(held: int) -> str:
    return f" ({held} more like it since the last such line)" if held else ""


class RateLimitedLog:
    def __init__(self, logger: logging.Logger, interval_s: float = 10.0, clock: Callable[[], float] = time.monotonic) -> None:
        self._logger = logger
        self._throttle = Throttle(interval_s, clock)

    def log(self, level: int, key: str, message: str, *args: object) -> bool:
        """Log `message % args` unless a line of `key` went out less than the interval ago; True if logged."""
        held = self._throttle.admit(key)
        if held is None:
            return False
        self._logger.log(level, message + _held_back(held), *args)
        return True

    def warning(self, key: str, message: str, *args: object) -> bool:
        return self.log(logging.WARNING, key, message, *args)


class RepeatsThrottled(logging.Filter):
    """A handler's filter for the lines of libraries that do not rate-limit their own (`libraries`, by logger
    name): a line whose logger, level and message template went out less than `interval_s` ago is dropped,
    and the next that goes out says how many were. Other loggers' lines pass untouched."""

    def __init__(self, libraries: Sequence[str] = THROTTLED_LIBRARIES, interval_s: float = LIBRARY_REPEAT_INTERVAL_S,
                 clock: Callable[[], float] = time.monotonic) -> None:  # fmt: skip
        super().__init__()
        self._libraries = tuple(libraries)
        self._throttle = Throttle(interval_s, clock)

    def filter(self, record: logging.LogRecord) -> bool:
        name = record.name
        if not any(name == library or name.startswith(library + ".") for library in self._libraries):
            return True
        held = self._throttle.admit((name, record.levelno, str(record.msg)))
        if held is None:
            return False
        if held:
            record.msg = f"{record.msg}{_held_back(held)}"
        return True


# ---------------------------------------------------------------- the process's log setup

# The fields of every line, in this order; a line inside a round adds trace_id and round_id, and
# `extra={...}` adds its own (the access line's method, code, duration_ms, subject).
_FIELDS = ("levelname", "name", "message")
_RENAMED = {"levelname": "level", "name": "logger"}
# Record attributes never written as fields: the standard ones, and uvicorn's `color_message` (its
# message again with ANSI colour codes, for its own console formatter; noise in a JSON line).
_LIBRARY_CONSOLE_ONLY = ("color_message",)


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
    The Kafka client's repeated lines are throttled (RepeatsThrottled).
    Called once by each server process (`croupier serve`); calling it again replaces the setup."""
    # orjson's formatter: a line in well under half the stdlib json one's time (one access line a call).
    from pythonjsonlogger.core import RESERVED_ATTRS
    from pythonjsonlogger.orjson import OrjsonFormatter

    handler = _JsonLines(stream)  # type: ignore[arg-type]
    handler.setFormatter(OrjsonFormatter(list(_FIELDS), rename_fields=_RENAMED, timestamp="time",
                                         reserved_attrs=[*RESERVED_ATTRS, *_LIBRARY_CONSOLE_ONLY]))  # fmt: skip
    handler.addFilter(RepeatsThrottled())
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
