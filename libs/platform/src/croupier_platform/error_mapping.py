"""How a service maps its own errors to gRPC statuses, in one place: its `entrypoints/errors.py`.

A service's refusals are the platform's error kinds (croupier_platform.errors: InvalidArgument,
FailedPrecondition, Conflict, ...), each with its status. What a service raises that is not one of
them (a storage race its adapters report, a library's error) it names in a table there:

    handles_errors = ErrorMapping({StaleAccount: lambda e: Conflict(str(e))})

and its servicers decorate each method with that `handles_errors` (`.stream` for a server stream):
grpc_server.handles_errors with the table's translation first (the status, the deadline, INTERNAL for
a bug), one wrapper a call.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

from .grpc_server import handles_errors, handles_stream_errors

Translation = Callable[[Exception], Exception]


class ErrorMapping:
    def __init__(self, translations: Mapping[type[Exception], Translation]) -> None:
        self._translations = dict(translations)
        self._types = tuple(self._translations)

    def translate(self, error: Exception) -> Exception:
        """The platform error for `error` (the first entry of the table it is an instance of), else `error`."""
        for error_type, translation in self._translations.items():
            if isinstance(error, error_type):
                return translation(error)
        return error

    def __call__(self, method: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        return handles_errors(method, self.translate, self._types)

    def stream(self, method: Callable[..., AsyncIterator[Any]]) -> Callable[..., AsyncIterator[Any]]:
        return handles_stream_errors(method, self.translate, self._types)
