"""The ledger of war-p2p rounds with a player-dealer: the dealer's cover and commission hold, the
settlement between the two players, the commission charged once, and voids at every step."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from croupier_wallet.domain.errors import InsufficientFunds, RoundMismatch
from tests.refusals import raises_reason

from .helpers import Wallet, make_wallet, settled, voided

FUNDS = 1_000_000


def fund(wallet: Wallet, *players: str) -> None:
    for player in players:
        wallet.app.deposit(player, FUNDS, "USD", "funding")


def balance(wallet: Wallet, player: str) -> int:
    return next(b.available for b in wallet.app.balances(player) if b.currency == "USD")


def open_round(wallet: Wallet, round_id: str, ante: int, hold: int) -> None:
    wallet.app.reserve_stakes(f"{round_id}:stakes:1", "alice", round_id, ante, "USD", {"ante": ante})
    wallet.app.reserve_cover(f"{round_id}:cover", "bob", round_id, ante, hold, "USD")


def test_the_seeds_300_example_in_the_ledger(wallet: Wallet) -> None:
    fund(wallet, "alice", "bob")
    open_round(wallet, "r1", 30_000, 1_050)
    assert balance(wallet, "bob") == FUNDS - 31_050  # cover $300 and a $10.50 hold
    wallet.consumer.handle(settled("r1", {"ante": (30_000, 0)}))
    assert balance(wallet, "bob") == FUNDS + 30_000 - 1_050  # the hold waits for the commission service
    charged = wallet.app.charge_commission("r1", 525)
    assert charged is not None and (charged.kind, charged.amount) == ("commission", -525)
    assert wallet.app.charge_commission("r1", 525) == charged  # a redelivered settlement charges once
    assert balance(wallet, "bob") == FUNDS + 29_475 and balance(wallet, "alice") == FUNDS - 30_000
    assert wallet.accounts()[("house", "USD")] == (525, 0)
    assert wallet.check().ok


def test_a_void_after_the_charge_restores_both_players_and_the_house(wallet: Wallet) -> None:
    fund(wallet, "alice", "bob")
    open_round(wallet, "r1", 10_000, 350)
    wallet.consumer.handle(settled("r1", {"ante": (10_000, 20_000)}))  # the player wins
    wallet.app.charge_commission("r1", 175)
    assert balance(wallet, "bob") == FUNDS - 10_000 - 175
    wallet.consumer.handle(voided("r1"))
    assert (balance(wallet, "alice"), balance(wallet, "bob")) == (FUNDS, FUNDS)
    assert wallet.accounts()[("house", "USD")] == (0, 0)
    assert wallet.app.charge_commission("r1", 175) is not None  # the charge stays recorded (and reversed)
    assert wallet.check().ok


def test_nothing_is_charged_for_a_round_voided_before_the_charge(wallet: Wallet) -> None:
    fund(wallet, "alice", "bob")
    open_round(wallet, "r1", 10_000, 350)
    wallet.consumer.handle(voided("r1"))
    assert wallet.app.charge_commission("r1", 175) is None
    assert (balance(wallet, "alice"), balance(wallet, "bob")) == (FUNDS, FUNDS)


def test_a_dealer_who_cannot_cover_is_refused_and_nothing_moves(wallet: Wallet) -> None:
    fund(wallet, "alice")
    wallet.app.deposit("bob", 10_000, "USD", "funding")
    wallet.app.reserve_stakes("r1:stakes:1", "alice", "r1", 10_000, "USD", {"ante": 10_000})
    before = wallet.snapshot()
    with raises_reason("INSUFFICIENT_FUNDS", InsufficientFunds, match="cannot cover the dealer's cover and commission of 103.50 "):
        wallet.app.reserve_cover("r1:cover", "bob", "r1", 10_000, 350, "USD")
    assert wallet.snapshot() == before


def test_a_settlement_beyond_stakes_and_cover_is_refused_and_nothing_moves(wallet: Wallet) -> None:
    fund(wallet, "alice", "bob")
    open_round(wallet, "r1", 10_000, 350)
    before = wallet.snapshot()
    with raises_reason("ROUND_MISMATCH", RoundMismatch, match="hold only 20000"):
        wallet.consumer.handle(settled("r1", {"ante": (10_000, 30_000)}))
    assert wallet.snapshot() == before


# ---------------------------------------------------------------- random sessions

rounds = st.lists(
    st.tuples(
        st.sampled_from([("alice", "bob"), ("bob", "carol"), ("carol", "alice")]),  # (player, dealer)
        st.integers(200, 35_000),  # ante
        st.sampled_from(["lose", "win", "push-and-raise-win", "raise-lose", "surrender"]),
        st.sampled_from(["none", "before-settle", "after-settle", "after-charge"]),  # when it is voided
        st.booleans(),  # redeliver everything
    ),
    min_size=1, max_size=12,
)  # fmt: skip

OUTCOMES = {  # (stakes as multiples of the ante, returned as multiples of the ante)
    "lose": (1, 0), "win": (1, 2), "push-and-raise-win": (2, 3), "raise-lose": (2, 0), "surrender": (1, 0),
}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(rounds)
def test_random_player_dealer_sessions_conserve_money_and_match_a_hand_calculation(session) -> None:  # noqa: ANN001
    wallet = make_wallet("sqlite://")
    try:
        for who in ("alice", "bob", "carol"):
            wallet.app.deposit(who, 10**8, "USD", "funding")
        expected = {"alice": 10**8, "bob": 10**8, "carol": 10**8, "house": 0}
        for n, ((player, dealer), ante, outcome, void_at, redeliver) in enumerate(session):
            rid = f"r{n}"
            stakes, returned = (m * ante for m in OUTCOMES[outcome])
            hold = (2 * ante * 175 + 5_000) // 10_000  # 1.75% of Ante + Raise, half up
            commission = (stakes * 175 + 5_000) // 10_000
            wallet.app.reserve_stakes(f"{rid}:stakes:1", player, rid, ante, "USD", {"ante": ante})
            wallet.app.reserve_cover(f"{rid}:cover", dealer, rid, ante, hold, "USD")
            if stakes > ante:
                wallet.app.reserve_stakes(f"{rid}:stakes:2", player, rid, ante, "USD", {"raise": ante})
            events = []
            if void_at == "before-settle":
                events.append(voided(rid))
            else:
                results = {"ante": (ante, min(returned, ante) if stakes > ante else returned)}
                if stakes > ante:
                    results["raise"] = (ante, returned - results["ante"][1])
                events.append(settled(rid, results))
            for event in events:
                wallet.consumer.handle(event)
            if void_at != "before-settle":
                wallet.app.charge_commission(rid, commission)
                if void_at in ("after-settle", "after-charge"):
                    wallet.consumer.handle(voided(rid, version=7))
            if redeliver:
                for event in events:
                    wallet.consumer.handle(event)
                if void_at != "before-settle":
                    wallet.app.charge_commission(rid, commission)
            if void_at == "none":
                expected[player] += returned - stakes
                expected[dealer] += stakes - returned - commission
                expected["house"] += commission
            report = wallet.check()
            assert report.ok, report.problems()
            assert report.balanced
            for who in ("alice", "bob", "carol"):
                assert balance(wallet, who) == expected[who], (n, who)
            assert wallet.accounts().get(("house", "USD"), (0, 0))[0] == expected["house"]
            assert wallet.accounts().get(("table", "USD"), (0, 0)) == (0, 0)
    finally:
        wallet.engine.dispose()


def test_a_self_excluded_dealer_cannot_cover_a_round(wallet: Wallet) -> None:
    from croupier_wallet.domain.limits import SelfExcluded

    fund(wallet, "alice", "bob")
    wallet.app.limits.set_limits("bob", "", {}, "2099-01-01T00:00:00+00:00", by="bob", at_once=False)
    wallet.app.reserve_stakes("r1:stakes:1", "alice", "r1", 10_000, "USD", {"ante": 10_000})
    before = wallet.snapshot()
    with raises_reason("SELF_EXCLUDED", SelfExcluded):
        wallet.app.reserve_cover("r1:cover", "bob", "r1", 10_000, 350, "USD")
    assert wallet.snapshot() == before


def test_a_zero_commission_releases_the_hold_and_charges_nothing(wallet: Wallet) -> None:
    fund(wallet, "alice", "bob")
    open_round(wallet, "r1", 10_000, 350)
    wallet.consumer.handle(settled("r1", {"ante": (10_000, 0)}))
    assert wallet.app.charge_commission("r1", 0) is None
    assert wallet.app.charge_commission("r1", 0) is None  # again: nothing more
    assert balance(wallet, "bob") == FUNDS + 10_000 and wallet.accounts().get(("house", "USD"), (0, 0)) == (0, 0)
    assert wallet.check().ok
