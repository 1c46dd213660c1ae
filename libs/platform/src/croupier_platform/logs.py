"""One rate-limited log line per kind of event, for what can repeat many times a second (a consumer
retrying through an outage, hostile or broken clients): the first line at once, then at most one
per interval, each saying how many were held back since the last."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

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
