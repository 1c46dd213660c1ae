"""The process's log setup: JSON lines, the level from LOG_LEVEL, a round's trace and round id on
every line inside it; and the one access line per call (grpc_server.CallLayers) on a real grpc.aio
server on 127.0.0.1:0, for a call that succeeds and for calls that fail."""

import asyncio
import io
import json
import logging
from collections.abc import Iterator

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from croupier.v1 import wallet_pb2
from croupier_platform.auth import TokenAuthority
from croupier_platform.errors import NotFound
from croupier_platform.grpc_server import AuthInterceptor, add_health_and_reflection, call_metadata, handles_errors, platform_server
from croupier_platform.logs import configure_logging
from croupier_platform.settings import ProcessSettings
from croupier_platform.tracing import round_span, round_span_context

SECRET = b"access-log-tests-secret-0123456789abcdef"


@pytest.fixture
def lines() -> Iterator[io.StringIO]:
    """The process's logging as `croupier serve` sets it up, into a buffer; put back afterwards."""
    root = logging.getLogger()
    level, handlers = root.level, list(root.handlers)
    lookups = logging._srcfile, logging.logThreads, logging.logProcesses, logging.logMultiprocessing
    buffer = io.StringIO()
    handler = configure_logging("INFO", buffer)
    yield buffer
    root.removeHandler(handler)
    root.setLevel(level)
    logging._srcfile, logging.logThreads, logging.logProcesses, logging.logMultiprocessing = lookups
    assert root.handlers == handlers


def parsed(buffer: io.StringIO) -> list[dict]:
    return [json.loads(line) for line in buffer.getvalue().splitlines()]  # every line is one JSON object


def test_a_line_is_one_json_object_with_time_level_logger_and_message(lines: io.StringIO) -> None:
    logging.getLogger("croupier.test").warning("paid %d chips", 500)
    logging.getLogger("croupier.test").debug("below the level")
    [line] = parsed(lines)
    assert line["level"] == "WARNING"
    assert line["logger"] == "croupier.test"
    assert line["message"] == "paid 500 chips"
    assert line["time"].endswith("+00:00")
    assert "trace_id" not in line and "round_id" not in line


def test_every_line_inside_a_round_carries_its_trace_and_round_id(lines: io.StringIO) -> None:
    with round_span("Deal", "round-7"):
        logging.getLogger("croupier.test").info("dealt")
    logging.getLogger("croupier.test").info("after the round")
    inside, after = parsed(lines)
    assert inside["round_id"] == "round-7"
    assert inside["trace_id"] == format(round_span_context("round-7").trace_id, "032x")
    assert "round_id" not in after and "trace_id" not in after


def test_an_exception_stays_inside_its_json_line(lines: io.StringIO) -> None:
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        logging.getLogger("croupier.test").exception("failed")
    [line] = parsed(lines)
    assert "RuntimeError: boom" in line["exc_info"]


def test_the_level_comes_from_log_level(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LOG_LEVEL", raising=False)
    assert ProcessSettings().log_level == "INFO"
    monkeypatch.setenv("LOG_LEVEL", "debug")
    assert ProcessSettings().log_level == "DEBUG"
    monkeypatch.setenv("LOG_LEVEL", "chatty")
    with pytest.raises(ValueError):
        ProcessSettings()


# ---------------------------------------------------------------- the access line


class Servicer:
    @handles_errors
    async def GetBalances(self, request: wallet_pb2.GetBalancesRequest, context: grpc.aio.ServicerContext) -> object:
        if request.player_id == "nobody":
            raise NotFound("no such player")
        return wallet_pb2.GetBalancesResponse()


async def calls(*requests: tuple[str, tuple]) -> list[grpc.StatusCode]:
    handler = grpc.unary_unary_rpc_method_handler(
        Servicer().GetBalances,
        request_deserializer=wallet_pb2.GetBalancesRequest.FromString,
        response_serializer=wallet_pb2.GetBalancesResponse.SerializeToString,
    )
    server = grpc.aio.server(interceptors=[AuthInterceptor(TokenAuthority(SECRET))])
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("test.Edge", {"GetBalances": handler}),))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    codes = []
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            method = channel.unary_unary(
                "/test.Edge/GetBalances",
                request_serializer=wallet_pb2.GetBalancesRequest.SerializeToString,
                response_deserializer=wallet_pb2.GetBalancesResponse.FromString,
            )
            for player, metadata in requests:
                try:
                    await method(wallet_pb2.GetBalancesRequest(player_id=player), metadata=metadata, timeout=10)
                    codes.append(grpc.StatusCode.OK)
                except grpc.aio.AioRpcError as error:
                    codes.append(error.code())
    finally:
        await server.stop(None)
    return codes


def access_lines(buffer: io.StringIO) -> list[dict]:
    return [line for line in parsed(buffer) if line["logger"] == "croupier.access"]


def test_one_access_line_per_call_with_method_code_duration_and_caller_never_the_token(lines: io.StringIO) -> None:
    token = TokenAuthority(SECRET).mint("alice", "player", 1_700_000_000, 10**9)
    codes = asyncio.run(calls(("alice", call_metadata(token))))
    assert codes == [grpc.StatusCode.OK]
    [line] = access_lines(lines)
    assert line["level"] == "INFO"
    assert line["method"] == "/test.Edge/GetBalances"
    assert line["code"] == "OK"
    assert isinstance(line["duration_ms"], float) and line["duration_ms"] >= 0
    assert line["subject"] == "alice" and line["role"] == "player"
    assert token not in lines.getvalue()


def test_a_refused_call_and_a_failed_call_each_get_their_access_line_with_the_code(lines: io.StringIO) -> None:
    token = TokenAuthority(SECRET).mint("pit-boss", "operator", 1_700_000_000, 10**9)
    codes = asyncio.run(calls(("alice", ()), ("nobody", call_metadata(token))))
    assert codes == [grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.NOT_FOUND]
    refused, failed = access_lines(lines)
    assert (refused["code"], refused["subject"]) == ("UNAUTHENTICATED", None)
    assert (failed["code"], failed["subject"], failed["role"]) == ("NOT_FOUND", "pit-boss", "operator")
    assert failed["level"] == refused["level"] == "INFO"


def test_a_health_probe_on_a_platform_server_needs_no_token_and_logs_at_debug(lines: io.StringIO) -> None:
    async def probe() -> int:
        server, registry = platform_server(TokenAuthority(SECRET))
        await add_health_and_reflection(registry, ["croupier.v1.WalletService"])  # type: ignore[arg-type]
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                return (await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=10)).status
        finally:
            await server.stop(None)

    logging.getLogger().setLevel(logging.DEBUG)
    assert asyncio.run(probe()) == health_pb2.HealthCheckResponse.SERVING
    [line] = access_lines(lines)
    assert (line["level"], line["method"], line["code"], line["subject"]) == ("DEBUG", "/grpc.health.v1.Health/Check", "OK", None)


def test_a_line_looks_up_no_caller_frame_thread_or_process(lines: io.StringIO, monkeypatch: pytest.MonkeyPatch) -> None:
    # One access line a call: no line shows where it was logged from, so no record walks the stack for it.
    def no_stack_walk(*args: object, **kwargs: object) -> None:
        raise AssertionError("findCaller walked the stack")

    monkeypatch.setattr(logging.Logger, "findCaller", no_stack_walk)
    logging.getLogger("croupier.test").info("dealt")
    [line] = parsed(lines)
    assert line["message"] == "dealt"
    assert not {"pathname", "lineno", "funcName", "thread", "process"} & line.keys()


def test_extra_fields_of_any_type_stay_inside_the_json_line(lines: io.StringIO) -> None:
    class Opaque:
        def __str__(self) -> str:
            return "opaque"

    fields = {"who": Opaque(), "count": 3, "share": 0.5, "tags": ["a", "é"], "big": 2**40}
    logging.getLogger("croupier.test").info("odd fields", extra=fields)
    [line] = parsed(lines)
    assert (line["count"], line["share"], line["tags"], line["who"], line["big"]) == (3, 0.5, ["a", "é"], "opaque", 2**40)


def test_the_kafka_clients_repeated_lines_are_throttled_and_counted(lines: io.StringIO) -> None:
    """Issue 27 item 10: through a 26-s broker outage aiokafka logged ~7,400 ERROR lines, one per attempt."""
    client, ours = logging.getLogger("aiokafka.client"), logging.getLogger("croupier_platform.kafka_bus")
    for attempt in range(500):
        client.error("Unable connect to node with id %s: %s", 1, f"attempt {attempt}")
        client.error("Unable to update metadata from %s", [1])
    for _ in range(3):
        ours.warning("our own line")  # the platform's own lines rate-limit themselves where they repeat
    logged = [json.loads(line) for line in lines.getvalue().splitlines()]
    assert [line["message"] for line in logged] == [
        "Unable connect to node with id 1: attempt 0", "Unable to update metadata from [1]", *["our own line"] * 3,
    ]


def test_a_throttled_line_that_goes_out_again_says_how_many_were_held_back() -> None:
    from croupier_platform.logs import RepeatsThrottled

    now = [0.0]
    throttle = RepeatsThrottled(interval_s=10, clock=lambda: now[0])

    def record(name: str = "aiokafka.conn") -> logging.LogRecord:
        return logging.LogRecord(name, logging.ERROR, __file__, 1, "Connect to %s failed", ("broker",), None)

    passed = []
    for second in range(25):
        now[0] = float(second)
        for _ in range(10):
            if throttle.filter(r := record()):
                passed.append(r.getMessage())
    assert passed == [
        "Connect to broker failed",
        "Connect to broker failed (99 more like it since the last such line)",
        "Connect to broker failed (99 more like it since the last such line)",
    ]
    assert throttle.filter(record("aiokafkaesque")) and throttle.filter(record("croupier_game.x"))


def test_uvicorns_lines_carry_no_ansi_colour_copy_of_their_message(lines: io.StringIO) -> None:
    from starlette.applications import Starlette

    from croupier_platform.web_gateway import HttpServer

    async def serve_and_stop() -> None:
        server = HttpServer(Starlette(), "127.0.0.1:0")
        await server.start()
        await server.stop()

    asyncio.run(serve_and_stop())
    from_uvicorn = [line for line in parsed(lines) if line["logger"].startswith("uvicorn")]
    assert any("Started server process" in line["message"] for line in from_uvicorn)
    assert all("color_message" not in line and not any("\x1b" in str(v) for v in line.values()) for line in from_uvicorn)
