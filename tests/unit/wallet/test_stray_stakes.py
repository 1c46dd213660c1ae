"""Stakes reserved for a step the game never recorded (the losing side of a decision race, or a
crash between reserving and appending): released by ReleaseStakes, idempotent by transaction id,
and by the round's settlement, which claims stakes per bet; the game's Wallet port, as the fake and
as the gRPC adapter against this wallet, keeps the same contract."""

from __future__ import annotations

from croupier_game.adapters.grpc_clients import GrpcStakes
from croupier_platform.errors import FailedPrecondition
from croupier_wallet.domain.errors import RoundMismatch
from tests.refusals import raises_reason

from ..game.fakes import FakeWallet
from .helpers import Wallet, settled, voided
from .test_grpc_service import Harness, run

PLAYER = "ann"


def reserve_round(wallet: Wallet, round_id: str) -> None:
    wallet.app.top_up(PLAYER, 10_000, "PLAY", f"top-up-{round_id}")
    wallet.app.reserve_stakes(f"{round_id}:stakes:1", PLAYER, round_id, 500, "PLAY", {"ante": 500})


def available(wallet: Wallet) -> tuple[int, int]:
    """The player's (balance, reserved)."""
    return wallet.accounts()[(f"player:{PLAYER}", "PLAY")]


def test_a_settlement_releases_a_stake_it_does_not_claim_and_posts_the_rest(wallet: Wallet) -> None:
    reserve_round(wallet, "r1")
    # The call lost to a fold: its stake was reserved, never recorded (and never released: a crash).
    wallet.app.reserve_stakes("r1:stakes:4:ante:call", PLAYER, "r1", 1_000, "PLAY", {"call": 1_000})
    assert available(wallet) == (10_000, 1_500)
    assert wallet.consumer.handle(settled("r1", {"ante": (500, 0)}))
    assert available(wallet) == (9_500, 0)  # the ante lost, the call released: nothing reserved
    assert wallet.check().ok
    kinds = {t.transaction_id: t.status for t in wallet.app.round_transactions("r1")[1]}
    assert kinds["stake:r1:stakes:4:ante:call"] == "voided" and kinds["stake:r1:stakes:1"] == "posted"


def test_a_settlement_that_claims_every_stake_posts_them_all(wallet: Wallet) -> None:
    reserve_round(wallet, "r1")
    wallet.app.reserve_stakes("r1:stakes:4:ante:call", PLAYER, "r1", 1_000, "PLAY", {"call": 1_000})
    assert wallet.consumer.handle(settled("r1", {"ante": (500, 1_000), "call": (1_000, 2_000)}))
    assert available(wallet) == (10_000 - 1_500 + 3_000, 0)
    assert wallet.check().ok


def test_a_settlement_that_disagrees_with_the_stakes_still_moves_nothing(wallet: Wallet) -> None:
    reserve_round(wallet, "r1")
    before = wallet.snapshot()
    with raises_reason("ROUND_MISMATCH", RoundMismatch, match="settles stakes of 700 but 500"):
        wallet.consumer.handle(settled("r1", {"ante": (700, 0)}))
    assert wallet.snapshot() == before


def test_a_void_releases_every_pending_stake_claimed_or_not(wallet: Wallet) -> None:
    reserve_round(wallet, "r1")
    wallet.app.reserve_stakes("r1:stakes:4:ante:call", PLAYER, "r1", 1_000, "PLAY", {"call": 1_000})
    assert wallet.consumer.handle(voided("r1"))
    assert available(wallet) == (10_000, 0) and wallet.check().ok


def test_release_stakes_is_idempotent_and_never_releases_a_posted_stake(wallet: Wallet) -> None:
    reserve_round(wallet, "r1")
    wallet.app.reserve_stakes("r1:stakes:4:ante:call", PLAYER, "r1", 1_000, "PLAY", {"call": 1_000})
    assert wallet.app.release_stakes("r1:stakes:4:ante:call", "r1") is True
    assert wallet.app.release_stakes("r1:stakes:4:ante:call", "r1") is False  # a repeat: nothing more
    assert wallet.app.release_stakes("never-reserved", "r1") is False
    assert available(wallet) == (10_000, 500)
    with raises_reason("ROUND_MISMATCH", RoundMismatch, match="of round 'r1', not 'r2'"):
        reserve_round(wallet, "r2")
        wallet.app.release_stakes("r1:stakes:1", "r2")
    assert wallet.consumer.handle(settled("r1", {"ante": (500, 0)}))
    with raises_reason("ROUND_MISMATCH", RoundMismatch, match="is posted"):
        wallet.app.release_stakes("r1:stakes:1", "r1")
    assert wallet.check().ok


# ---------------------------------------------------------------- the game's Wallet port's contract


async def release_contract(stakes, player: str, currency: str) -> None:  # noqa: ANN001
    """What the game relies on: released once, a repeat and an unknown id say False, a posted stake is refused."""
    await stakes.reserve_stakes("c1:stakes:1", player, "c1", 500, currency, {"ante": 500})
    await stakes.reserve_stakes("c1:stakes:4:ante:call", player, "c1", 1_000, currency, {"call": 1_000})
    before = await stakes.available_balance(player, currency)
    assert await stakes.release_stakes("c1:stakes:4:ante:call", "c1") is True
    assert await stakes.available_balance(player, currency) == before + 1_000
    assert await stakes.release_stakes("c1:stakes:4:ante:call", "c1") is False
    assert await stakes.release_stakes("c1:stakes:9:ante:call", "c1") is False
    assert await stakes.available_balance(player, currency) == before + 1_000
    # A released reservation is never handed back as if it held: a retry must not open a round on it.
    with raises_reason("ROUND_CLOSED", FailedPrecondition, match="was released"):
        await stakes.reserve_stakes("c1:stakes:4:ante:call", player, "c1", 1_000, currency, {"call": 1_000})
    assert await stakes.available_balance(player, currency) == before + 1_000


def test_the_fake_keeps_the_contract() -> None:
    import asyncio

    fake = FakeWallet()
    fake.fund("alice", 10_000, "PLAY")
    asyncio.run(release_contract(fake, "alice", "PLAY"))
    fake.entries[0].status = "posted"
    with raises_reason("ROUND_MISMATCH", FailedPrecondition):
        asyncio.run(fake.release_stakes("c1:stakes:1", "c1"))


def test_the_grpc_adapter_keeps_the_contract(tmp_path) -> None:  # noqa: ANN001
    async def scenario(h: Harness) -> None:
        await h.top_up("alice", 10_000, "t1")
        stakes = GrpcStakes(h.channel, h.tokens["game"])
        await release_contract(stakes, "alice", "PLAY")

    run(tmp_path, scenario)
