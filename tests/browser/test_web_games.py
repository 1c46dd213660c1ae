"""Every game played through the web table in chromium, against a real `croupier serve`: sign in,
top up, choose a table, place chips within its limits, decide, see the settlement, and the page's own
check of the round against the commitment shown before the bets. A screenshot of each game's table
after its settled round is saved (var/screenshots/GAME.png)."""

from __future__ import annotations

import json

import pytest

from .conftest import save_screenshot

GAMES = {
    # game: (table, chips per bet, the player's cut seed)
    "casino-war": ("casino-war-play", {"ante": [500], "tie": [100]}, "my lucky cut"),
    "war-p2p": ("war-p2p-i-play", {"ante": [500]}, ""),
    "casino-holdem": ("casino-holdem-play", {"ante": [500], "aa_bonus": [100]}, "42"),
    "battle-royale": ("battle-royale-play", {"ante": [1000]}, "שלום ☂ café"),
    "dueling-for-dollars": ("dueling-for-dollars-play", {"player": [500], "combo": [100]}, "duel"),
}


@pytest.mark.parametrize("game", list(GAMES))
def test_a_round_of_every_game_is_played_settled_and_verified_in_the_page(open_table, game: str) -> None:
    table_id, bets, cut_seed = GAMES[game]
    table = open_table()
    table.sign_in()
    before = table.balance()
    table.join(table_id)
    commitment = table.page.text_content("#commitment")
    assert len(commitment) == 64, "the next round's commitment is shown before the bets"
    for bet, chips in bets.items():
        table.set_bet(bet, chips)
    table.page.fill("#cut-seed", cut_seed)
    verdict = table.play_round()
    page = table.page
    assert page.get_attribute("#round", "data-phase") == "settled"
    assert verdict == "ok", page.text_content("#verdict")
    assert commitment in page.text_content("#round-commitment"), "the round used the commitment shown before the bets"
    assert page.locator("#verdict li[data-check='cut']").text_content().startswith("✔ cut")
    assert page.locator("#cards .card").count() >= 2
    assert page.locator("#cards .card.down").count() == 0, "every card is face up once settled"
    results = page.locator("#settlement tr")
    lines = {results.nth(i).get_attribute("data-bet") for i in range(results.count())}
    assert set(bets) <= lines, "a settlement line per bet placed (and per raise, call or war bet)"
    staked = sum(sum(chips) for chips in bets.values())
    net = sum(int(minor) for minor in page.eval_on_selector_all("#settlement td:nth-child(4)", "cells => cells.map(c => c.dataset.minor)"))
    assert table.wait_balance(before + net) == before + net, f"the balance moved by the settlement's net ({net}, staked at least {staked})"
    assert table.error() == ""
    assert table.errors == []
    save_screenshot(page, game)


def test_rebet_then_recall_a_past_round_step_by_step(open_table) -> None:
    table = open_table()
    table.sign_in()
    table.join("casino-war-play")
    table.set_bet("ante", [100])
    assert table.play_round(choose=lambda choices: "surrender" if "surrender" in choices else choices[0]) == "ok"
    first = table.page.get_attribute("#round", "data-round")  # the round on the felt (the history list refreshes after it)
    assert table.play_round(rebet=True, choose=lambda choices: "surrender" if "surrender" in choices else choices[0]) == "ok"
    page = table.page
    page.wait_for_function("document.querySelectorAll('#history li').length >= 2")
    assert page.get_attribute("#history li >> nth=1", "data-round") == first, "newest first"
    page.click(f"#history li[data-round='{first}'] button")
    page.wait_for_selector("#recall:not([hidden])")
    seen = [page.get_attribute("#recall-step", "data-event")]
    while page.is_enabled("#recall-next"):
        page.click("#recall-next")
        seen.append(page.get_attribute("#recall-step", "data-event"))
    assert seen[0] == "RoundOpened"
    assert {"BetsPlaced", "ShoeCommitted", "CardsDealt", "RoundSettled"} <= set(seen)
    assert seen.index("ShoeCommitted") < seen.index("CardsDealt"), "the shoe is committed before any card"
    assert page.locator("#recall-cards .card").count() >= 2, "the cards dealt up to the step"
    assert table.errors == []


def test_limits_and_the_servers_refusal_are_shown(open_table) -> None:
    table = open_table()
    table.sign_in()
    page = table.page
    page.click("#limits summary")
    page.fill("#limit-max-stake", "2")
    page.click("#set-limits")
    table.idle()
    limits = json.loads(page.text_content("#limits-view"))["limits"]
    play = next(c for c in limits["currencies"] if c["currency"] == "PLAY")
    assert play["maxStake"]["amount"] == "200", "2 units: the player's lowering holds at once"
    shown = page.text_content("#limits-list li[data-limit='maxStake'][data-currency='PLAY']")
    assert shown.endswith(": 2.00"), f"read as people do, in the currency's units: {shown!r}"
    table.join("casino-war-play")
    table.set_bet("ante", [500])
    page.click("#place")
    table.idle()
    error = table.error()
    assert error.startswith("FailedPrecondition"), error  # the server's own code and message
    assert "stake" in error.lower()
    page.fill("#limit-exclude-until", "2030-01-01T00:00")
    page.click("#set-limits")
    table.idle()
    assert json.loads(page.text_content("#limits-view"))["limits"]["selfExclusion"], "the exclusion is shown"
    table.set_bet("ante", [100])
    page.click("#place")
    table.idle()
    assert "exclu" in table.error().lower()
