"""A property of seamless mode (application/seamless.py) over interleavings of the protocol's faults, on the
casino's fake (tests/casino_fake.py): rounds staked, settled (win, loss, push) or voided, with any casino call
failing (5xx, an answer dropped after applying, a duplicate, a hang that lands after its rollback, the casino
down) and relay passes in between. Once the casino answers again and the outbox is sent: each player's casino
balance = start + the net of the rounds the wallet accepted, every debit has exactly one credit or rollback, the
reconciliation equals the casino's ledger line for line, and the ledger balances."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from croupier_platform.errors import Unavailable
from croupier_wallet.application.seamless import CasinoRefused
from tests.casino_fake import FAULTS

from .helpers import settled, voided
from .test_seamless import START, seamless_wallet

PLAYERS = ("alice", "bob")
fault = st.one_of(st.none(), st.tuples(st.sampled_from(FAULTS), st.sampled_from(["", "debit", "credit", "rollback"])))
round_story = st.fixed_dictionaries({
    "player": st.sampled_from(PLAYERS),
    "stakes": st.lists(st.integers(1, 30_000), min_size=1, max_size=3),
    "end": st.sampled_from(["win", "loss", "push", "void", "release_last"]),
    "faults": st.lists(fault, max_size=3),
    "down": st.booleans(),
    "relay_passes": st.integers(0, 2),
    "land_late": st.booleans(),
})  # fmt: skip


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(round_story, min_size=1, max_size=5))
def test_any_interleaving_of_faults_loses_and_doubles_nothing(stories: list[dict]) -> None:
    with tempfile.TemporaryDirectory() as workdir, seamless_wallet(Path(workdir)) as seamless:
        nets = dict.fromkeys(PLAYERS, 0)
        for n, story in enumerate(stories):
            round_id, player = f"r{n}", story["player"]
            for f in story["faults"]:
                if f is not None:
                    seamless.casino.fault(*f)
            seamless.casino.down = story["down"]
            taken: dict[int, int] = {}  # step -> stake the wallet accepted
            for step, stake in enumerate(story["stakes"], 1):
                try:
                    seamless.stake(round_id, player, stake, step=step)
                    taken[step] = stake
                except (CasinoRefused, Unavailable):
                    pass  # refused or not confirmed: nothing taken (a debit without an answer is rolled back)
            seamless.casino.down = False
            last = len(story["stakes"])
            if story["end"] == "release_last" and len(taken) > 1:  # a step the round did not record
                assert seamless.app.release_stakes(f"{round_id}:stakes:{last}", round_id) == (last in taken)
                taken.pop(last, None)
            if taken:
                staked = sum(taken.values())
                returned = {"win": 2 * staked, "loss": 0, "push": staked, "release_last": staked}.get(story["end"])
                if returned is None:
                    seamless.wallet.consumer.handle(voided(round_id))
                else:
                    seamless.wallet.consumer.handle(settled(round_id, {"ante": (staked, returned)}))
                    nets[player] += returned - staked
            for _ in range(story["relay_passes"]):
                seamless.relay_all(passes=1)
            if story["land_late"]:
                seamless.casino.land_late()
        seamless.casino.faults.clear()
        seamless.casino.land_late()
        seamless.relay_all()
        seamless.assert_closed(*nets.items())
        assert all(seamless.casino.balance_of(p, "USD") >= START - 90_000 for p in PLAYERS)
