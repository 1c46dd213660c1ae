"""Random sessions against the real ledger (SQLite in memory), checked step by step against a
plain-arithmetic model of what each player should hold.

Operations: play-money top-ups and real-money deposits, stake reservations (several per round,
ids drawn from a small pool so they repeat, sometimes with other amounts), settlements with
random returns within stake x 0..101, voids before and after settlement, second settlements and
voids, and redeliveries of any round event already sent.

After every step: all accounts sum to zero per currency; each balance equals the fold of its
entries and pending amounts match pending transfers; the table is empty; every player's
balance equals the model's; only a void ever takes a balance below zero (a payout already
spent); a void restores the player's balance exactly; a repeated id or redelivered event
changes nothing at all.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import HealthCheck, given, settings
from hypothesis import event as note
from hypothesis import strategies as st

from croupier_wallet.domain.errors import InsufficientFunds, RoundClosed, RoundMismatch, TransferIdReused

from .helpers import make_wallet, settled, voided

PLAYERS = ["p0", "p1"]
ROUNDS = [f"r{i}" for i in range(8)]
# Every session starts with both players funded in both currencies (ids outside the drawn pools).
FUNDING = [(kind, player, 800, 9) for player in PLAYERS for kind in ("top_up", "deposit")]

top_up = st.tuples(st.just("top_up"), st.sampled_from(PLAYERS), st.integers(1, 5_000), st.integers(0, 4))
deposit = st.tuples(st.just("deposit"), st.sampled_from(PLAYERS), st.integers(1, 5_000), st.integers(0, 2))
reserve = st.tuples(
    st.just("reserve"), st.sampled_from(PLAYERS), st.sampled_from(ROUNDS), st.integers(1, 600),
    st.integers(0, 9), st.sampled_from(["PLAY", "PLAY", "PLAY", "USD"]),
)  # fmt: skip
# Per-stake returns in hundredths of the stake: 0 (lost) .. 10,100 (100:1 plus the stake).
# Settlements and voids name the k-th round staked so far (newest first), or a round never seen.
settle = st.tuples(st.just("settle"), st.integers(0, 4), st.lists(st.integers(0, 10_100), min_size=1, max_size=4))
void = st.tuples(st.just("void"), st.integers(0, 4))
redeliver = st.tuples(st.just("redeliver"), st.integers(0, 1_000))
# Weighted towards the round lifecycle, so most sessions stake, settle and void several rounds.
operations = st.lists(
    st.sampled_from([top_up, deposit, reserve, reserve, reserve, reserve, settle, settle, settle, void, void, redeliver]).flatmap(
        lambda strategy: strategy
    ),
    min_size=8, max_size=40,
)


@dataclass
class ModelRound:
    player: str
    currency: str
    stakes: list[int] = field(default_factory=list)
    status: str = "open"
    returned: int = 0
    released: bool = False  # voided while open: its stakes were released, never posted


@dataclass
class Model:
    posted: dict[tuple[str, str], int] = field(default_factory=dict)
    reserved: dict[tuple[str, str], int] = field(default_factory=dict)
    rounds: dict[str, ModelRound] = field(default_factory=dict)
    credits: dict[tuple[str, str, str], int] = field(default_factory=dict)  # (kind, player, id) -> amount
    stakes: dict[str, tuple[str, str, int, str]] = field(default_factory=dict)  # id -> (player, round, amount, currency)

    def available(self, key: tuple[str, str]) -> int:
        return self.posted.get(key, 0) - self.reserved.get(key, 0)

    def add(self, book: dict, key: tuple[str, str], amount: int) -> None:
        book[key] = book.get(key, 0) + amount


def players_in_ledger(wallet) -> dict[tuple[str, str], tuple[int, int]]:
    return {
        (account.removeprefix("player:"), currency): values
        for (account, currency), values in wallet.accounts().items()
        if account.startswith("player:")
    }


def expected_players(model: Model) -> dict[tuple[str, str], tuple[int, int]]:
    keys = set(model.posted) | set(model.reserved)
    return {k: (model.posted.get(k, 0), model.reserved.get(k, 0)) for k in keys}


@settings(max_examples=75, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(operations)
def test_random_sessions_conserve_money_and_match_the_model(ops):
    wallet = make_wallet("sqlite://")
    model = Model()
    sent = []
    try:
        for op in [*FUNDING, *ops]:
            before = wallet.snapshot()
            before_players = players_in_ledger(wallet)
            no_op = apply(wallet, model, sent, op)
            after_players = players_in_ledger(wallet)

            report = wallet.check()
            assert report.ok, report.problems()
            # Keys missing from the ledger are accounts never touched: zero in the model too.
            assert {k: v for k, v in after_players.items() if v != (0, 0)} == {
                k: v for k, v in expected_players(model).items() if v != (0, 0)
            }
            if no_op:
                assert wallet.snapshot() == before, op
            if op[0] != "void":
                for key, (posted, reserved) in after_players.items():
                    old_posted, old_reserved = before_players.get(key, (0, 0))
                    available, old_available = posted - reserved, old_posted - old_reserved
                    assert available >= 0 or available >= old_available, (op, key)
    finally:
        wallet.engine.dispose()


def apply(wallet, model: Model, sent: list, op) -> bool:
    """Apply `op` to the wallet and the model; True when the wallet must not change at all."""
    kind = op[0]
    if kind in ("top_up", "deposit"):
        _, player, amount, n = op
        currency = "PLAY" if kind == "top_up" else "USD"
        tid = f"{kind}-{n}"
        if (kind, player, tid) in model.credits:
            if model.credits[(kind, player, tid)] != amount:
                try:
                    getattr(wallet.app, kind)(player, amount, currency, tid)
                except TransferIdReused:
                    return True
                raise AssertionError("a reused id with another amount was accepted")
            getattr(wallet.app, kind)(player, amount, currency, tid)
            return True
        getattr(wallet.app, kind)(player, amount, currency, tid)
        model.credits[(kind, player, tid)] = amount
        model.add(model.posted, (player, currency), amount)
        return False

    if kind == "reserve":
        _, player, round_id, amount, n, currency = op
        tid = f"stake-{n}"
        call = lambda: wallet.app.reserve_stakes(tid, player, round_id, amount, currency, {"ante": amount})  # noqa: E731
        if tid in model.stakes:
            if model.stakes[tid] != (player, round_id, amount, currency):
                expect(call, TransferIdReused)
            elif model.rounds[round_id].released:
                expect(call, RoundClosed)  # a released reservation is never handed back as held
            else:
                call()
            return True
        round_ = model.rounds.get(round_id)
        if round_ is not None and round_.status != "open":
            return expect(call, RoundClosed)
        if round_ is not None and (round_.player, round_.currency) != (player, currency):
            return expect(call, RoundMismatch)
        key = (player, currency)
        if model.available(key) < amount:
            return expect(call, InsufficientFunds)
        note("stake reserved")
        reply = call()
        assert (reply.available_before, reply.available_after) == (model.available(key), model.available(key) - amount)
        model.stakes[tid] = (player, round_id, amount, currency)
        model.rounds.setdefault(round_id, ModelRound(player, currency)).stakes.append(amount)
        model.add(model.reserved, key, amount)
        return False

    if kind == "settle":
        _, k, hundredths = op
        round_id = pick_round(model, k)
        round_ = model.rounds.get(round_id)
        stakes = round_.stakes if round_ else [100]
        results = {f"bet{i}": (s, s * hundredths[i % len(hundredths)] // 100) for i, s in enumerate(stakes)}
        event = settled(round_id, results)
        sent.append(event)
        wallet.consumer.handle(event)
        if round_ is None or round_.status != "open":
            return True
        note("round settled")
        key, total = (round_.player, round_.currency), sum(stakes)
        round_.returned = sum(r for _, r in results.values())
        round_.status = "settled"
        model.add(model.reserved, key, -total)
        model.add(model.posted, key, round_.returned - total)
        return False

    if kind == "void":
        round_id = pick_round(model, op[1])
        round_ = model.rounds.get(round_id)
        key = (round_.player, round_.currency) if round_ else None
        posted_before = players_in_ledger(wallet).get(key, (0, 0))[0] if key else None
        event = voided(round_id)
        sent.append(event)
        wallet.consumer.handle(event)
        if round_ is None or round_.status == "voided":
            return True
        total = sum(round_.stakes)
        note(f"void of a round {round_.status}")
        if round_.status == "open":
            model.add(model.reserved, key, -total)
            round_.released = True
        else:
            model.add(model.posted, key, total - round_.returned)
            # The void restores the player's balance exactly: as if the round never happened.
            assert players_in_ledger(wallet)[key][0] == posted_before + total - round_.returned
        round_.status = "voided"
        return False

    if kind == "redeliver":
        if not sent:
            return True
        assert wallet.consumer.handle(sent[op[1] % len(sent)]) is False
        return True

    raise AssertionError(op)


def pick_round(model: Model, k: int) -> str:
    staked = list(reversed(model.rounds))
    return staked[k] if k < len(staked) else f"ghost-{k}"


def expect(call, error) -> bool:
    try:
        call()
    except error:
        return True
    raise AssertionError(f"expected {error.__name__}")
