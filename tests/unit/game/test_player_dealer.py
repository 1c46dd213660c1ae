"""war-p2p with a player in the dealer's seat (docs/rules.md §2), through the application layer with fakes:
eligibility, pairing, confirmation, the bet cap, the seed's $300 example and the disconnection rules."""

from __future__ import annotations

import pytest

from croupier_platform.errors import FailedPrecondition, InvalidArgument
from croupier_rules.games.war_p2p import dealer_cover, largest_commission, largest_covered_ante
from croupier_rules.table_config import table_for
from tests.refusals import raises_reason

from .conftest import ALICE, BOB, Game

TABLE = "war-p2p-iii-usd"  # docs/rules.md: a dealer needs 800 points and $420 here; antes $25-$350
TABLE_III = table_for("war-p2p", {"table_type": "III", "dealer": "player"})


def sit_dealer(game: Game, auto_confirm: bool = False, points: int = 800) -> str:
    game.points.points[("bob", "USD")] = points
    seat, _ = game.run(game.seats.join_table(BOB, TABLE, "dealer", "Bobby", auto_confirm))
    return seat.seat_id


def sit_player(game: Game) -> str:
    seat, _ = game.run(game.seats.join_table(ALICE, TABLE, "player", "Al"))
    return seat.seat_id


def status(game: Game, who, seat_id: str):  # noqa: ANN001, ANN201
    return game.run(game.seats.seat_status(who, seat_id))


def test_a_dealer_needs_the_tables_points_and_balance(game: Game) -> None:
    game.points.points[("bob", "USD")] = 799
    with raises_reason("DEALER_NOT_QUALIFIED", FailedPrecondition, match=r"800 dealer points \(you have 799\)"):
        game.run(game.seats.join_table(BOB, TABLE, "dealer"))
    game.points.points[("bob", "USD")] = 800
    game.wallet.balances[("bob", "USD")] = 41_999
    with raises_reason("DEALER_NOT_QUALIFIED", FailedPrecondition, match=r"a balance of 420.00 USD \(you have 419.99 USD\)"):
        game.run(game.seats.join_table(BOB, TABLE, "dealer"))
    game.wallet.balances[("bob", "USD")] = 42_000
    seat, _ = game.run(game.seats.join_table(BOB, TABLE, "dealer"))
    assert seat.role == "dealer"
    # Points in play money open no real-money seat, and only war-p2p tables take a player as dealer.
    with raises_reason("DEALER_NOT_QUALIFIED", FailedPrecondition, match="dealer points"):
        game.run(game.seats.join_table(BOB, "war-p2p-iii-play", "dealer"))
    with raises_reason("INVALID_FIELD", InvalidArgument, match="only at war-p2p"):
        game.run(game.seats.join_table(BOB, "casino-war-usd", "dealer"))


def test_players_and_dealers_of_a_table_are_paired_longest_waiting_first(game: Game) -> None:
    player_seat = sit_player(game)
    assert status(game, ALICE, player_seat).opponent_nickname == "house"  # nobody deals to Alice yet
    dealer_seat = sit_dealer(game)
    mine, theirs = status(game, ALICE, player_seat), status(game, BOB, dealer_seat)
    assert (mine.role, mine.opponent_nickname, mine.opponent_seat_id) == ("player", "Bobby", dealer_seat)
    assert (theirs.role, theirs.opponent_nickname, theirs.opponent_seat_id) == ("dealer", "Al", player_seat)
    # Another table type is another table: nobody there is paired with Bob.
    other, _ = game.run(game.seats.join_table(ALICE, "war-p2p-ii-usd"))
    assert status(game, ALICE, other.seat_id).opponent_nickname == "house"


def test_seats_joined_without_a_nickname_show_their_role_never_the_player_id(game: Game) -> None:
    game.points.points[("bob", "USD")] = 800
    dealer_seat = game.run(game.seats.join_table(BOB, TABLE, "dealer"))[0].seat_id
    player_seat = game.run(game.seats.join_table(ALICE, TABLE))[0].seat_id
    mine, theirs = status(game, ALICE, player_seat), status(game, BOB, dealer_seat)
    assert (mine.nickname, mine.opponent_nickname, theirs.opponent_nickname) == ("player", "dealer", "player")
    game.run(game.seats.confirm_round(BOB, dealer_seat))
    game.shuffler.stack("Kc", "2d")
    round_id = game.run(game.play.place_bets(ALICE, player_seat, {"ante": 2500}, "k1", "")).round_id
    dealers_view = game.run(game.play.get_round(BOB, round_id))
    assert "alice" not in str(dealers_view), "the dealer knows the player by nickname only"
    assert '"player_nickname": "player"' in dealers_view.steps[0].payload_json.replace('":"', '": "')


@pytest.mark.parametrize("nickname", [
    "house", "House", "HOUSE", "dealer", "player",  # the server's own names
    "ｈｏｕｓｅ", "Ａｌ", "Bo\u0301b",  # full-width and combining look-alikes of other names
    "<script>alert(1)</script>", "Al\u200bice", "Al\nice", "a" * 41, "x;DROP",
])  # fmt: skip
def test_a_nickname_that_impersonates_or_carries_markup_is_refused(game: Game, nickname: str) -> None:
    with raises_reason("INVALID_FIELD", InvalidArgument, match="nickname"):
        game.run(game.seats.join_table(ALICE, TABLE, "player", nickname))


@pytest.mark.parametrize("nickname", ["Al", "Jean-Luc O.", "Zoë", "Ли", "r2_d2"])
def test_plain_nicknames_in_any_script_are_taken(game: Game, nickname: str) -> None:
    seat, _ = game.run(game.seats.join_table(ALICE, TABLE, "player", f"  {nickname} "))
    assert status(game, ALICE, seat.seat_id).nickname == nickname


def test_the_dealer_confirms_each_round_unless_auto_confirm_is_on(game: Game) -> None:
    dealer_seat, player_seat = sit_dealer(game), sit_player(game)
    with raises_reason("DEALER_NOT_CONFIRMED", FailedPrecondition, match="Bobby has not confirmed the next round"):
        game.run(game.play.place_bets(ALICE, player_seat, {"ante": 2500}, "k1", ""))
    assert game.wallet.available("alice") == 1_000_000  # nothing moved
    game.run(game.seats.confirm_round(BOB, dealer_seat))
    game.shuffler.stack("Kc", "2d")
    view = game.run(game.play.deal(ALICE, game.run(game.play.place_bets(ALICE, player_seat, {"ante": 2500}, "k1", "")).round_id))
    assert view.phase == "settled"
    with raises_reason("DEALER_NOT_CONFIRMED", FailedPrecondition, match="not confirmed"):  # the confirmation was used up
        game.run(game.play.place_bets(ALICE, player_seat, {"ante": 2500}, "k2", ""))
    game.run(game.seats.confirm_round(BOB, dealer_seat, auto_confirm=True))
    for key in ("k2", "k3"):
        game.shuffler.stack("Kc", "2d")
        game.run(game.play.deal(ALICE, game.run(game.play.place_bets(ALICE, player_seat, {"ante": 2500}, key, "")).round_id))
    with raises_reason("WRONG_SEAT_ROLE", FailedPrecondition, match="only a dealer confirms"):
        game.run(game.seats.confirm_round(ALICE, player_seat))
    with raises_reason("WRONG_SEAT_ROLE", FailedPrecondition, match="the player bets, the dealer confirms"):
        game.run(game.play.place_bets(BOB, dealer_seat, {"ante": 2500}, "k9", ""))


def test_a_confirmation_retried_after_a_round_used_it_confirms_nothing_more(game: Game) -> None:
    dealer_seat, player_seat = sit_dealer(game), sit_player(game)
    game.run(game.seats.confirm_round(BOB, dealer_seat, after_round_id=""))  # before the first round: seen ""
    game.shuffler.stack("Kc", "2d")
    first = game.run(game.play.place_bets(ALICE, player_seat, {"ante": 2500}, "k1", ""))
    game.run(game.play.deal(ALICE, first.round_id))
    # The reply was lost; the dealer retries with what it had seen: the round since used it up.
    game.run(game.seats.confirm_round(BOB, dealer_seat, after_round_id=""))
    with raises_reason("DEALER_NOT_CONFIRMED", FailedPrecondition, match="not confirmed"):
        game.run(game.play.place_bets(ALICE, player_seat, {"ante": 2500}, "k2", ""))
    # Confirming after having seen that round confirms the next one.
    game.run(game.seats.confirm_round(BOB, dealer_seat, after_round_id=first.round_id))
    game.shuffler.stack("Kc", "2d")
    assert game.run(game.play.place_bets(ALICE, player_seat, {"ante": 2500}, "k2", "")).phase == "dealing"


def test_the_bet_cap_is_whole_chips_and_betting_it_is_accepted(game: Game) -> None:
    dealer_seat = sit_dealer(game, auto_confirm=True)
    player_seat = sit_player(game)
    checks = game.dealers  # the cap as GetSeatStatus and PlaceBets compute it
    exact = largest_covered_ante(22_000, TABLE_III)  # 21256: not a whole number of $1 chips
    game.wallet.balances[("bob", "USD")] = 22_000
    cap = game.run(checks.largest_ante("bob", TABLE_III, "USD"))
    assert cap == exact - exact % TABLE_III.chip_unit == 21_200 and dealer_cover(cap, TABLE_III) <= 22_000
    game.wallet.balances[("bob", "USD")] = 1_000_000
    max_ante = status(game, ALICE, player_seat).max_ante
    assert max_ante % TABLE_III.chip_unit == 0
    view = game.run(game.play.place_bets(ALICE, player_seat, {"ante": max_ante}, "k1", ""))  # the cap offered is taken
    assert view.bets == {"ante": max_ante} and status(game, BOB, dealer_seat).opponent_nickname == "Al"


def test_a_dealer_who_falls_short_leaves_before_the_next_round_and_the_seat_status_says_why(game: Game) -> None:
    dealer_seat = sit_dealer(game, auto_confirm=True)
    player_seat = sit_player(game)
    game.points.points[("bob", "USD")] = 268  # e.g. lost points dealing: table III needs 800
    with raises_reason("DEALER_NOT_QUALIFIED", FailedPrecondition, match="no longer qualifies to deal .*points.*place the bets again"):
        game.run(game.play.place_bets(ALICE, player_seat, {"ante": 20_000}, "k1", ""))
    assert game.wallet.available("alice") == 1_000_000 and game.wallet.available("bob") == 1_000_000  # nothing staked
    with raises_reason("DEALER_NOT_QUALIFIED", FailedPrecondition, match="you left dealer seat .*dealer points fell below"):
        status(game, BOB, dealer_seat)
    game.run(game.seats.leave_table(BOB, dealer_seat))  # leaving it again is OK
    assert status(game, ALICE, player_seat).opponent_nickname == "house"
    view = game.run(game.play.place_bets(ALICE, player_seat, {"ante": 20_000}, "k1", ""))  # now against the house
    assert view.phase == "dealing" and view.role == "" and game.wallet.available("bob") == 1_000_000


def test_the_seeds_300_example_the_dealer_gains_294_75_after_commission(game: Game) -> None:
    sit_dealer(game, auto_confirm=True)
    player_seat = sit_player(game)
    game.shuffler.stack("9c", "Qd")
    view = game.run(game.play.place_bets(ALICE, player_seat, {"ante": 30_000}, "k1", ""))
    assert game.wallet.available("bob") == 1_000_000 - dealer_cover(30_000, TABLE_III)  # $310.50 reserved
    view = game.run(game.play.deal(ALICE, view.round_id))
    assert (view.phase, view.total_returned, view.commission, view.dealer_net) == ("settled", 0, 525, 29_475)
    game.pump()
    assert game.wallet.available("alice") == 1_000_000 - 30_000
    # The wallet pays the dealer the table's $300 and holds the $10.50 until the commission service charges the $5.25.
    assert largest_commission(30_000, TABLE_III) == 1050
    assert game.wallet.available("bob") == 1_000_000 + 30_000 - 1050
    assert game.wallet.charge_commission(view.round_id, view.commission)
    assert game.wallet.available("bob") == 1_000_000 + 29_475
    seen_by_dealer = status(game, BOB, game.run(game.seats.join_table(BOB, TABLE, "dealer"))[0].seat_id)
    assert (seen_by_dealer.last_round_result, seen_by_dealer.last_round_commission) == (29_475, 525)
    assert status(game, ALICE, player_seat).last_round_result == -30_000
    assert game.run(game.play.get_round(BOB, view.round_id)).round_id == view.round_id  # the dealer sees it


def test_a_player_gone_before_the_deal_gets_the_bet_back(game: Game) -> None:
    sit_dealer(game, auto_confirm=True)
    player_seat = sit_player(game)
    view = game.run(game.play.place_bets(ALICE, player_seat, {"ante": 10_000}, "k1", ""))
    game.run(game.seats.leave_table(ALICE, player_seat))
    game.pump()
    voided = game.run(game.play.get_round(ALICE, view.round_id))
    assert voided.phase == "voided" and "before the deal" in voided.void_reason
    assert game.wallet.available("alice") == 1_000_000 and game.wallet.available("bob") == 1_000_000


def test_a_player_with_a_tie_pending_may_not_leave_the_keeper_surrenders_for_them(game: Game) -> None:
    sit_dealer(game, auto_confirm=True)
    player_seat = sit_player(game)
    game.shuffler.stack("7c", "7d")
    view = game.run(game.play.deal(ALICE, game.run(game.play.place_bets(ALICE, player_seat, {"ante": 10_000}, "k1", "")).round_id))
    assert view.phase == "deciding"
    with raises_reason("ROUND_IN_PROGRESS", FailedPrecondition, match="finish it before leaving"):
        game.run(game.seats.leave_table(ALICE, player_seat))
    # (The keeper's default action at war-p2p is surrender: test_keeper covers the timeout itself.)
    assert TABLE_III.default_action == "surrender"


def test_a_dealer_gone_after_confirming_the_round_goes_on(game: Game) -> None:
    dealer_seat = sit_dealer(game)
    player_seat = sit_player(game)
    game.run(game.seats.confirm_round(BOB, dealer_seat))
    game.shuffler.stack("Ac", "2d")
    view = game.run(game.play.place_bets(ALICE, player_seat, {"ante": 10_000}, "k1", ""))
    game.run(game.seats.leave_table(BOB, dealer_seat))
    view = game.run(game.play.deal(ALICE, view.round_id))
    assert view.phase == "settled" and view.total_returned == 20_000 and view.dealer_net == -10_000 - 175
    game.pump()
    game.wallet.charge_commission(view.round_id, view.commission)
    assert game.wallet.available("bob") == 1_000_000 - 10_000 - 175
    assert status(game, ALICE, player_seat).opponent_nickname == "house"  # the next round is the house's


def test_a_player_who_leaves_and_comes_back_is_paired_with_the_same_waiting_dealer(game: Game) -> None:
    dealer_seat = sit_dealer(game, auto_confirm=True)
    game.run(game.seats.leave_table(ALICE, sit_player(game)))
    assert status(game, BOB, dealer_seat).opponent_nickname == ""  # waiting
    player_seat = sit_player(game)
    assert status(game, ALICE, player_seat).opponent_nickname == "Bobby"
    assert status(game, BOB, dealer_seat).opponent_seat_id == player_seat


def test_a_dealer_who_can_no_longer_cover_voids_the_round_and_the_next_bet_fits(game: Game) -> None:
    sit_dealer(game, auto_confirm=True)
    player_seat = sit_player(game)
    real_cap = game.dealers.largest_ante  # the cap read before the dealer's balance fell (a race)

    async def stale_cap(*args):  # noqa: ANN002, ANN202
        return 35_000

    async def stale_eligibility(*args):  # noqa: ANN002, ANN202 - read before the balance fell, too
        return {}

    game.dealers.largest_ante = stale_cap  # type: ignore[method-assign]
    game.dealers.missing = stale_eligibility  # type: ignore[method-assign]
    game.wallet.balances[("bob", "USD")] = 5_000
    with raises_reason("ROUND_VOIDED", FailedPrecondition, match="can no longer cover this bet"):
        game.run(game.play.place_bets(ALICE, player_seat, {"ante": 10_000}, "k1", ""))
    game.pump()
    assert game.wallet.available("alice") == 1_000_000
    game.dealers.largest_ante = real_cap  # type: ignore[method-assign]
    view = game.run(game.play.place_bets(ALICE, player_seat, {"ante": 2_500}, "k2", ""))
    assert view.phase == "dealing"


@pytest.mark.parametrize("store", ["game", "sql_game"])
def test_a_dealers_history_lists_the_rounds_dealt_beside_those_played(store: str, request: pytest.FixtureRequest) -> None:
    game: Game = request.getfixturevalue(store)
    sit_dealer(game, auto_confirm=True)
    player_seat = sit_player(game)
    game.shuffler.stack("9c", "Qd")
    dealt = game.run(game.play.deal(ALICE, game.run(game.play.place_bets(ALICE, player_seat, {"ante": 5000}, "k1", "")).round_id))
    game.shuffler.stack("9c", "Qd")
    played_seat = game.run(game.seats.join_table(BOB, "casino-war-usd"))[0].seat_id
    played = game.run(game.play.deal(BOB, game.run(game.play.place_bets(BOB, played_seat, {"ante": 500}, "k2", "")).round_id))
    history = game.run(game.play.list_rounds(BOB, 10)).items
    assert [(v.round_id, v.role) for v in history] == [(played.round_id, ""), (dealt.round_id, "dealer")]
    assert history[1].balance_before == 0  # the dealer's view: the player's money stays the player's
    assert [v.round_id for v in game.run(game.play.list_rounds(ALICE, 10)).items] == [dealt.round_id]
