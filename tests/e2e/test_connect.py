"""The browser path over plain HTTP, as a frontend or `curl` speaks it: the public services over the
Connect protocol on the embedded server's HTTP port (unary and server-streaming, JSON and binary), the
same auth and error statuses as gRPC, the internal services absent, CORS off unless configured, and
the dev login minting a player's token without the secret leaving the server."""

from __future__ import annotations

import base64
import json
import struct
import time
import urllib.error
import urllib.request
import uuid

import pytest

from croupier.v1 import table_pb2
from croupier_cli.embedded import authority_for
from croupier_game.config import WATCH_MAX_STREAMS_PER_PLAYER

from .conftest import ServerThread

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def web(tmp_path_factory):
    data = tmp_path_factory.mktemp("connect") / "data"
    thread = ServerThread(data, http_listen="127.0.0.1:0", cors_origins=("https://casino.example",))
    thread.start()
    yield f"http://127.0.0.1:{thread.server.http.port}", authority_for(data)
    thread.stop()


def token(authority, role: str = "player") -> str:
    return authority.mint(f"c-{uuid.uuid4().hex[:8]}", role, int(time.time()), 600)


def post(url: str, body: bytes, headers: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()


def call_json(web, method: str, message: dict, bearer: str | None = None) -> tuple[int, dict]:
    base, _ = web
    headers = {"content-type": "application/json"} | ({"authorization": f"Bearer {bearer}"} if bearer else {})
    status, _, body = post(f"{base}/{method}", json.dumps(message).encode(), headers)
    return status, json.loads(body)


def test_a_unary_call_in_json_as_curl_sends_it(web) -> None:
    bearer = token(web[1])
    status, body = call_json(web, "croupier.v1.TableService/ListTables", {"game": "casino-war"}, bearer)
    assert status == 200
    assert {t["game"] for t in body["tables"]} == {"casino-war"}
    assert body["tables"][0]["limits"]["ante"]["min"], "int64 as a JSON string, proto3 JSON mapping"
    status, body = call_json(web, "croupier.v1.WalletService/TopUpPlayMoney",
                             {"amount": {"amount_minor": 5000, "currency": "PLAY"}, "transaction_id": "t1"}, bearer)  # fmt: skip
    assert status == 200 and body["transaction"]["status"] == "posted"
    status, body = call_json(web, "croupier.v1.WalletService/GetBalances", {}, bearer)
    assert body["balances"] == [{"currency": "PLAY", "available": "5000", "total": "5000"}]


def test_a_unary_call_in_binary(web) -> None:
    base, authority = web
    status, headers, body = post(f"{base}/croupier.v1.TableService/ListTables", table_pb2.ListTablesRequest(game="battle-royale").SerializeToString(),
                                 {"content-type": "application/proto", "authorization": f"Bearer {token(authority)}"})  # fmt: skip
    assert status == 200 and headers["content-type"] == "application/proto"
    assert {t.game for t in table_pb2.ListTablesResponse.FromString(body).tables} == {"battle-royale"}


@pytest.mark.parametrize(
    ("method", "message", "bearer", "http", "code"),
    [
        ("croupier.v1.TableService/ListTables", {}, None, 401, "unauthenticated"),
        ("croupier.v1.TableService/GetRound", {"round_id": "nope"}, "player", 404, "not_found"),
        ("croupier.v1.AuditService/ReplayRound", {"round_id": "nope"}, "player", 403, "permission_denied"),
        ("croupier.v1.TableService/GetRound", {"round_id": 7, "bogus": 1}, "player", 400, "invalid_argument"),
    ],
)
def test_errors_carry_the_grpc_status_as_the_connect_code(web, method, message, bearer, http, code) -> None:
    status, body = call_json(web, method, message, bearer and token(web[1], bearer))
    assert (status, body["code"]) == (http, code)
    assert body["message"]


def test_malformed_json_is_invalid_argument_not_unknown(web) -> None:
    base, authority = web
    status, _, body = post(f"{base}/croupier.v1.TableService/GetRound", b'{"round_id":',
                           {"content-type": "application/json", "authorization": f"Bearer {token(authority)}"})  # fmt: skip
    assert status == 400 and json.loads(body)["code"] == "invalid_argument"


def error_reason(body: dict) -> str:
    """The ErrorInfo reason of a Connect error ("" when it carries none)."""
    return next((d.get("debug", {}).get("reason", "") for d in body.get("details", ()) if d.get("type") == "google.rpc.ErrorInfo"), "")


PAGING = ["croupier.v1.TableService/ListRounds", "croupier.v1.WalletService/ListTransactions"]
NESTED_TOKEN = base64.urlsafe_b64encode(b"\x01" + b"[" * 50_000 + b"]" * 50_000).decode().rstrip("=")


@pytest.mark.parametrize("method", PAGING)
@pytest.mark.parametrize("page_token", [NESTED_TOKEN, "A" * 500_000,
                                        base64.urlsafe_b64encode(b"\x01" + b"[" * 300 + b"]" * 300).decode()])  # fmt: skip
def test_a_nested_or_oversized_page_token_is_invalid_argument_on_every_paging_rpc(web, method: str, page_token: str) -> None:
    status, body = call_json(web, method, {"page_token": page_token}, token(web[1]))
    assert (status, body["code"], error_reason(body)) == (400, "invalid_argument", "INVALID_FIELD"), body["message"][:300]
    assert len(body["message"]) < 2048


@pytest.mark.parametrize(("method", "body", "content_type"), [
    ("croupier.v1.TableService/GetRound", b'{"round_id":', "application/json"),
    ("croupier.v1.TableService/GetRound", b"[" * 200_000 + b"]" * 200_000, "application/json"),  # nested past the parser's depth
    ("croupier.v1.TableService/GetRound", b'{"round_id": 7}', "application/json"),
    ("croupier.v1.TableService/GetRound", b'{"bogus": 1}', "application/json"),
    ("croupier.v1.TableService/GetRound", b"\xff\xff\xff\xff", "application/proto"),
    ("croupier.v1.TableService/GetRound", b"\xff\xfe{}", "application/json"),
    ("croupier.v1.TableService/ListRounds", b'{"page_size": "1e3"}', "application/json"),
    ("croupier.v1.TableService/ListRounds", b'{"page_size": 1e1}', "application/json"),
    ("croupier.v1.TableService/ListRounds", b'{"page_size": 100.0}', "application/json"),
    ("croupier.v1.TableService/ListRounds", b'{"page_size": "1_0"}', "application/json"),
    ("croupier.v1.TableService/ListRounds", '{"page_size": "１０"}'.encode(), "application/json"),
    ("croupier.v1.TableService/ListRounds", '{"page_size": "١٠"}'.encode(), "application/json"),
    ("croupier.v1.TableService/ListRounds", b'{"page_size": true}', "application/json"),
    ("croupier.v1.TableService/PlaceBets", b'{"seat_id": "s", "bets": {"ante": "1e3"}, "idempotency_key": "k"}', "application/json"),
    ("croupier.v1.WalletService/TopUpPlayMoney", b'{"amount": {"amount_minor": 100.0, "currency": "PLAY"}}', "application/json"),
    ("croupier.v1.WalletService/ListTransactions", b'{"page_size": "\xd9\xa1"}', "application/json"),
])  # fmt: skip
def test_an_unparseable_or_loosely_typed_request_is_refused_as_grpc_refuses_it(web, method, body: bytes, content_type: str) -> None:
    """As the gRPC port answers a request it cannot decode: INVALID_ARGUMENT, ErrorInfo MALFORMED_REQUEST."""
    status, _, reply = post(f"{web[0]}/{method}", body, {"content-type": content_type, "authorization": f"Bearer {token(web[1])}"})
    answer = json.loads(reply)
    assert (status, answer["code"], error_reason(answer)) == (400, "invalid_argument", "MALFORMED_REQUEST"), answer["message"][:300]


def test_integers_as_json_numbers_and_ascii_digit_strings_are_taken(web) -> None:
    for page_size in (5, "5"):
        status, body = call_json(web, "croupier.v1.TableService/ListRounds", {"page_size": page_size}, token(web[1]))
        assert status == 200, body


def test_a_content_type_not_spoken_and_a_path_not_served_answer_connect_errors(web) -> None:
    bearer = {"authorization": f"Bearer {token(web[1])}"}
    status, headers, reply = post(f"{web[0]}/croupier.v1.TableService/ListTables", b"{}", {"content-type": "text/plain"} | bearer)
    answer = json.loads(reply)
    assert (status, answer["code"], error_reason(answer)) == (415, "invalid_argument", "MALFORMED_REQUEST")
    assert "application/json" in answer["message"] and headers["content-type"] == "application/json"
    for path in ("/croupier.v1.TableService/NoSuchMethod", "/croupier.v1.NoService/Call", "/anything"):
        status, headers, reply = post(web[0] + path, b"{}", {"content-type": "application/json"} | bearer)
        answer = json.loads(reply)
        assert (status, answer["code"], error_reason(answer)) == (404, "unimplemented", "NOT_FOUND"), path


@pytest.mark.parametrize("path", ["/croupier.internal.v1.StakeService/ReserveStakes", "/croupier.internal.v1.ShufflerService/NewShoe",
                                  "/grpc.health.v1.Health/Check"])  # fmt: skip
def test_internal_services_are_not_served(web, path: str) -> None:
    status, _, _ = post(web[0] + path, b"{}", {"content-type": "application/json", "authorization": f"Bearer {token(web[1], 'operator')}"})
    assert status in (404, 405)


def envelope(flags: int, payload: bytes) -> bytes:
    return struct.pack(">BI", flags, len(payload)) + payload


def read_envelopes(body: bytes) -> list[tuple[int, bytes]]:
    out, at = [], 0
    while at < len(body):
        flags, size = struct.unpack(">BI", body[at : at + 5])
        out.append((flags, body[at + 5 : at + 5 + size]))
        at += 5 + size
    return out


def test_a_server_stream_over_connect(web) -> None:
    base, authority = web
    status, headers, body = post(f"{base}/croupier.v1.AuditService/AuditAll", envelope(0, b'{"page_size": 10}'),
                                 {"content-type": "application/connect+json", "authorization": f"Bearer {token(authority, 'operator')}"})  # fmt: skip
    assert status == 200 and headers["content-type"] == "application/connect+json"
    frames = read_envelopes(body)
    messages = [json.loads(payload) for flags, payload in frames if flags == 0]
    end = [json.loads(payload) for flags, payload in frames if flags == 2]
    assert messages and end == [{}], "messages, then an end-of-stream without error"
    assert messages[-1].get("done") is True or "rounds" in messages[-1]


def test_a_refused_stream_ends_with_the_error(web) -> None:
    base, authority = web
    status, _, body = post(f"{base}/croupier.v1.AuditService/AuditAll", envelope(0, b"{}"),
                           {"content-type": "application/connect+json", "authorization": f"Bearer {token(authority)}"})  # fmt: skip
    assert status == 200  # Connect streams report errors in the end-of-stream message
    (flags, payload), = read_envelopes(body)
    assert flags == 2 and json.loads(payload)["error"]["code"] == "permission_denied"


def test_cors_allows_only_the_configured_origin(web) -> None:
    base, _ = web
    for origin, allowed in (("https://casino.example", True), ("https://evil.example", False)):
        request = urllib.request.Request(f"{base}/croupier.v1.TableService/ListTables", method="OPTIONS", headers={
            "origin": origin, "access-control-request-method": "POST",
            "access-control-request-headers": "authorization,content-type,connect-protocol-version"})  # fmt: skip
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                status, headers = response.status, response.headers
        except urllib.error.HTTPError as error:
            status, headers = error.code, error.headers
        assert (headers.get("access-control-allow-origin") == origin) is allowed, (origin, status)


def test_cors_is_off_by_default(tmp_path) -> None:
    thread = ServerThread(tmp_path / "data", http_listen="127.0.0.1:0")
    thread.start()
    try:
        base = f"http://127.0.0.1:{thread.server.http.port}"
        status, headers, _ = post(f"{base}/croupier.v1.TableService/ListTables", b"{}", {"content-type": "application/json", "origin": "https://casino.example"})
        assert status == 401 and "access-control-allow-origin" not in {k.lower() for k in headers}
    finally:
        thread.stop()


def test_the_dev_login_mints_a_players_token(web) -> None:
    base, _ = web
    status, _, body = post(f"{base}/dev/login", json.dumps({"player": "dev-alice"}).encode(), {"content-type": "application/json"})
    minted = json.loads(body)
    assert status == 200 and minted["player"] == "dev-alice"
    status, balances = call_json(web, "croupier.v1.WalletService/GetBalances", {}, minted["token"])
    assert status == 200
    status, body = call_json(web, "croupier.v1.AuditService/ReplayRound", {"round_id": "x"}, minted["token"])
    assert body["code"] == "permission_denied", "a player's token, never an operator's"
    status, _, body = post(f"{base}/dev/login", json.dumps({"player": "no spaces!"}).encode(), {"content-type": "application/json"})
    assert status == 400 and "player name" in json.loads(body)["message"]


def dev_login(web, body: bytes, **headers: str) -> tuple[int, dict]:
    status, _, reply = post(f"{web[0]}/dev/login", body, {"content-type": "application/json"} | headers)
    return status, json.loads(reply)


def test_the_dev_login_never_mints_for_another_players_name(web) -> None:
    """A name the wallet knows (real money deposited, or play money of a player signed in with a token)
    is refused, without credentials or with; a name the dev login took it mints for again."""
    operator, victim, player = token(web[1], "operator"), f"cash.{uuid.uuid4().hex[:6]}", f"p-{uuid.uuid4().hex[:6]}"
    status, _ = call_json(web, "croupier.v1.WalletService/Deposit", {"player_id": victim, "transaction_id": "d1",
                          "amount": {"amount_minor": 50000, "currency": "USD"}}, operator)  # fmt: skip
    assert status == 200
    player_token = web[1].mint(player, "player", int(time.time()), 600)
    status, _ = call_json(web, "croupier.v1.WalletService/TopUpPlayMoney",
                          {"amount": {"amount_minor": 500, "currency": "PLAY"}, "transaction_id": "t1"}, player_token)  # fmt: skip
    assert status == 200
    for name in (victim, player):
        status, body = dev_login(web, json.dumps({"player": name}).encode())
        assert (status, body["code"]) == (403, "permission_denied"), name
        assert "token" not in body
    fresh = f"dev-{uuid.uuid4().hex[:6]}"
    first, again = dev_login(web, json.dumps({"player": fresh}).encode()), dev_login(web, json.dumps({"player": fresh}).encode())
    assert first[0] == again[0] == 200 and again[1]["player"] == fresh
    status, body = call_json(web, "croupier.v1.WalletService/Deposit", {"player_id": fresh, "transaction_id": "d2",
                             "amount": {"amount_minor": 100, "currency": "USD"}}, operator)  # fmt: skip
    assert status == 200
    status, body = dev_login(web, json.dumps({"player": fresh}).encode())
    assert status == 403 and "play money only" in body["message"], "real money deposited makes it a real account"


@pytest.mark.parametrize("headers", [{"host": "casino.attacker.example"}, {"host": "192.168.1.20:8080"},
                                     {"origin": "https://attacker.example"}])  # fmt: skip
def test_the_dev_login_answers_pages_of_this_machine_only(web, headers) -> None:
    status, body = dev_login(web, json.dumps({"player": f"dev-{uuid.uuid4().hex[:6]}"}).encode(), **headers)
    assert (status, body["code"]) == (403, "permission_denied") and "token" not in body


def test_a_20_mb_dev_login_is_refused_from_its_length_unread(web) -> None:
    import http.client

    host, port = web[0].removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        connection.putrequest("POST", "/dev/login")
        connection.putheader("content-type", "application/json")
        connection.putheader("content-length", str(20_000_000))
        connection.endheaders(b"{" * 4096)  # the rest is never sent: the answer comes first
        response = connection.getresponse()
        assert response.status == 413 and json.loads(response.read())["code"] == "resource_exhausted"
    finally:
        connection.close()


@pytest.mark.parametrize(("body", "status", "code"), [
    (b'{"player": "' + b"a" * 2000 + b'"}', 413, "resource_exhausted"),
    (b"[" * 500 + b"]" * 500, 400, "invalid_argument"),
    (b'{"player": ' * 80 + b"1" + b"}" * 80, 400, "invalid_argument"),
    (b'{"player": 7}', 400, "invalid_argument"),
    (b"\xff\xfe", 400, "invalid_argument"),
    (json.dumps({"player": "ａｌｉｃｅ"}).encode(), 400, "invalid_argument"),  # full-width: another name that looks alike
])  # fmt: skip
def test_the_dev_login_refuses_large_nested_and_malformed_bodies(web, body: bytes, status: int, code: str) -> None:
    answered, reply = dev_login(web, body)
    assert (answered, reply["code"]) == (status, code) and "token" not in reply


def open_seat_stream(web, bearer: str, seat_id: str):
    """A WatchSeat stream over Connect, as the web table opens it: the connection and the first message
    (the seat as it is, or the error that refused the stream)."""
    import http.client

    host, port = web[0].removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=30)
    connection.request("POST", "/croupier.v1.TableService/WatchSeat", envelope(0, json.dumps({"seat_id": seat_id}).encode()),
                       {"content-type": "application/connect+json", "authorization": f"Bearer {bearer}"})  # fmt: skip
    response = connection.getresponse()
    assert response.status == 200 and response.headers["content-type"] == "application/connect+json"
    flags, size = struct.unpack(">BI", response.read(5))  # the stream stays open: read one message
    return connection, flags, json.loads(response.read(size))


def test_a_live_watch_seat_stream_over_connect(web) -> None:
    """WatchSeat over Connect, as the web table reads it: the seat as it is first, with a position to resume from."""
    bearer = token(web[1])
    status, joined = call_json(web, "croupier.v1.TableService/JoinTable", {"table_id": "casino-war-play"}, bearer)
    assert status == 200
    connection, flags, first = open_seat_stream(web, bearer, joined["seatId"])
    try:
        assert flags == 0 and first["position"]
        assert first["seatChanged"]["change"] == "current" and first["seatChanged"]["status"]["seatId"] == joined["seatId"]
    finally:
        connection.close()


def test_a_browser_that_goes_away_ends_its_stream_at_once(web) -> None:
    """Closing the page ends the gRPC stream behind it even on a quiet seat (no next message to fail on):
    a player who opened and closed as many streams as allowed may open one more."""
    bearer = token(web[1])
    status, joined = call_json(web, "croupier.v1.TableService/JoinTable", {"table_id": "casino-war-play"}, bearer)
    assert status == 200
    for _ in range(WATCH_MAX_STREAMS_PER_PLAYER):
        connection, flags, first = open_seat_stream(web, bearer, joined["seatId"])
        connection.close()
        assert flags == 0 and first["seatChanged"]["change"] == "current"
    for _attempt in range(100):  # the server hears of the last close a moment later
        connection, flags, first = open_seat_stream(web, bearer, joined["seatId"])
        connection.close()
        if flags == 0:
            break
        assert first["error"]["code"] == "resource_exhausted", first
        time.sleep(0.1)
    assert flags == 0 and first["seatChanged"]["change"] == "current", "the closed streams still count against the player"
