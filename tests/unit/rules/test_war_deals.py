"""The war games pinned with hand-picked deals (docs/rules.md §1, §4, §5): which side wins, and how
the cards of a war lie on the table."""

import pytest

from .helpers import play, returned

BURNS = ["2c", "3c", "4c"]
BURNED_THEN_ONE_EACH = [("burn", False)] * 3 + [("player_war", True), ("dealer_war", True)]


def deals(events):
    return [[(c.hand, c.face_up) for c in e.cards] for e in events if e.event_type == "CardsDealt"]


# -- Dueling for Dollars: the Player bet backs the player's card, the Dealer bet the dealer's ------

@pytest.mark.parametrize(
    "cards, expected",
    [
        (["Kc", "2d"], {"player": 2000, "dealer": 0}),  # the player's card higher
        (["2c", "Kd"], {"player": 0, "dealer": 2000}),  # the dealer's card higher
    ],
)
def test_dueling_the_higher_sides_bet_wins_on_the_first_cards(cards, expected):
    state, _ = play("dueling-for-dollars", {"player": 1000, "dealer": 1000}, cards)
    assert returned(state) == expected


@pytest.mark.parametrize("bet", ["player", "dealer"])
def test_dueling_a_lone_dealer_or_player_bet_loses_when_the_other_side_is_higher(bet):
    higher_player, higher_dealer = ["Qs", "5h"], ["5s", "Qh"]
    won, _ = play("dueling-for-dollars", {bet: 500}, higher_player if bet == "player" else higher_dealer)
    lost, _ = play("dueling-for-dollars", {bet: 500}, higher_dealer if bet == "player" else higher_player)
    assert returned(won) == {bet: 1000}
    assert returned(lost) == {bet: 0}


@pytest.mark.parametrize(
    "war, expected",
    [
        # the player's war card higher: the Player bet wins 1 and its war stake pushes; the Dealer bet loses both
        (["Kc", "2d"], {"player": 2000, "player_war": 1000, "dealer": 0, "dealer_war": 0}),
        # the dealer's war card higher: the other way round
        (["2c", "Kd"], {"player": 0, "player_war": 0, "dealer": 2000, "dealer_war": 1000}),
    ],
)
def test_dueling_after_the_war_the_higher_war_card_decides_each_side(war, expected):
    state, events = play(
        "dueling-for-dollars", {"player": 1000, "dealer": 1000}, ["4c", "4d", *BURNS, *war],
        [("player", "war"), ("dealer", "war")],
    )
    assert returned(state) == expected
    assert deals(events)[1] == BURNED_THEN_ONE_EACH
    assert [e.stage for e in events if e.event_type == "CardsDealt"] == ["initial", "war"]


def test_dueling_a_war_needs_one_war_answer_and_a_surrendered_side_keeps_half():
    # the Dealer bet surrenders first, then the Player bet goes to war and loses it
    state, events = play(
        "dueling-for-dollars", {"player": 1000, "dealer": 1000}, ["4c", "4d", *BURNS, "2s", "9h"],
        [("dealer", "surrender"), ("player", "war")],
    )
    assert returned(state) == {"player": 0, "player_war": 0, "dealer": 500}
    assert deals(events)[1] == BURNED_THEN_ONE_EACH


def test_dueling_both_surrendering_settles_without_a_war():
    state, events = play(
        "dueling-for-dollars", {"player": 1000, "dealer": 1000}, ["4c", "4d"],
        [("player", "surrender"), ("dealer", "surrender")],
    )
    assert returned(state) == {"player": 500, "dealer": 500}
    assert dict(state.bets) == {"player": 1000, "dealer": 1000}  # a surrender stakes nothing more
    assert len(deals(events)) == 1


# -- burned cards lie face down, war cards face up -------------------------------------------

@pytest.mark.parametrize(
    "game, choice",
    [("casino-war", "raise"), ("battle-royale", "battle"), ("dueling-for-dollars", "war")],
)
def test_the_war_burns_three_cards_face_down_then_deals_one_face_up_card_each(game, choice):
    bets = {"player": 1000} if game == "dueling-for-dollars" else {"ante": 1000}
    state, events = play(game, bets, ["9c", "9d", *BURNS, "Kc", "2d"], [choice])
    first, war = deals(events)
    assert first == [("player", True), ("dealer", True)]
    assert war == BURNED_THEN_ONE_EACH
    assert state.hands["burn"] == tuple(BURNS)
    assert (state.hands["player_war"], state.hands["dealer_war"]) == (("Kc",), ("2d",))


def test_casino_war_tie_bet_pays_on_the_first_cards_even_when_the_war_is_lost():
    state, _ = play("casino-war", {"ante": 500, "tie": 100}, ["9c", "9d", *BURNS, "2c", "Kd"], ["raise"])
    assert returned(state) == {"ante": 0, "raise": 0, "tie": 1100}


def outcomes(state):
    return {name: r.outcome for name, r in state.settlement.results.items()}


@pytest.mark.parametrize(
    "war, expected",
    [
        (["Kc", "2d"], {"ante": "win after war", "raise": "push"}),
        (["2c", "Kd"], {"ante": "lose after war", "raise": "lose after war"}),
        (["Kc", "Kd"], {"ante": "tie after war: ante bonus", "raise": "push"}),
    ],
)
def test_casino_war_outcomes_after_the_war(war, expected):
    state, _ = play("casino-war", {"ante": 500}, ["9c", "9d", *BURNS, *war], ["raise"])
    assert outcomes(state) == expected


def test_dueling_outcomes_name_what_happened_to_each_bet():
    state, _ = play("dueling-for-dollars", {"player": 500, "dealer": 500, "tie_plus": 100, "combo": 100}, ["Kc", "Qc"])
    assert outcomes(state) == {"player": "win", "dealer": "lose", "tie_plus": "lose", "combo": "straight flush"}
    state, _ = play("dueling-for-dollars", {"player": 500, "dealer": 500}, ["4c", "4d", *BURNS, "2c", "Kd"],
                    [("player", "war"), ("dealer", "surrender")])
    assert outcomes(state) == {"player": "lose after war", "player_war": "lose after war", "dealer": "surrender"}


@pytest.mark.parametrize(
    "game, choice, war, expected",
    [
        ("war-p2p", "raise", ["Kc", "2d"], {"ante": "push", "raise": "win after war"}),
        ("war-p2p", "raise", ["2c", "Kd"], {"ante": "lose after war", "raise": "lose after war"}),
        ("battle-royale", "battle", ["Kc", "2d"], {"ante": "push", "battle": "win battle"}),
        ("battle-royale", "battle", ["Kc", "Kd"], {"ante": "push", "battle": "tie in battle"}),
        ("battle-royale", "battle", ["2c", "Kd"], {"ante": "lose battle", "battle": "lose battle"}),
    ],
)
def test_war_p2p_and_battle_royale_outcomes_after_the_war(game, choice, war, expected):
    burns = ["2c", "3c", "4c", "2d", "3d", "4d"] if game == "war-p2p" else BURNS
    war = [w.replace("c", "h") for w in war] if game == "war-p2p" else war
    state, _ = play(game, {"ante": 500}, ["9c", "9d", *burns, *war], [choice])
    assert outcomes(state) == expected


@pytest.mark.parametrize(
    "game, cards, expected",
    [
        ("casino-war", ["Kc", "2d"], {"ante": "win"}),
        ("casino-war", ["2c", "Kd"], {"ante": "lose"}),
        ("war-p2p", ["Kc", "2d"], {"ante": "win"}),
        ("battle-royale", ["2c", "Kd"], {"ante": "lose"}),
    ],
)
def test_first_deal_outcomes(game, cards, expected):
    state, _ = play(game, {"ante": 500}, cards)
    assert outcomes(state) == expected


@pytest.mark.parametrize("game, decision", [("casino-war", "surrender"), ("war-p2p", "surrender"), ("battle-royale", "surrender")])
def test_a_surrender_is_recorded_as_such(game, decision):
    state, _ = play(game, {"ante": 500}, ["9c", "9d"], [decision])
    assert outcomes(state) == {"ante": "surrender"}


def test_casino_war_tie_bet_outcomes():
    state, _ = play("casino-war", {"ante": 500, "tie": 100}, ["9c", "9d"], ["surrender"])
    assert outcomes(state) == {"ante": "surrender", "tie": "tie"}
    state, _ = play("casino-war", {"ante": 500, "tie": 100}, ["9c", "Td"])
    assert outcomes(state) == {"ante": "lose", "tie": "lose"}
