"""Hostile clients against a real embedded server: requests generated from the proto descriptors
for every RPC it serves (public and internal) under every kind of credential, concurrency storms on
every decision of every game, and random play — then the books must be clean.

What must hold: no INTERNAL or UNKNOWN status and no hang (DEADLINE_EXCEEDED) for anything a
client can send; every refusal carries an ErrorInfo with a known reason; status messages stay short
whatever the input; afterwards the ledger sums to
zero, the audit is clean, and each player's reserved money equals the stakes of their open rounds.
The sizes are bounded for `make test`; HOSTILE_EXAMPLES raises the generated-request count.
"""

from __future__ import annotations

import base64
import logging
import os
import random
import threading
import time
import uuid
from collections import Counter

import grpc
import pytest
from hypothesis import HealthCheck, given, settings
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from hypothesis import strategies as st

from croupier.internal.v1 import internal_pb2
from croupier.v1 import audit_pb2, table_pb2, wallet_pb2
from croupier_platform.auth import TokenAuthority
from croupier_platform.errors import DOMAIN, Reason, peer_refusal
from tests.proto_strategies import Pools, message_strategy, rpcs_of

from .conftest import Casino, Player, start_embedded
from .test_audit import audit_json, run_cli

pytestmark = pytest.mark.e2e

NEVER = {grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN, grpc.StatusCode.DEADLINE_EXCEEDED}
CALL_TIMEOUT_S = 20
MAX_DETAILS = 2048  # a status message is for a person: it never carries a request back whole
OPEN_PHASES = ("betting", "dealing", "deciding")
# Valid identities more often than forged ones, so most requests get past authentication.
WEIGHTED_CREDENTIALS = ("mallory", "mallory", "mallory", "trudy", "trudy", "operator", "operator", "none", "garbage",
                        "basic", "expired", "other-secret", "two-headers", "huge")  # fmt: skip
EXAMPLES = int(os.environ.get("HOSTILE_EXAMPLES", "300"))

RPCS = rpcs_of([
    *table_pb2.DESCRIPTOR.services_by_name.values(), *wallet_pb2.DESCRIPTOR.services_by_name.values(),
    *audit_pb2.DESCRIPTOR.services_by_name.values(),
])  # fmt: skip
# Embedded, the services call these in-process: the port does not serve them to anyone.
INTERNAL_RPCS = rpcs_of(list(internal_pb2.DESCRIPTOR.services_by_name.values()))


def _status(call) -> tuple[grpc.StatusCode, str, str]:  # noqa: ANN001
    """The code, message and ErrorInfo reason ("" when none) of a call."""
    try:
        call()
    except grpc.RpcError as error:
        refusal = peer_refusal(error)
        return refusal.code, refusal.message, refusal.reason if refusal.domain == DOMAIN else ""
    return grpc.StatusCode.OK, "", ""


def _assert_fine(code: grpc.StatusCode, details: str, reason: str, what: str) -> None:
    assert code not in NEVER, f"{what} answered {code.name}: {details[:300]}"
    assert len(details) <= MAX_DETAILS, f"{what} answered a {len(details)}-character message"
    assert code == grpc.StatusCode.OK or reason in Reason.__members__, f"{what} answered {code.name} without a known reason ({reason!r}): {details[:300]}"


@pytest.fixture(scope="module")
def casino(tmp_path_factory):
    casino = start_embedded(tmp_path_factory.mktemp("hostile"))
    yield casino
    casino.close()


@pytest.fixture(scope="module")
def tables(casino: Casino) -> list[table_pb2.TableInfo]:
    someone = casino.player()
    return [t for t in someone.call(someone.tables.ListTables, table_pb2.ListTablesRequest()).tables if t.currency == "PLAY"]


def _credentials(casino: Casino, mallory: Player, trudy: Player, operator: Player) -> dict[str, tuple]:
    now = int(time.time())
    stranger = TokenAuthority("a-secret-that-is-not-the-servers-0123456789")
    return {
        "mallory": mallory._meta(),
        "trudy": trudy._meta(),
        "operator": operator._meta(),
        "none": (),
        "garbage": (("authorization", "Bearer not.a.token"),),
        "basic": (("authorization", "Basic bWFsbG9yeTpwYXNz"),),
        "expired": (("authorization", f"Bearer {casino.authority.mint('mallory', 'player', now - 7200, 60)}"),),
        "other-secret": (("authorization", f"Bearer {stranger.mint('mallory', 'operator', now, 600)}"),),
        "two-headers": (*trudy._meta(), *operator._meta()),
        "huge": (("authorization", "Bearer " + "A" * 6000),),
    }


def _smallest_bet(table: table_pb2.TableInfo, times: int = 1) -> dict[str, int]:
    """The table's first bet (the ante, or Dueling's player bet) at `times` its minimum."""
    name = table.bets[0]
    return {name: min(table.limits[name].min * times, table.limits[name].max)}


def _seen(pools: Pools, view) -> None:  # noqa: ANN001 - a RoundView
    pools.add("round_id", view.round_id)
    pools.add("seat_id", view.seat_id)
    pools.add("shoe_id", view.shoe_id)


@pytest.fixture(scope="module")
def session(casino: Casino, tables) -> tuple[Pools, dict[str, tuple], list[Player]]:
    """Two fuzzing players who each played a round at every table, and the values they saw."""
    mallory, trudy = casino.player("mallory"), casino.player("trudy")
    operator = casino.player("fuzz-operator", role="operator")
    pools = Pools()
    pools.add("currency", "PLAY", "EUR", "USD", "play", "XXX")
    pools.add("player_id", mallory.name, trudy.name, "nobody")
    pools.add("choice", "war", "surrender", "raise", "call", "fold", "battle", "duel", "")
    pools.add("bet", "ante", "tie", "call", "aa_bonus", "player", "dealer", "")
    pools.add("role", "player", "dealer", "operator", "house")
    pools.add("game", *{t.game for t in tables})
    for player in (mallory, trudy):
        player.top_up(5_000_000)
        for table in tables:
            pools.add("table_id", table.table_id)
            pools.add("key", *table.bets)  # map keys of PlaceBets.bets
            if table.dealer == "player":
                continue
            seat = player.seat(table.table_id)
            pools.add("seat_id", seat)
            view = player.place(seat, _smallest_bet(table))
            _seen(pools, view)
            pools.add("idempotency_key", str(uuid.uuid4()))
    return pools, _credentials(casino, mallory, trudy, operator), [mallory, trudy]


def test_generated_requests_to_every_rpc_never_answer_internal_or_hang(casino: Casino, session) -> None:
    pools, credentials, _ = session
    codes: Counter[tuple[str, str]] = Counter()
    reasons: Counter[str] = Counter()

    @settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))  # fmt: skip
    @given(data=st.data())
    def call_anything(data: st.DataObject) -> None:
        rpc = data.draw(st.sampled_from(RPCS), label="rpc")
        who = data.draw(st.sampled_from(WEIGHTED_CREDENTIALS), label="credentials")
        request = data.draw(
            st.one_of(message_strategy(rpc.method.input_type, pools), st.binary(max_size=64)), label="request"
        )
        channel = casino.wallet_channel if rpc.service.endswith(("WalletService", "LedgerService")) else casino.channel
        code, details, reason = _status(lambda: rpc.call(channel, request, credentials[who], CALL_TIMEOUT_S))
        codes[(rpc.method.name, code.name)] += 1
        reasons[reason] += 1
        _assert_fine(code, details, reason, f"{rpc.path} as {who}")

    call_anything()
    # The requests got somewhere: some calls succeeded, and not every refusal was authentication.
    assert any(code == "OK" for _, code in codes), codes
    assert sum(n for (_, code), n in codes.items() if code not in ("UNAUTHENTICATED", "PERMISSION_DENIED")) > EXAMPLES // 4
    assert {"TOKEN_INVALID", "TOKEN_EXPIRED", "PERMISSION_DENIED", "INVALID_FIELD"} <= reasons.keys(), reasons


def test_the_internal_services_are_neither_served_nor_listed_on_the_embedded_port(casino: Casino, session) -> None:
    _, credentials, _ = session
    for rpc in INTERNAL_RPCS:
        for who in ("operator", "mallory", "none"):
            code, details, _ = _status(lambda: rpc.call(casino.channel, rpc.request_class(), credentials[who], CALL_TIMEOUT_S))
            assert code == grpc.StatusCode.UNIMPLEMENTED, f"{rpc.path} as {who} answered {code.name}: {details[:200]}"
    reflection = reflection_pb2_grpc.ServerReflectionStub(casino.channel)
    (reply,) = reflection.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=CALL_TIMEOUT_S)
    listed = {service.name for service in reply.list_services_response.service}
    assert "croupier.v1.TableService" in listed
    assert not {name for name in listed if name.startswith("croupier.internal.")}, listed


def _crafted_token(body: bytes) -> str:
    return base64.urlsafe_b64encode(b"\x01" + body).decode().rstrip("=")


@pytest.mark.parametrize("page_token", [
    _crafted_token(b"[" * 50_000 + b"]" * 50_000), _crafted_token(b"[" * 300 + b"]" * 300), "A" * 500_000,
    _crafted_token(b'["ListRounds",' + b'{"a":' * 200 + b"1" + b"}" * 200 + b"]"),
])  # fmt: skip
def test_nested_and_oversized_page_tokens_on_every_paging_rpc_are_invalid_argument(casino: Casino, session, page_token: str) -> None:
    _, credentials, _ = session
    paging = [(casino.channel, "/croupier.v1.TableService/ListRounds", table_pb2.ListRoundsRequest(page_token=page_token)),
              (casino.wallet_channel, "/croupier.v1.WalletService/ListTransactions", wallet_pb2.ListTransactionsRequest(page_token=page_token))]  # fmt: skip
    for channel, path, request in paging:
        rpc = next(r for r in RPCS if r.path == path)
        code, details, reason = _status(lambda: rpc.call(channel, request, credentials["mallory"], CALL_TIMEOUT_S))
        assert (code, reason) == (grpc.StatusCode.INVALID_ARGUMENT, "INVALID_FIELD"), f"{path}: {code.name} {details[:200]}"
        _assert_fine(code, details, reason, path)


RESUMING_NAMES = 16
RESUMES_PER_NAME = 3
# Rows a resume from "0" of a fresh seat may read (its seat's events, its player's rounds): a few, however long the log.
ROWS_PER_FRESH_RESUME = 10
MIN_LOG_FOR_RESUMES = 500  # events logged before the resumes: a scan of the log would read at least these


def _last_position(casino: Casino) -> int:
    """The game log's last position, read as the game reads it."""
    book = casino.host.module("game").feed._book
    return casino.host.run(book.read(lambda uow: uow.events.last_position()))


def _first_messages(player: Player, seat_id: str, after: str, count: int = 1, idle_s: float | None = None) -> tuple[grpc.StatusCode, str, list]:
    """The first `count` messages of a WatchSeat resumed from `after` (or those sent within `idle_s`), then the stream cancelled."""
    request = table_pb2.WatchSeatRequest(seat_id=seat_id, after_position=after)
    return _first_of(player.tables.WatchSeat(request, metadata=player._meta(), timeout=idle_s or CALL_TIMEOUT_S), count, idle_s is not None)


def _first_round_messages(player: Player, round_id: str, count: int) -> tuple[grpc.StatusCode, str, list]:
    request = table_pb2.WatchRoundRequest(round_id=round_id, after_position="0")
    return _first_of(player.tables.WatchRound(request, metadata=player._meta(), timeout=CALL_TIMEOUT_S), count)


def _first_of(stream, count: int, until_idle: bool = False) -> tuple[grpc.StatusCode, str, list]:  # noqa: ANN001
    """A stream's first `count` messages, then the stream cancelled; its refusal's code and reason, if any
    (a deadline is the end of the messages when `until_idle`)."""
    got: list = []
    try:
        for message in stream:
            got.append(message)
            if len(got) == count:
                break
    except grpc.RpcError as error:
        refusal = peer_refusal(error)
        if not (until_idle and refusal.code == grpc.StatusCode.DEADLINE_EXCEEDED):
            return refusal.code, refusal.reason, got
    finally:
        stream.cancel()
    return grpc.StatusCode.OK, "", got


def test_resumes_from_zero_and_past_the_end_from_many_names_read_the_seats_history_only(casino: Casino, tables) -> None:
    """48 resumes from "0" from 16 fresh names at once: each reads its seat's own few rows through the
    log's index, whatever the log's length; a position past the log's end is refused, not held open."""
    war = next(t for t in tables if t.game == "casino-war")
    busy = casino.player()
    busy.top_up(2_000_000)
    busy_seat = busy.seat(war.table_id)
    while _last_position(casino) < MIN_LOG_FOR_RESUMES:
        _finish(busy, busy.deal(busy.place(busy_seat, _smallest_bet(war)).round_id))
    names = [casino.player() for _ in range(RESUMING_NAMES)]
    seats = [name.seat(war.table_id) for name in names]
    feed = casino.host.module("game").feed
    before = feed.catch_up_rows_read
    resumes = [lambda n=name, s=seat: _first_messages(n, s, "0") for name, seat in zip(names, seats, strict=True)
               for _ in range(RESUMES_PER_NAME)]  # fmt: skip
    for code, _, got in _together(resumes):
        assert code == grpc.StatusCode.OK and got[0].seat_changed.change == "joined", (code, got)
    read = feed.catch_up_rows_read - before
    assert 0 < read <= len(resumes) * ROWS_PER_FRESH_RESUME, f"{len(resumes)} resumes read {read} rows of a {MIN_LOG_FOR_RESUMES}+ event log"
    past_end = str(_last_position(casino) + 1_000_000)
    for code, reason, got in _together([lambda n=name, s=seat: _first_messages(n, s, past_end) for name, seat in zip(names, seats, strict=True)]):
        assert (code, reason, got) == (grpc.StatusCode.INVALID_ARGUMENT, "INVALID_FIELD", [])


def test_resumed_streams_cancelled_at_every_step_end_cancelled_without_errors(casino: Casino, tables, caplog) -> None:
    """WatchSeat resumed from "0" and WatchRound from "0", cancelled after each of their messages in
    turn, many at once: each call ends CANCELLED in the access log, and nothing is logged as an error."""
    war = next(t for t in tables if t.game == "casino-war")
    player = casino.player()
    player.top_up(1_000_000)
    seat = player.seat(war.table_id)
    view = _finish(player, player.deal(player.place(seat, _smallest_bet(war)).round_id))
    seat_messages = len(_first_messages(player, seat, "0", count=100, idle_s=2)[2])
    round_messages = view.version
    assert seat_messages >= 3 and round_messages >= 3
    caplog.set_level(logging.INFO)
    calls = [lambda k=k: _first_messages(player, seat, "0", count=k) for k in range(1, seat_messages)]
    calls += [lambda k=k: _first_round_messages(player, view.round_id, k) for k in range(1, round_messages)]
    for _ in range(3):
        for code, _, _ in _together(calls[: len(calls) // 2]) + _together(calls[len(calls) // 2 :]):
            assert code == grpc.StatusCode.OK
    time.sleep(0.5)  # the server hears of the last cancellations a moment later
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert not errors, "\n".join(f"{r.name}: {r.getMessage()[:300]} {logging.Formatter().formatException(r.exc_info) if r.exc_info else ''}" for r in errors[:4])
    ended = Counter(getattr(r, "code", "") for r in caplog.records if getattr(r, "method", "").endswith(("/WatchSeat", "/WatchRound")))
    assert "UNKNOWN" not in ended and ended["CANCELLED"] + ended["OK"] >= len(calls), ended


def _finish(player: Player, view):  # noqa: ANN001
    """Play a round to its end with the first choice offered."""
    for _ in range(10):
        if view.phase == "dealing":
            view = player.deal(view.round_id)
        elif view.phase == "deciding":
            view = player.decide(view.round_id, view.options[0], view.pending_bets[0] if view.pending_bets else "")
        else:
            return view
    raise AssertionError(f"round {view.round_id} did not finish: {view.phase}")


def _storm(calls: list) -> list[tuple[grpc.StatusCode, str, str]]:
    """All calls at once, released together: each one's status."""
    return _together([lambda c=call: _status(c) for call in calls])


def _together(calls: list) -> list:
    """All calls at once, released together: what each returned."""
    barrier = threading.Barrier(len(calls))
    results: list = [None] * len(calls)

    def run(index: int, call) -> None:  # noqa: ANN001
        barrier.wait()
        results[index] = call()

    threads = [threading.Thread(target=run, args=(i, c)) for i, c in enumerate(calls)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=CALL_TIMEOUT_S * 2)
    assert not any(thread.is_alive() for thread in threads), "a storm call hung"
    return results


STORM_ROUNDS = int(os.environ.get("HOSTILE_STORM_ROUNDS", "6"))


def test_storms_on_every_decision_of_every_game_leave_no_money_behind(casino: Casino, tables) -> None:
    rng = random.Random(7)
    players = []
    for table in tables:
        if table.dealer == "player":
            continue
        player = casino.player()
        player.top_up(2_000_000)
        players.append(player)
        seat = player.seat(table.table_id)
        for _ in range(STORM_ROUNDS):
            view = player.place(seat, _smallest_bet(table, rng.choice((1, 2))))
            view = player.deal(view.round_id)
            while view.phase == "deciding":
                bet = view.pending_bets[0] if view.pending_bets else ""
                calls = [
                    (lambda c=choice: player.decide(view.round_id, c, bet)) for choice in view.options for _ in range(2)
                ]
                calls.append(lambda: player.call(player.tables.LeaveTable, table_pb2.LeaveTableRequest(seat_id=seat)))
                for code, details, reason in _storm(calls):
                    _assert_fine(code, details, reason, f"a decision storm at {table.table_id}")
                view = player.get_round(view.round_id)
            _finish(player, view)
            # The seat may have been left by the storm's LeaveTable once the round was over.
            seat = player.seat(table.table_id)
    _assert_books_clean(casino, players)


def test_random_concurrent_play_and_double_sends_keep_the_books(casino: Casino, tables) -> None:
    playable = [t for t in tables if t.dealer != "player"]

    def play(seed: int, player: Player) -> None:
        rng = random.Random(seed)
        for _ in range(8):
            table = rng.choice(playable)
            seat = player.seat(table.table_id)
            key = str(uuid.uuid4())
            bets = _smallest_bet(table, rng.choice((1, 1, 2, 5)))
            placed = _storm([lambda: player.place(seat, bets, key), lambda: player.place(seat, bets, key)])
            for code, details, reason in placed:
                _assert_fine(code, details, reason, "a double PlaceBets")
            view = player.get_round(player.place(seat, bets, key).round_id)
            while view.phase in ("dealing", "deciding"):
                if view.phase == "dealing":
                    view = player.deal(view.round_id)
                else:
                    choice = rng.choice(list(view.options))
                    view = player.decide(view.round_id, choice, view.pending_bets[0] if view.pending_bets else "")

    players = [casino.player() for _ in range(4)]
    for player in players:
        player.top_up(2_000_000)
    threads = [threading.Thread(target=play, args=(i, p)) for i, p in enumerate(players)]
    errors: list[BaseException] = []
    for thread in threads:
        thread.run = (lambda f: lambda: _capture(f, errors))(thread.run)  # type: ignore[method-assign]
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert not errors, errors[0]
    _assert_books_clean(casino, players)


def _capture(run, errors: list[BaseException]) -> None:  # noqa: ANN001
    try:
        run()
    except BaseException as error:  # noqa: BLE001 - reported by the test's thread
        errors.append(error)


def test_after_the_hostile_session_the_books_are_clean(casino: Casino, session) -> None:
    """Runs after the generated requests (file order): whatever they did, nothing is left behind."""
    _, _, fuzzers = session
    _assert_books_clean(casino, fuzzers)


def _reserved(player: Player) -> int:
    balances = player.call(player.wallet.GetBalances, wallet_pb2.GetBalancesRequest()).balances
    return sum(b.reserved for b in balances if b.currency == "PLAY")


def _open_stakes(player: Player) -> int:
    rounds = player.call(player.tables.ListRounds, table_pb2.ListRoundsRequest(limit=100)).rounds
    return sum(r.total_staked for r in rounds if r.phase in OPEN_PHASES and r.currency == "PLAY")


def _assert_books_clean(casino: Casino, players: list[Player]) -> None:
    deadline = time.monotonic() + 20
    while any(_reserved(p) != _open_stakes(p) for p in players) and time.monotonic() < deadline:
        time.sleep(0.1)
    for player in players:
        assert _reserved(player) == _open_stakes(player), f"{player.name}: reserved money that no open round staked"
    ledger = run_cli("ledger", "check", *casino.store_args)
    assert ledger.returncode == 0, ledger.stdout + ledger.stderr
    code, report = audit_json(*casino.store_args)
    assert code == 0, report
