"""Coming back to a round (issue 25, resume) in chromium: a reload mid-decision keeps the sign-in and the
seat, shows the round with its choices, their cost and the countdown, and the round is finished from
there (or from another device); a decision left to run out is taken by the keeper, and the round says
so. The keeper's test runs its own `croupier serve` with a 4 s decision timeout at casino-holdem-play."""

from __future__ import annotations

import pytest

from croupier_game.config import DEFAULT_TABLES_FILE

from .conftest import TIMEOUT_MS, save_screenshot, serving

HOLDEM = "casino-holdem-play"  # every round asks Call or Fold after the first deal
HOLDEM_PLAY = 'table_id = "casino-holdem-play"\ngame = "casino-holdem"\ncurrency = "PLAY"\n'
QUICK_TIMEOUT_S = 4


def deal_to_a_decision(table, ante: int = 500) -> str:
    """Sit at the Hold'em table, bet the ante and deal; the round id, left waiting for Call or Fold."""
    table.join(HOLDEM)
    table.set_bet("ante", [ante])
    table.set_bet("aa_bonus", [])
    table.page.click("#place")
    table.idle()
    assert not table.error(), table.error()
    table.page.wait_for_selector("#round[data-phase='deciding']")
    return table.page.get_attribute("#round", "data-round") or ""


def asked(table) -> dict[str, str]:
    """The choices shown, each with what it adds to the stake (data-cost, minor units)."""
    return dict(table.page.eval_on_selector_all("button.decision", "bs => bs.map(b => [b.dataset.choice, b.dataset.cost])"))


def seconds_left(table) -> int:
    table.page.wait_for_selector("#countdown:not([hidden])")
    return int(table.page.get_attribute("#countdown", "data-left") or -1)


def test_a_reload_mid_decision_keeps_the_seat_and_the_round_is_finished_from_there(open_table) -> None:
    table = open_table()
    name = table.sign_in()
    round_id = deal_to_a_decision(table)
    assert asked(table) == {"call": "1000", "fold": "0"}, "a call costs twice the ante, a fold nothing"
    assert "adds" in table.page.text_content("button.decision[data-choice='call']")
    assert 0 < seconds_left(table) <= 30

    table.page.reload()  # the sign-in, the seat and the round come back by themselves
    table.page.wait_for_selector("#app[data-ready='1']")
    table.idle()
    assert table.page.is_visible("#signed-in") and not table.page.is_visible("#login-panel")
    table.page.wait_for_selector(f"#round[data-round='{round_id}'][data-phase='deciding']")
    assert asked(table) == {"call": "1000", "fold": "0"}, "the same choices and costs after the reload"
    assert 0 < seconds_left(table) <= 30
    assert table.page.is_visible("#resumed")
    deadline = table.page.get_attribute("#countdown", "data-deadline")
    assert deadline and deadline.endswith("Z"), "the server's decision_deadline, RFC 3339 UTC"

    # Another device: the same player signs in elsewhere, sits at the same table and finds the same round.
    other = open_table()
    other.sign_in(name, top_up=0)
    other.join(HOLDEM)
    other.page.wait_for_selector(f"#round[data-round='{round_id}'][data-phase='deciding']")
    assert other.page.get_attribute("#countdown", "data-deadline") == deadline
    other.page.click("button.decision[data-choice='fold']")
    other.idle()
    assert other.verdict() == "ok"
    # The first page hears of it through its stream: settled, no keeper involved, and checked.
    table.page.wait_for_selector(f"#round[data-round='{round_id}'][data-phase='settled']")
    assert table.verdict() == "ok"
    assert table.page.locator("#keeper-note li").count() == 0, "the player's own decision"
    assert table.page.is_hidden("#countdown")
    assert table.errors == [] and other.errors == []
    save_screenshot(table.page, "resume-after-reload")


@pytest.fixture(scope="module")
def quick_keeper(tmp_path_factory):
    """A `croupier serve` whose Hold'em play table times a decision out after 4 s, with a keeper every 0.2 s."""
    root = tmp_path_factory.mktemp("quick-keeper")
    catalogue = DEFAULT_TABLES_FILE.read_text(encoding="utf-8")
    assert HOLDEM_PLAY in catalogue
    tables = root / "tables.toml"
    tables.write_text(catalogue.replace(HOLDEM_PLAY, f"{HOLDEM_PLAY}[tables.table]\ndecision_timeout_s = {QUICK_TIMEOUT_S}\n"), encoding="utf-8")
    env = {"CROUPIER_KEEPER_INTERVAL_S": "0.2", "CROUPIER_STUCK_ROUND_VOID_AFTER_S": "60"}
    with serving(root / "data", tables=tables, env=env) as url:
        yield url


def test_the_countdown_runs_out_and_the_keepers_default_is_labelled(open_table, quick_keeper) -> None:
    table = open_table(quick_keeper)
    table.sign_in()
    round_id = deal_to_a_decision(table)
    left = seconds_left(table)
    assert 0 < left <= QUICK_TIMEOUT_S
    assert "Fold" in table.page.text_content("#countdown"), "the countdown names the default it leads to"
    table.page.wait_for_function(f"Number(document.querySelector('#countdown').dataset.left) < {left}")  # it counts down
    save_screenshot(table.page, "keeper-countdown")
    # Nothing clicked: the keeper folds once the deadline passes; the page hears of it through WatchSeat.
    table.page.wait_for_selector(f"#round[data-round='{round_id}'][data-phase='settled']", timeout=TIMEOUT_MS + QUICK_TIMEOUT_S * 1000)
    note = table.page.locator("#keeper-note li[data-caused-by='keeper']")
    assert note.count() == 1
    assert f"no decision within {QUICK_TIMEOUT_S} s: the table's default (fold)" in note.text_content()
    assert table.verdict() == "ok"
    outcomes = table.page.eval_on_selector_all("#settlement tr", "rows => rows.map(r => r.lastElementChild.textContent)")
    assert outcomes == ["fold"]
    assert table.errors == []
    save_screenshot(table.page, "keeper-default")
