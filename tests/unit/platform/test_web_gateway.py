"""The Connect bridge's translation, without a server: a gRPC status (with its google.rpc details) as
the Connect error of the same code, which request headers travel on as gRPC metadata, how integers may be
written in JSON, and which hosts the dev login answers."""

from __future__ import annotations

import json

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


@pytest.mark.parametrize(("body", "loose"), [
    ({"pageSize": 5}, False), ({"page_size": "5"}, False), ({"page_size": "-5"}, False), ({"page_size": None}, False),
    ({"page_size": "1e3"}, True), ({"page_size": 1.0}, True), ({"page_size": "1_000"}, True),
    ({"page_size": "１００"}, True), ({"page_size": "١٠٠"}, True), ({"page_size": " 5"}, True), ({"page_size": True}, True),
])  # fmt: skip
def test_integers_are_json_integers_or_ascii_digit_strings(body: dict, loose: bool) -> None:
    from croupier.v1 import table_pb2
    from croupier_platform.connect_codec import loose_integer

    parsed = json.loads(json.dumps(body), parse_float=lambda text: type("Fraction", (str,), {})(text))
    assert (loose_integer(parsed, table_pb2.ListRoundsRequest.DESCRIPTOR) is not None) is loose


def test_integers_in_maps_and_nested_messages_are_checked_too() -> None:
    from croupier.v1 import table_pb2, wallet_pb2
    from croupier_platform.connect_codec import loose_integer

    assert "bets" in loose_integer({"bets": {"ante": "1e3"}}, table_pb2.PlaceBetsRequest.DESCRIPTOR)
    assert "amount.amount_minor" in loose_integer({"amount": {"amount_minor": "1_0"}}, wallet_pb2.TopUpPlayMoneyRequest.DESCRIPTOR)
    assert loose_integer({"bets": {"ante": "100"}, "seat_id": "s"}, table_pb2.PlaceBetsRequest.DESCRIPTOR) is None


@pytest.mark.parametrize(("host", "loopback"), [
    ("127.0.0.1:8080", True), ("localhost", True), ("LOCALHOST:1", True), ("[::1]:8080", True), ("[::1]", True),
    ("casino.attacker.example", False), ("127.0.0.1.attacker.example:8080", False), ("192.168.1.2:8080", False),
    ("localhost.attacker.example", False), ("", False), ("[::2]:80", False),
])  # fmt: skip
def test_the_dev_login_takes_loopback_hosts_only(host: str, loopback: bool) -> None:
    from croupier_platform.dev_login import is_loopback_authority

    assert is_loopback_authority(host) is loopback
