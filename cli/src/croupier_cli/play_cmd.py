"""Clients of a running server: `croupier demo` plays every game, `croupier play` lets you play."""

from __future__ import annotations

import json
import random
import time
import uuid
from datetime import UTC, datetime
from typing import Annotated, Optional

import grpc
import typer
from rich.console import Console
from rich.markup import escape
from rich.prompt import Prompt

from croupier.v1 import common_pb2, table_pb2, wallet_pb2
from croupier_rules.table_config import GAMES
from croupier_rules.verify import verify_round

from .amounts import bet_problem, chip_unit, format_amount, parse_amount
from .client import DEFAULT_TARGET, EXIT_REFUSED, Client, calls_server, err, exit_code_of, refused_as
from .verify_cmd import print_report, view_as_dict

console = Console(soft_wrap=True)  # a commitment or a command to copy stays on one line
WAR_CHOICE = {"casino-war": "raise", "war-p2p": "raise", "battle-royale": "battle", "dueling-for-dollars": "war",
              "casino-holdem": "call"}
TOP_UP = 1_000_000
REVEAL_WAIT_S = 5.0  # the shoe is revealed from the round's events a moment after it ends


def play_money_tables(client: Client) -> dict[str, table_pb2.TableInfo]:
    tables = client.call(client.tables.ListTables, table_pb2.ListTablesRequest()).tables
    chosen: dict[str, table_pb2.TableInfo] = {}
    for table in tables:
        if table.currency == "PLAY" and table.game not in chosen and table.dealer != "player":
            chosen[table.game] = table
    return chosen


def available(client: Client, currency: str) -> int:
    balances = client.call(client.wallet.GetBalances, wallet_pb2.GetBalancesRequest()).balances
    return next((b.available for b in balances if b.currency == currency), 0)


def top_up(client: Client, amount: int = TOP_UP) -> None:
    client.call(
        client.wallet.TopUpPlayMoney,
        wallet_pb2.TopUpPlayMoneyRequest(amount=common_pb2.Money(amount_minor=amount, currency="PLAY"),
                                         transaction_id=str(uuid.uuid4())),
    )


def demo_bets(table: table_pb2.TableInfo, rng: random.Random) -> dict[str, int]:
    unit = min(table.chips)
    names = list(table.bets)
    if table.game == "dueling-for-dollars":
        names = rng.choice([names, ["player"], ["dealer", "tie_plus"], ["player", "combo"]])
    elif table.game in ("casino-war", "casino-holdem") and rng.random() < 0.5:
        names = names[:1]
    bets = {}
    for name in names:
        limit = table.limits[name]
        amount = limit.min + unit * rng.randrange(0, 4)
        bets[name] = min(amount - amount % unit, limit.max) or limit.min
    return bets


def play_round(client: Client, seat_id: str, table: table_pb2.TableInfo, rng: random.Random) -> table_pb2.RoundView:
    view = client.call(
        client.tables.PlaceBets,
        table_pb2.PlaceBetsRequest(seat_id=seat_id, bets=demo_bets(table, rng), idempotency_key=str(uuid.uuid4()),
                                   cut_seed=f"{rng.getrandbits(64):x}"),
    ).round
    view = client.call(client.tables.Deal, table_pb2.DealRequest(round_id=view.round_id)).round
    while view.phase == "deciding":
        brave = rng.random() < 0.8
        choice = WAR_CHOICE[table.game] if brave else ("fold" if table.game == "casino-holdem" else "surrender")
        view = client.call(client.tables.Decide,
                           table_pb2.DecideRequest(round_id=view.round_id, choice=choice, bet=view.pending_bets[0])).round
    return view


def demo(
    target: Annotated[str, typer.Option(help="server HOST:PORT")] = DEFAULT_TARGET,
    wallet_target: Annotated[Optional[str], typer.Option(help="wallet HOST:PORT when it is served apart (distributed)")] = None,
    rounds: Annotated[int, typer.Option(help="rounds of each game", min=1)] = 3,
    seed: Annotated[Optional[int], typer.Option(help="seed of the demo's choices")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="one JSON line per round")] = False,
) -> None:
    """Play rounds of every game through gRPC with play money and print a summary."""
    client = Client.connect(target, wallet_target=wallet_target)
    rng = random.Random(seed)
    tables = play_money_tables(client)
    if available(client, "PLAY") < TOP_UP // 2:
        top_up(client)
    before = available(client, "PLAY")
    wagered = returned = played = 0
    for _ in range(rounds):
        for game in GAMES:
            table = tables[game]
            seat = client.call(client.tables.JoinTable, table_pb2.JoinTableRequest(table_id=table.table_id))
            view = play_round(client, seat.seat_id, table, rng)
            played += 1
            wagered += view.total_staked
            returned += view.total_returned
            if as_json:
                print(json.dumps({"round_id": view.round_id, "game": game, "phase": view.phase,
                                  "staked": view.total_staked, "returned": view.total_returned,
                                  "net": view.total_returned - view.total_staked}), flush=True)
    expected = before - wagered + returned
    after = available(client, "PLAY")
    deadline = time.monotonic() + 10
    while after != expected and time.monotonic() < deadline:  # the wallet settles from events, a moment later
        time.sleep(0.05)
        after = available(client, "PLAY")
    summary = {"rounds": played, "wagered": wagered, "returned": returned, "balance_before": before, "balance_after": after}
    if as_json:
        print(json.dumps({"summary": summary}))
    else:
        console.print(f"demo: {played} rounds of {len(GAMES)} games, wagered {money(wagered, 'PLAY')}, "
                      f"returned {money(returned, 'PLAY')}; balance {format_amount(before, 'PLAY')} → {money(after, 'PLAY')}")
    if after != expected:
        err.print(f"[red]balance {money(after, 'PLAY')} differs from the expected {money(expected, 'PLAY')}[/red]")
        raise typer.Exit(1)


def show(view: table_pb2.RoundView) -> None:
    """The cards by hand, the hands named at a showdown (Casino Hold'em), each bet's result in the currency's units."""
    by_hand: dict[str, list[str]] = {}
    for card in view.cards:
        by_hand.setdefault(card.hand, []).append(card.card or "??")
    for hand, cards in by_hand.items():
        if hand != "burn":
            named = view.hand_values.get(hand, "")
            console.print(f"  {hand:12s} {' '.join(cards)}" + (f"  [bold]{escape(named)}[/bold]" if named else ""))
    for hand, named in view.hand_values.items():
        if hand not in by_hand:  # e.g. the best five of hole cards and board
            console.print(f"  {hand:12s} [bold]{escape(named)}[/bold]")
    for result in view.results:
        console.print(f"  {result.bet:12s} staked {money(result.stake, view.currency)} "
                      f"returned {money(result.returned, view.currency)} ({result.outcome})")  # fmt: skip


def ask_bets(table: table_pb2.TableInfo) -> dict[str, int]:
    """Each bet of the table in the currency's units, asked again until the table would take it."""
    bets = {}
    unit = format_amount(chip_unit(table.chips), table.currency)
    for name in table.bets:
        limit = table.limits[name]
        span = f"{format_amount(limit.min, table.currency)}-{format_amount(limit.max, table.currency)} {table.currency}"
        default = format_amount(limit.min if name == table.bets[0] else 0, table.currency)
        while True:
            text = Prompt.ask(f"bet on {name} ({span}, chips of {unit}; 0 for none)", default=default)
            try:
                amount = parse_amount(text, table.currency)
            except ValueError as exc:
                console.print(f"[red]{escape(str(exc))}[/red]")
                continue
            problem = bet_problem(amount, limit, table.chips, table.currency, over_max_ok=table.over_limit == "auto-adjust")
            if problem is None:
                break
            console.print(f"[red]{escape(problem)}[/red]")
        if amount:
            bets[name] = amount
    return bets


def verify_after(client: Client, round_id: str, commitment: str) -> None:
    """Once the shoe is revealed, check the round as `croupier verify ROUND --commitment C` does."""
    deadline = time.monotonic() + REVEAL_WAIT_S
    view = client.call(client.tables.GetRound, table_pb2.GetRoundRequest(round_id=round_id)).round
    while not view.revealed_shoe and time.monotonic() < deadline:  # revealed from the round's events, a moment later
        time.sleep(0.1)
        view = client.call(client.tables.GetRound, table_pb2.GetRoundRequest(round_id=round_id)).round
    later = f"croupier verify {round_id} --commitment {commitment}"
    if not view.revealed_shoe:
        console.print(f"the shoe is not revealed yet; check the round later with: {later}")
        return
    console.print("verification (as: " + later + "):")
    print_report(verify_round(view_as_dict(view), committed_before=commitment or None))


def play(
    game: Annotated[str, typer.Argument(help=f"one of {', '.join(GAMES)}")],
    target: Annotated[str, typer.Option(help="server HOST:PORT")] = DEFAULT_TARGET,
    wallet_target: Annotated[Optional[str], typer.Option(help="wallet HOST:PORT when it is served apart (distributed)")] = None,
    real: Annotated[bool, typer.Option("--real", help="play a real-money table instead of play money")] = False,
) -> None:
    """Play a game interactively against a running server: amounts in the currency's units, the shoe's
    commitment shown before the bets and each round verified after."""
    client = Client.connect(target, wallet_target=wallet_target)
    tables = [t for t in client.call(client.tables.ListTables, table_pb2.ListTablesRequest(game=game)).tables
              if (t.currency != "PLAY") == real and t.dealer != "player"]  # fmt: skip
    if not tables:
        err.print(f"[red]no {'real-money' if real else 'play-money'} table for {game!r}; games: {', '.join(GAMES)}[/red]")
        raise typer.Exit(2)
    table = tables[0]
    currency = table.currency
    if not real and available(client, "PLAY") < 10 * max(l.max for l in table.limits.values()):
        top_up(client)
    seat = client.call(client.tables.JoinTable, table_pb2.JoinTableRequest(table_id=table.table_id))
    console.print(f"seated at {table.table_id} ({game}, {currency}); chips {', '.join(format_amount(c, currency) for c in table.chips)}")
    if resume_open_round(client, seat.status) and Prompt.ask("again?", choices=["y", "n"], default="y") != "y":
        return
    while True:
        console.print(f"balance {money(available(client, currency), currency)}")
        status = client.call(client.tables.GetSeatStatus, table_pb2.GetSeatStatusRequest(seat_id=seat.seat_id)).status
        if status.next_commitment:
            console.print(f"next round {status.next_round_id}: its shoe is committed as sha256 {status.next_commitment}")
        bets = ask_bets(table)
        try:
            view = client.call(client.tables.PlaceBets, table_pb2.PlaceBetsRequest(
                seat_id=seat.seat_id, bets=bets, idempotency_key=str(uuid.uuid4()))).round  # fmt: skip
        except grpc.RpcError as error:
            if exit_code_of(error) != EXIT_REFUSED:
                raise
            console.print(f"[red]{escape(refused_as(error, 'refused'))}[/red]")  # bet again
            continue
        finish(client, view, status.next_commitment)
        if Prompt.ask("again?", choices=["y", "n"], default="y") != "y":
            return


def resume_open_round(client: Client, status: table_pb2.SeatStatus) -> bool:
    """JoinTable gives back the seat as it was (after a Ctrl-C, or from another terminal): a round left open
    at it is finished first, where it stopped, before new bets are asked for."""
    if not status.last_round_id or status.last_round_phase in ("", "settled", "voided"):
        return False
    view = client.call(client.tables.GetRound, table_pb2.GetRoundRequest(round_id=status.last_round_id)).round
    console.print(f"round {view.round_id} at this seat is still {view.phase}: resuming it")
    finish(client, view, "")
    return True


def finish(client: Client, view: table_pb2.RoundView, commitment: str) -> None:
    """Deal a round not dealt yet, ask each decision (its cost and deadline shown) until it is over, then
    show who decided what and verify it."""
    if view.phase in ("betting", "dealing") and not view.cards:
        view = client.call(client.tables.Deal, table_pb2.DealRequest(round_id=view.round_id, version=view.version)).round
    show(view)
    while view.phase == "deciding":
        bet = view.pending_bets[0]
        console.print(f"  {bet}: {choices_text(view)}; {deadline_text(view.decision_deadline)}")
        choice = Prompt.ask(f"{bet}: decide", choices=list(view.options), default=view.options[0])
        try:
            view = client.call(client.tables.Decide, table_pb2.DecideRequest(
                round_id=view.round_id, choice=choice, bet=bet, version=view.version)).round  # fmt: skip
        except grpc.RpcError as error:
            if exit_code_of(error) != EXIT_REFUSED:
                raise
            console.print(f"[red]{escape(refused_as(error, 'refused'))}[/red]")  # the keeper may have answered meanwhile
            view = client.call(client.tables.GetRound, table_pb2.GetRoundRequest(round_id=view.round_id)).round
        show(view)
    for step in view.steps:
        if step.caused_by:
            console.print(f"  v{step.version} {step.event_type} by the {step.caused_by}: {escape(step.caused_by_reason)}")
    console.print(f"round {view.round_id}: net {money(view.total_returned - view.total_staked, view.currency, signed=True)}")
    verify_after(client, view.round_id, commitment)


def choices_text(view: table_pb2.RoundView) -> str:
    """Each allowed choice with what it adds to the stake."""
    return ", ".join(
        f"{choice} (+{money(view.option_costs[choice], view.currency)})" if view.option_costs.get(choice) else f"{choice} (adds nothing)"
        for choice in view.options
    )


def deadline_text(deadline: str) -> str:
    """When the keeper answers for the player, as seconds from now."""
    if not deadline:
        return "no deadline"
    left = (datetime.fromisoformat(deadline.replace("Z", "+00:00")) - datetime.now(UTC)).total_seconds()
    return f"decide within {max(0, int(left))} s (by {deadline}), else the table's default is taken for you"


def money(minor: int, currency: str, signed: bool = False) -> str:
    return f"{format_amount(minor, currency, signed)} {currency}"


def register(app: typer.Typer) -> None:
    app.command("demo")(calls_server(demo))
    app.command("play")(calls_server(play))
