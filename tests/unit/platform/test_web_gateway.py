"""The Connect bridge's translation, without a server: a gRPC status (with its google.rpc details) as
the Connect error of the same code, and which request headers travel on as gRPC metadata."""

from __future__ import annotations

import grpc
import pytest
from connectrpc.code import Code
from connectrpc.request import Headers, RequestContext
from google.protobuf.any_pb2 import Any
from google.rpc import error_details_pb2, status_pb2

from croupier_platform.web_gateway import _metadata, connect_error


def rpc_error(code: grpc.StatusCode, message: str, trailing=()) -> grpc.aio.AioRpcError:
    return grpc.aio.AioRpcError(code, grpc.aio.Metadata(), grpc.aio.Metadata(*trailing), message)


@pytest.mark.parametrize("code", [c for c in grpc.StatusCode if c is not grpc.StatusCode.OK])
def test_every_grpc_code_has_its_connect_code(code: grpc.StatusCode) -> None:
    error = connect_error(rpc_error(code, "why"))
    assert error.code.name == code.name.replace("CANCELLED", "CANCELED")
    assert error.message == "why"


def test_error_details_such_as_error_info_pass_through() -> None:
    info = error_details_pb2.ErrorInfo(reason="LIMIT_MAX_STAKE", domain="croupier.wallet", metadata={"left": "0"})
    detail = Any()
    detail.Pack(info)
    status = status_pb2.Status(code=9, message="over the limit", details=[detail])
    error = connect_error(rpc_error(grpc.StatusCode.FAILED_PRECONDITION, "over the limit",
                                    [("grpc-status-details-bin", status.SerializeToString())]))  # fmt: skip
    assert error.code is Code.FAILED_PRECONDITION
    unpacked = error_details_pb2.ErrorInfo()
    assert error.details[0].Unpack(unpacked) and unpacked.reason == "LIMIT_MAX_STAKE"


def test_garbled_details_leave_the_status_as_it_is() -> None:
    error = connect_error(rpc_error(grpc.StatusCode.NOT_FOUND, "no round", [("grpc-status-details-bin", b"\xff\xff")]))
    assert (error.code, error.message, list(error.details)) == (Code.NOT_FOUND, "no round", [])


def test_the_token_and_trace_context_travel_nothing_else() -> None:
    headers = Headers({"authorization": "Bearer t", "traceparent": "00-abc-def-01", "cookie": "secret=1", "content-type": "application/json"})
    ctx = RequestContext(method=None, http_method="POST", request_headers=headers)  # type: ignore[arg-type]
    assert _metadata(ctx) == (("authorization", "Bearer t"), ("traceparent", "00-abc-def-01"))
