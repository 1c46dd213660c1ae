"""What a player is shown about a round that has ended is the settled truth the moment the round ends
(docs/design.md, "What a player sees"), with the wallet's and the commission service's consumers 3 s
behind the log (CROUPIER_FAULT_CONSUMER_LAG_S): distributed, at a war-p2p table with a player in the
dealer's seat, and at a house table whose next bet is placed before the bus has settled the last. Nothing here waits for the bus: every figure is read right after the call that ended the
round, and the dealer is judged for the next round on the figures that round left."""

from __future__ import annotations

import grpc
import pytest

from croupier.v1 import table_pb2
from tests.e2e.conftest import start_distributed
from tests.e2e.test_player_dealer import FUNDS, TABLE, half_up_commission, join, play_round, seat_status

pytestmark = pytest.mark.e2e

LAG_S = "3"
DEALER_MIN_POINTS = 200  # table type I
HOUSE_TABLE = "casino-war-play"


@pytest.fixture(scope="module")
def lagging(tmp_path_factory):  # noqa: ANN001, ANN201
    lag = {"CROUPIER_FAULT_CONSUMER_LAG_S": LAG_S}
    casino = start_distributed(tmp_path_factory.mktemp("lagging"), service_env={"wallet": lag, "commission": lag})
    yield casino
    casino.close()


def dealer_with_points(casino, rounds: int, nickname: str):  # noqa: ANN001, ANN201
    """A new player who bets `rounds` antes of 100.00 against the house and then sits as dealer at once:
    the points of those rounds count the moment they end. (dealer, dealer's seat, points, balance)."""
    dealer = casino.player()
    dealer.top_up(FUNDS)
    seat = dealer.seat(TABLE)
    views = [play_round(dealer, seat, 10_000) for _ in range(rounds)]
    dealer.call(dealer.tables.LeaveTable, table_pb2.LeaveTableRequest(seat_id=seat))
    points = sum(v.total_staked // 100 for v in views)
    balance = FUNDS + sum(r.net for v in views for r in v.results)
    joined = join(dealer, "dealer", nickname, auto_confirm=True)
    assert (joined.status.dealer_points, joined.status.balance) == (points, balance)
    return dealer, joined.seat_id, points, balance


def test_a_player_dealers_figures_are_exact_the_moment_each_round_ends(lagging) -> None:  # noqa: ANN001
    dealer, dealer_seat, points, dealer_balance = dealer_with_points(lagging, 9, "Dee")
    player = lagging.player()
    player.top_up(FUNDS)
    seat = join(player, nickname="Pat").seat_id
    player_balance, player_points = FUNDS, 0

    for ante in [500, 10_000, 2_500, 600, 10_000, 5_000]:
        view = play_round(player, seat, ante)
        net = sum(r.net for r in view.results)
        commission = half_up_commission(view.total_staked)
        player_balance += net
        dealer_balance += -net - commission
        player_points += view.total_staked // 100
        points = max(0, points - view.total_staked // 100)

        mine, theirs = seat_status(dealer, dealer_seat), seat_status(player, seat)  # at once: no waiting
        assert (mine.role, mine.dealer_points, mine.balance) == ("dealer", points, dealer_balance)
        assert (mine.commission_paid_last_round, mine.last_round_result) == (commission, -net - commission)
        assert (theirs.balance, theirs.dealer_points, theirs.last_round_result) == (player_balance, player_points, net)
        assert theirs.opponent_nickname == "Dee"  # the dealer was judged on these figures, and kept the seat


def test_a_bet_right_after_the_deal_is_judged_on_the_points_that_deal_left(lagging) -> None:  # noqa: ANN001
    dealer, dealer_seat, points, _ = dealer_with_points(lagging, 2, "Dot")
    player = lagging.player()
    player.top_up(FUNDS)
    seat = join(player, nickname="Sam").seat_id

    while points >= DEALER_MIN_POINTS:
        # The ante that takes the dealer to the minimum or just below it (a unit bet costs them a point).
        ante = min(10_000, max(200, (points - DEALER_MIN_POINTS + 1) * 100))
        view = play_round(player, seat, ante)
        points = max(0, points - view.total_staked // 100)
        if points >= DEALER_MIN_POINTS:
            continue
        with pytest.raises(grpc.RpcError) as refused:  # sent right after the settling Deal: the consumers are 3 s behind
            player.place(seat, {"ante": 200})
        assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert "no longer qualifies to deal" in refused.value.details()
    assert seat_status(player, seat).opponent_nickname == "house"
    with pytest.raises(grpc.RpcError) as left:
        seat_status(dealer, dealer_seat)
    assert "fell below the table's minimum for a dealer" in left.value.details()


def test_at_a_house_table_each_round_opens_on_the_balance_the_last_one_left(lagging) -> None:  # noqa: ANN001
    player = lagging.player()
    player.top_up(FUNDS)
    seat = player.seat(HOUSE_TABLE)
    balance = FUNDS
    for ante in [1_000, 2_500, 500, 5_000, 1_000]:  # each bet sent right after the last Deal: the wallet's consumer is 3 s behind
        view = play_round(player, seat, ante)
        assert view.balance_before == balance, "the round opened on a balance without the last round's return"
        balance += sum(r.net for r in view.results)
        assert view.balance_after == balance
    assert seat_status(player, seat).balance == balance
