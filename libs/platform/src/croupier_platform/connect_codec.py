"""Connect's request decoding, held to what the gRPC port takes: a request it cannot decode, or one
whose integers are written loosely, is INVALID_ARGUMENT with an ErrorInfo (MALFORMED_REQUEST), and every
error the bridge answers itself carries an ErrorInfo too (web_gateway.ConnectBridge)."""

from __future__ import annotations

import json
import re
from typing import Any

import connectrpc._codec
import grpc
from connectrpc.code import Code
from connectrpc.errors import ConnectError
from google.protobuf import json_format
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import DecodeError
from google.rpc import error_details_pb2

from .errors import make_refusal


def refused(code: Code, message: str, reason: str = "") -> ConnectError:
    """A Connect error as the gRPC port words it: the message cut to size, an ErrorInfo with `reason`
    (or the code's default reason, as a peer's status without one gets)."""
    refusal = make_refusal(grpc.StatusCode[code.name.replace("CANCELED", "CANCELLED")], message, reason)
    return ConnectError(code, refusal.message, [error_details_pb2.ErrorInfo(reason=refusal.reason, domain=refusal.domain)])


def malformed(message: Any, error: str) -> ConnectError:
    """INVALID_ARGUMENT, reason MALFORMED_REQUEST, worded as the gRPC port words a request it cannot decode."""
    return refused(Code.INVALID_ARGUMENT, f"the request is not a valid {message.DESCRIPTOR.full_name} message ({error[:200]})", "MALFORMED_REQUEST")


class _RefusingMalformed:
    """A connect-python codec whose decode failure is INVALID_ARGUMENT, reason MALFORMED_REQUEST, naming
    the message, as on the gRPC port (connect-python 0.9 lets it out as UNKNOWN). Its JSON takes integers
    as gRPC's binary carries them: a JSON integer or a string of ASCII digits, never "1e3", 100.0,
    "1_000" or other scripts' digits (which protobuf's json_format would take). Installed over its codec
    registry: the one place every unary and streaming request is decoded."""

    def __init__(self, codec: Any) -> None:
        self._codec = codec
        self.name, self.encode = codec.name, codec.encode
        self._json = codec.name().startswith("json")

    def decode(self, data: bytes | bytearray, message: Any) -> Any:
        try:
            if self._json and (loose := loose_integer(json.loads(data, parse_float=_WrittenAsFraction), message.DESCRIPTOR)):
                raise ValueError(loose)
            return self._codec.decode(data, message)
        except (json_format.ParseError, DecodeError, UnicodeDecodeError, ValueError, RecursionError) as exc:
            raise malformed(message, f"{type(exc).__name__}: {exc}") from None


class _WrittenAsFraction(str):
    """A JSON number written with a fraction or an exponent (json.loads' parse_float gets its text)."""


_INTEGER_TYPES = frozenset({
    FieldDescriptor.TYPE_INT32, FieldDescriptor.TYPE_INT64, FieldDescriptor.TYPE_UINT32, FieldDescriptor.TYPE_UINT64,
    FieldDescriptor.TYPE_SINT32, FieldDescriptor.TYPE_SINT64, FieldDescriptor.TYPE_FIXED32, FieldDescriptor.TYPE_FIXED64,
    FieldDescriptor.TYPE_SFIXED32, FieldDescriptor.TYPE_SFIXED64,
})  # fmt: skip
_ASCII_INTEGER = re.compile(r"-?[0-9]+")


def loose_integer(value: Any, descriptor: Descriptor, path: str = "") -> str | None:
    """The first integer field of `value` (a request in JSON, parsed) written other than as a JSON integer or
    a string of ASCII digits, described; None when there is none. Other mistakes are json_format's to find."""
    if not isinstance(value, dict):
        return None
    for key, item in value.items():
        field = descriptor.fields_by_camelcase_name.get(key) or descriptor.fields_by_name.get(key)
        if field is None or item is None:
            continue
        is_map = field.message_type is not None and field.message_type.GetOptions().map_entry
        if is_map:
            field = field.message_type.fields_by_name["value"]
            items = list(item.values()) if isinstance(item, dict) else []
        else:
            items = item if isinstance(item, list) else [item]
        for each in items:
            if field.type in _INTEGER_TYPES:
                if not (type(each) is int or (type(each) is str and _ASCII_INTEGER.fullmatch(each))):
                    return f"{path}{key} must be an integer: a JSON integer or a string of ASCII digits, not {json.dumps(each)[:40]}"
            elif field.message_type is not None and not field.message_type.full_name.startswith("google.protobuf."):
                if (found := loose_integer(each, field.message_type, f"{path}{key}.")) is not None:
                    return found
    return None


def refuse_malformed_requests() -> None:
    """Every codec of connect-python's registry wrapped in _RefusingMalformed (once)."""
    codecs = connectrpc._codec._codecs
    for name, codec in list(codecs.items()):
        if not isinstance(codec, _RefusingMalformed):
            codecs[name] = _RefusingMalformed(codec)
