"""War with a player-dealer through the web table, two browser contexts: one player earns the dealer
points at a war-p2p table, takes the dealer seat and confirms; another, paired with them, plays; the
dealer's page, told by WatchSeat, shows the round, its result and the seed's text boxes, and both pages
verify it. The dealer's stream is then dropped while a round is played: it resumes from its last
position and receives every step of that round exactly once."""

from __future__ import annotations

from .conftest import save_screenshot

TABLE = "war-p2p-ii-play"  # type II: 400 dealer points and 240.00 to deal; its own table, so no other test's seat pairs


def status(table, field: str) -> str:
    return table.status(field)


def both_sides_show_the_servers_figures(dealer, player) -> None:
    """After a round: each page's boxes are GetSeatStatus's, and the dealer's history line carries the
    dealer's own result (dealer_net), not the player's."""
    for side in (dealer, player):
        side.wait_boxes_equal_server()
    dealer.page.wait_for_function("document.querySelector('#history li') !== null")
    latest = dealer.page.get_attribute("#history li >> nth=0", "data-net")
    assert latest == dealer.status("lastRoundResult"), "the dealer's history shows the dealer's result"
    assert dealer.page.get_attribute("#totals", "data-net") == latest


def test_a_player_dealer_round_between_two_browsers(open_table) -> None:
    dealer = open_table()
    dealer.sign_in(top_up=3000)
    dealer.join(TABLE)
    dealer.set_bet("ante", [10000, 10000])  # 200.00, the table's maximum: 200 points a round
    for _ in range(3):  # 600 points: two rounds dealt (-5 each) keep them over the 400 needed
        assert dealer.play_round(choose=lambda choices: "surrender" if "surrender" in choices else choices[0]) == "ok"
    dealer.page.wait_for_function("Number(document.querySelector(\"#seat-status output[data-field='dealerPoints']\").dataset.value) >= 600")
    dealer.page.click("#leave")
    dealer.idle()
    dealer.join(TABLE, role="dealer", nickname="Dee")
    assert status(dealer, "role") == "dealer"
    assert status(dealer, "confirmed") == "false"

    player = open_table()
    player.sign_in()
    player.join(TABLE, nickname="Pat")
    assert status(player, "opponentNickname") == "Dee", "paired with the waiting player-dealer"
    dealer.page.wait_for_function("document.querySelector(\"#seat-status output[data-field='opponentNickname']\").dataset.value === 'Pat'")
    dealer.page.click("#confirm")
    dealer.idle()
    assert status(dealer, "confirmed") == "true"

    player.set_bet("ante", [500])
    circle_max = player.page.get_attribute(".spot[data-bet='ante'] .limits", "data-max")
    assert circle_max == player.status("maxAnte"), "the ante's circle takes at most what the dealer covers (SeatStatus.max_ante)"
    assert player.play_round(choose=lambda choices: "surrender" if "surrender" in choices else choices[0]) == "ok"
    assert "vs Dee" in player.page.text_content("#round-title")
    round_id = player.page.get_attribute("#round", "data-round")  # the round on the felt (the history list refreshes after it)
    # The dealer's page learns of the round by itself (WatchSeat) and verifies it.
    dealer.page.wait_for_selector(f"#round[data-round='{round_id}']")
    assert dealer.verdict() == "ok", dealer.page.text_content("#verdict")
    assert "you: dealer" in dealer.page.text_content("#round-title")
    assert "dealer net" in dealer.page.text_content("#totals")
    both_sides_show_the_servers_figures(dealer, player)

    dealer.page.click("#auto-on")
    dealer.idle()
    assert status(dealer, "autoConfirm") == "true"
    dealer.page.wait_for_function("document.querySelector('#live [data-change]') !== null")
    dealer.page.evaluate("window.croupier.watch.pause()")  # the dealer's connection drops ...
    assert player.play_round(rebet=True, choose=lambda choices: "surrender" if "surrender" in choices else choices[0]) == "ok"
    second = player.page.get_attribute("#round", "data-round")  # the round on the felt (the history list refreshes after it)
    assert dealer.page.locator(f"#live [data-round='{second}']").count() == 0, "the round was played while the dealer was away"
    dealer.page.evaluate("window.croupier.watch.resume()")  # ... and comes back: it resumes from its last position
    dealer.page.wait_for_selector(f"#live [data-round='{second}'][data-event='RoundSettled']", state="attached")  # the live log sits folded
    versions = [int(v) for v in dealer.page.eval_on_selector_all(f"#live [data-round='{second}']", "els => els.map(e => e.dataset.version)")]
    assert sorted(versions) == list(range(1, max(versions) + 1)), f"every step once, none missed: {sorted(versions)}"
    positions = dealer.page.evaluate("window.croupier.watch.positions")
    assert len(positions) == len(set(positions)), "nothing received twice"
    assert second != round_id
    dealer.page.wait_for_selector(f"#round[data-round='{second}']")
    assert dealer.verdict() == "ok"
    both_sides_show_the_servers_figures(dealer, player)
    assert dealer.errors == [] and player.errors == []
    save_screenshot(dealer.page, "war-p2p-player-dealer-dealer")
    save_screenshot(player.page, "war-p2p-player-dealer-player")
