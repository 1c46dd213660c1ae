"""PlaceBets idempotency and refusals, seats, and who may see what."""

from __future__ import annotations

import asyncio

import pytest
from croupier_platform.errors import FailedPrecondition, InvalidArgument, NotFound, PermissionDenied
from croupier_rules.errors import InvalidInput, RuleError

from croupier_game.domain.idempotency import request_fingerprint
from croupier_game.domain.transactions import bets_stake_id
from tests.refusals import raises_reason

from .conftest import ALICE, BOB, OPERATOR, Game


def next_round(game: Game, seat: str) -> str:
    return game.run(game.seats.seat_status(ALICE, seat)).next_round_id


def test_a_repeated_key_returns_the_same_round_and_reserves_once(game: Game) -> None:
    seat = game.seat("casino-war-usd")
    round_id = next_round(game, seat)
    first = game.run(game.play.place_bets(ALICE, seat, {"ante": 500}, "key-1", ""))
    again = game.run(game.play.place_bets(ALICE, seat, {"ante": 500}, "key-1", ""))
    assert again.round_id == first.round_id == round_id
    assert again.version == first.version == 3
    assert [e.amount for e in game.wallet.reservations(first.round_id)] == [-500]
    assert len(game.shuffler.shoes) == 2  # this round's, and the next one's, committed before its bets
    assert game.wallet.available("alice") == 1_000_000 - 500


def test_a_retry_after_a_crash_before_the_append_reaches_the_same_wallet_transaction(game: Game) -> None:
    seat = game.seat("casino-war-usd")
    round_id = next_round(game, seat)
    # The first attempt reserved and drew the shoe, then "crashed" before appending.
    stakes_id = bets_stake_id(round_id, request_fingerprint("PlaceBets", seat, {"ante": 500}, ""))
    game.run(game.wallet.reserve_stakes(stakes_id, "alice", round_id, 500, "USD", {"ante": 500}))
    game.run(game.shuffler.new_shoe(6, round_id))
    view = game.run(game.play.place_bets(ALICE, seat, {"ante": 500}, "key-1", ""))
    assert view.round_id == round_id
    assert len(game.wallet.reservations(round_id)) == 1 and len(game.shuffler.shoes) == 2  # + the next round's
    assert view.balance_before == 1_000_000


def test_the_wallet_refusal_passes_through_with_nothing_appended(game: Game) -> None:
    seat = game.seat("casino-war-usd")
    game.wallet.balances[("alice", "USD")] = 300
    with raises_reason("INSUFFICIENT_FUNDS", FailedPrecondition, match="cannot cover stakes of 5.00 USD"):
        game.run(game.play.place_bets(ALICE, seat, {"ante": 500}, "key-1", ""))
    with raises_reason("ROUND_NOT_FOUND", NotFound):
        game.run(game.play.get_round(ALICE, next_round(game, seat)))
    assert len(game.shuffler.shoes) == 1  # only the one committed at the seat, before any bet
    game.wallet.fund("alice", 1_000)
    assert game.run(game.play.place_bets(ALICE, seat, {"ante": 500}, "key-1", "")).phase == "dealing"


def test_a_self_excluded_player_takes_no_seat_and_places_no_bet(game: Game) -> None:
    seat = game.seat("casino-war-usd")  # seated before the exclusion
    game.wallet.self_exclusions["alice"] = "2999-01-01T00:00:00.000000+00:00"
    for table, role in (("casino-war-play", "player"), ("casino-war-usd", "player"), ("war-p2p-i-usd", "dealer")):
        with raises_reason("SELF_EXCLUDED", FailedPrecondition, match="self-excluded until 2999-01-01T00:00:00\\+00:00: no seat is taken") as sit:
            game.run(game.seats.join_table(ALICE, table, role))
        assert sit.value.metadata == {"until": "2999-01-01T00:00:00+00:00"}
    with raises_reason("SELF_EXCLUDED", FailedPrecondition, match="self-excluded until 2999-01-01"):
        game.run(game.play.place_bets(ALICE, seat, {"ante": 500}, "key-1", ""))
    assert game.wallet.available("alice") == 1_000_000
    del game.wallet.self_exclusions["alice"]
    assert game.seat("casino-war-play")


def test_rules_refuse_bad_bets_before_any_money_moves(game: Game) -> None:
    seat = game.seat("casino-war-usd")
    for bets, message, reason in (({"ante": 50}, "under the table minimum", "BET_BELOW_TABLE_MIN"),
                                  ({"ante": 60_000}, "over the table maximum", "BET_ABOVE_TABLE_MAX"),
                                  ({"side": 500}, "unknown bet", "INVALID_FIELD"), ({}, "no bet placed", "INVALID_FIELD"),
                                  ({"ante": 550}, "whole number of chips", "INVALID_FIELD")):  # fmt: skip
        with raises_reason(reason, InvalidInput, match=message):
            game.run(game.play.place_bets(ALICE, seat, bets, "key-1", ""))
    assert game.wallet.entries == []


def test_empty_idempotency_key_is_invalid(game: Game) -> None:
    seat = game.seat("casino-war-usd")
    with raises_reason("INVALID_FIELD", InvalidArgument, match="idempotency_key is required"):
        game.run(game.play.place_bets(ALICE, seat, {"ante": 500}, "  ", ""))


def test_seats_are_the_players_own(game: Game) -> None:
    seat = game.seat("casino-war-usd")
    assert game.seat("casino-war-usd") == seat  # joining twice: the same seat
    with raises_reason("SEAT_NOT_FOUND", NotFound, match="no seat"):  # another player's seat: as if there were none
        game.run(game.play.place_bets(BOB, seat, {"ante": 500}, "key-1", ""))
    with raises_reason("SEAT_NOT_FOUND", NotFound, match="JoinTable"):
        game.run(game.play.place_bets(ALICE, "no-such-seat", {"ante": 500}, "key-1", ""))
    with raises_reason("TABLE_NOT_FOUND", NotFound, match="casino-war-usd"):
        game.run(game.seats.join_table(ALICE, "roulette"))


def test_one_open_round_per_seat_and_no_leaving_while_it_is_open(game: Game) -> None:
    seat = game.seat("casino-war-usd")
    game.shuffler.stack("Kc", "Kd")
    view = game.run(game.play.place_bets(ALICE, seat, {"ante": 500}, "key-1", ""))
    with raises_reason("ROUND_IN_PROGRESS", FailedPrecondition, match=view.round_id):
        game.run(game.play.place_bets(ALICE, seat, {"ante": 500}, "key-2", ""))
    with raises_reason("ROUND_IN_PROGRESS", FailedPrecondition, match="finish it before leaving"):
        game.run(game.seats.leave_table(ALICE, seat))
    view = game.run(game.play.deal(ALICE, view.round_id))
    assert game.run(game.play.deal(ALICE, view.round_id)) == view  # dealt already: a retry gets the round
    game.run(game.play.decide(ALICE, view.round_id, "surrender", ""))
    game.run(game.seats.leave_table(ALICE, seat))
    assert game.seat("casino-war-usd") != seat


def test_another_players_round_is_not_found_as_a_made_up_id_and_operators_see_all(game: Game) -> None:
    seat = game.seat("casino-war-usd")
    view = game.run(game.play.place_bets(ALICE, seat, {"ante": 500}, "key-1", ""))
    with raises_reason("ROUND_NOT_FOUND", NotFound) as made_up:
        game.run(game.play.get_round(BOB, "made-up"))
    for call in (game.play.get_round(BOB, view.round_id), game.play.deal(BOB, view.round_id),
                 game.play.decide(BOB, view.round_id, "raise", "")):  # fmt: skip
        with raises_reason("ROUND_NOT_FOUND", NotFound) as hidden:
            game.run(call)
        assert str(hidden.value) == str(made_up.value).replace("made-up", view.round_id)
    assert game.run(game.play.get_round(OPERATOR, view.round_id)).round_id == view.round_id
    assert game.run(game.play.list_rounds(BOB, 10)).items == []
    with raises_reason("PERMISSION_DENIED", PermissionDenied):
        game.run(game.audit.replay_round(ALICE, view.round_id))
    with raises_reason("PERMISSION_DENIED", PermissionDenied):
        game.run(game.audit.void_round(ALICE, view.round_id, "mine"))


def test_list_rounds_newest_first_with_steps(game: Game) -> None:
    seat = game.seat("casino-war-usd")
    ids = []
    for n in range(3):
        game.shuffler.stack("Ac", "2d")
        view = game.run(game.play.place_bets(ALICE, seat, {"ante": 500}, f"key-{n}", ""))
        game.run(game.play.deal(ALICE, view.round_id))
        ids.append(view.round_id)
    rounds = game.run(game.play.list_rounds(ALICE, 0)).items
    assert [r.round_id for r in rounds] == ids[::-1]
    assert all(r.phase == "settled" and len(r.steps) == 5 for r in rounds)
    assert [r.round_id for r in game.run(game.play.list_rounds(ALICE, 2)).items] == ids[:0:-1]
    with raises_reason("INVALID_FIELD", InvalidArgument, match="1-100"):
        game.run(game.play.list_rounds(ALICE, 101))


def test_rebet_needs_a_previous_round(game: Game) -> None:
    seat = game.seat("casino-war-usd")
    with raises_reason("NO_PREVIOUS_ROUND", FailedPrecondition, match="no previous round"):
        game.run(game.play.rebet(ALICE, seat, "key-1", ""))


def test_list_tables_filters_by_game(game: Game) -> None:
    tables = game.seats.list_tables("war-p2p")
    assert {t.table_id for t in tables} == {f"war-p2p-{t}-{c}" for t in ("i", "ii", "iii") for c in ("usd", "play")}
    assert {t.table_type for t in tables} == {"I", "II", "III"}
    assert len(game.seats.list_tables()) == 14
    with raises_reason("INVALID_FIELD", InvalidInput, match="unknown game"):
        game.seats.list_tables("roulette")


def test_two_rounds_racing_for_one_seat_the_loser_is_voided_and_refunded(game: Game) -> None:
    import asyncio

    seat = game.seat("casino-war-usd")

    async def race():  # noqa: ANN202
        return await asyncio.gather(
            game.play.place_bets(ALICE, seat, {"ante": 500}, "key-a", ""),
            game.play.place_bets(ALICE, seat, {"ante": 700 - 200}, "key-b", ""),
            return_exceptions=True,
        )

    outcomes = game.run(race())
    won = [o for o in outcomes if not isinstance(o, Exception)]
    lost = [o for o in outcomes if isinstance(o, Exception)]
    assert len(won) == 1 and len(lost) == 1
    assert isinstance(lost[0], FailedPrecondition)
    # Both raced for the seat's one next round: one append won, the other found the round open.
    assert "still dealing" in str(lost[0]) or "opened at this seat meanwhile" in str(lost[0])
    game.pump()
    assert game.wallet.available("alice") == 1_000_000 - 500


@pytest.mark.parametrize("store", ["memory", "sqlite"])
def test_the_same_request_twice_at_once_opens_one_round_and_reserves_once(store: str, request: pytest.FixtureRequest) -> None:
    """Both find the key unused and reserve (one wallet transaction: the same request); one records the
    round, the other meets it at the append and, retried, finds the key's round."""
    game: Game = request.getfixturevalue("game" if store == "memory" else "sql_game")
    seat = game.seat("casino-war-usd")

    async def twice():  # noqa: ANN202
        return await asyncio.gather(*(game.play.place_bets(ALICE, seat, {"ante": 500}, "key-1", "cut") for _ in range(2)))

    first, second = game.run(twice())
    assert first.round_id == second.round_id == game.run(game.seats.seat_status(ALICE, seat)).last_round_id
    assert [(e.amount, e.status) for e in game.wallet.entries if e.player_id == "alice"] == [(-500, "pending")]
    assert game.run(game.play.list_rounds(ALICE, 10)).items[0].round_id == first.round_id
    assert len(game.run(game.play.list_rounds(ALICE, 10)).items) == 1


def test_a_seat_left_while_the_bets_were_placed_voids_the_round_at_once(sql_game: Game) -> None:
    """The seat is not read again when the round is recorded: its write finds it gone, and the round,
    its money already reserved, is opened and voided at once (the stakes returned)."""
    game = sql_game
    seat = game.seat("casino-war-usd")
    reserve = game.wallet.reserve_stakes

    async def reserve_then_leave(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        reserved = await reserve(*args, **kwargs)
        await game.seats.leave_table(ALICE, seat)  # no round open yet: the seat goes
        return reserved

    game.wallet.reserve_stakes = reserve_then_leave  # type: ignore[method-assign]
    with raises_reason("ROUND_VOIDED", FailedPrecondition, match=f"seat {seat} was left while the bets were placed"):
        game.run(game.play.place_bets(ALICE, seat, {"ante": 500}, "key-1", ""))
    game.pump()
    assert game.wallet.available("alice") == 1_000_000
    with raises_reason("SEAT_NOT_FOUND", NotFound):  # the recorded round did not bring the seat back
        game.run(game.seats.seat_status(ALICE, seat))


def test_the_shoe_is_committed_before_the_bets_and_the_cut_seed(game: Game) -> None:
    seat = game.seat("casino-war-usd")
    before = game.run(game.seats.seat_status(ALICE, seat))
    assert len(before.next_commitment) == 64
    view = game.run(game.play.place_bets(ALICE, seat, {"ante": 500}, "key-1", "my cut"))
    assert (view.round_id, view.commitment) == (before.next_round_id, before.next_commitment)
    after = game.run(game.seats.seat_status(ALICE, seat))
    assert after.next_round_id != view.round_id and after.next_commitment not in ("", view.commitment)


def test_deal_and_decide_retried_after_a_lost_reply_return_the_round(game: Game) -> None:
    seat = game.seat("casino-war-usd")
    game.shuffler.stack("7c", "7d", "2c", "3c", "4c", "Kd", "2h")
    placed = game.run(game.play.place_bets(ALICE, seat, {"ante": 500}, "key-1", ""))
    dealt = game.run(game.play.deal(ALICE, placed.round_id, placed.version))
    again = game.run(game.play.deal(ALICE, placed.round_id, placed.version))  # the reply was lost
    assert (again.version, again.phase) == (dealt.version, "deciding")
    # Without the version too: the cards are dealt, so a Deal now is a retry and gets the round.
    assert game.run(game.play.deal(ALICE, placed.round_id)).version == dealt.version
    decided = game.run(game.play.decide(ALICE, placed.round_id, "raise", "", dealt.version))
    assert decided.phase == "settled"
    again = game.run(game.play.decide(ALICE, placed.round_id, "Raise", "", dealt.version))
    assert again.version == decided.version
    assert game.run(game.play.decide(ALICE, placed.round_id, "raise", "")).version == decided.version  # no version
    assert game.wallet.available("alice") == 1_000_000 - 1000  # the raise was reserved once
    for version in (dealt.version, 0):  # another choice is not a retry, with or without the version
        with raises_reason("WRONG_PHASE", RuleError):
            game.run(game.play.decide(ALICE, placed.round_id, "surrender", "", version))


def test_a_service_failing_after_the_stakes_were_reserved_voids_the_round_and_the_seat_moves_on(game: Game) -> None:
    from croupier_platform.errors import Unavailable

    seat = game.seat("casino-war-usd")
    first = game.run(game.seats.seat_status(ALICE, seat)).next_round_id
    new_shoe = game.shuffler.new_shoe

    async def unreachable(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        raise Unavailable("the shuffler service is unavailable")

    game.shuffler.new_shoe = unreachable  # type: ignore[method-assign]
    with raises_reason("SERVICE_UNAVAILABLE", Unavailable, match="was voided and its stakes are returned"):
        game.run(game.play.place_bets(ALICE, seat, {"ante": 500}, "key-1", ""))
    game.pump()
    assert game.run(game.play.get_round(ALICE, first)).phase == "voided"
    assert game.wallet.available("alice") == 1_000_000
    replay = game.run(game.audit.replay_round(OPERATOR, first))  # a round voided before any shoe audits clean
    assert replay.ok and replay.notes == ["voided before a shoe was committed: no cards to check"], replay.disagreements
    # The seat has a new next round: another bet, of another amount, goes through.
    game.shuffler.new_shoe = new_shoe  # type: ignore[method-assign]
    view = game.run(game.play.place_bets(ALICE, seat, {"ante": 1000}, "key-2", ""))
    assert view.round_id != first and view.phase == "dealing"


def test_the_opening_asks_the_dealer_nothing_and_the_first_deal_binds_the_cut_it_recorded(game: Game) -> None:
    """CutShoe folded into the first DealCards: the offset recorded at PlaceBets is fairness.cut_offset's,
    the dealer is first asked at the deal, with the round's commitment and seed, and cuts at that offset."""
    from croupier_rules import fairness

    seat = game.seat("casino-war-usd")
    placed = game.run(game.play.place_bets(ALICE, seat, {"ante": 500}, "key-1", "my seed"))
    assert game.dealer.calls == 0
    round_ = game.run(game.book.load(placed.round_id))
    assert round_.shoe is not None and round_.shoe.cut_seed == "my seed"
    assert round_.shoe.cut_offset == fairness.cut_offset(round_.shoe.commitment, "my seed", round_.shoe.size)
    dealt = game.run(game.play.deal(ALICE, placed.round_id))
    assert game.dealer.offsets == {placed.round_id: round_.shoe.cut_offset}
    shoe = game.shuffler.shoes[round_.shoe.shoe_id]
    order = fairness.cut_shoe(shoe.cards, round_.shoe.cut_offset)
    after = game.run(game.book.load(placed.round_id))
    assert [c.card for _, e in after.rules_events if hasattr(e, "cards") for c in e.cards] == order[: after.cards_dealt]
    assert dealt.version > placed.version


def test_the_dealer_away_at_the_first_deal_leaves_the_round_dealing_and_a_retry_after_a_lost_reply_deals_the_same_cards(
    game: Game,
) -> None:
    from croupier_platform.errors import Unavailable

    seat = game.seat("casino-war-usd")
    placed = game.run(game.play.place_bets(ALICE, seat, {"ante": 500}, "key-1", "seed"))
    deal_cards = game.dealer.deal_cards
    answers: list[tuple[list[str], list[int]]] = []

    async def reply_lost(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        answers.append(await deal_cards(*args, **kwargs))
        raise Unavailable("the dealer's reply was lost")

    game.dealer.deal_cards = reply_lost  # type: ignore[method-assign]
    with raises_reason("SERVICE_UNAVAILABLE", Unavailable):
        game.run(game.play.deal(ALICE, placed.round_id))
    assert game.run(game.play.get_round(ALICE, placed.round_id)).phase == "dealing"
    game.dealer.deal_cards = deal_cards  # type: ignore[method-assign]
    game.run(game.play.deal(ALICE, placed.round_id))
    round_ = game.run(game.book.load(placed.round_id))
    first_cards = next(e.cards for _, e in round_.rules_events if hasattr(e, "cards"))
    assert [c.card for c in first_cards] == answers[0][0]  # the cut bound once: the retry got the lost reply's cards
