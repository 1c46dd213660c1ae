"""The reference page as a casino table (issue 25, part 4) in chromium: chips added and taken back one at a
time within the table's limit (a chip past it refused beside the circle), the Hebrew page laid out right
to left, and the play area on one phone screen (390 x 844). Screenshots: var/screenshots/hebrew.png,
phone.png."""

from __future__ import annotations

from .conftest import save_screenshot

WAR = "casino-war-play"


def test_chips_are_added_and_taken_back_one_at_a_time_within_the_limit(open_table) -> None:
    table = open_table()
    table.sign_in()
    table.join(WAR)
    page = table.page
    table.set_bet("ante", [500, 100, 500])
    assert table.bet("ante") == 1100
    page.click("button.take-back[data-bet='ante']")  # the last chip back: 500
    assert table.bet("ante") == 600
    page.click("button.circle[data-bet='ante']", button="right")  # a right-click takes one back too (seed 000)
    assert table.bet("ante") == 500
    maximum = int(page.get_attribute(".spot[data-bet='ante'] .limits", "data-max") or 0)
    biggest = max(int(c) for c in page.eval_on_selector_all("#rack button.chip", "bs => bs.map(b => b.dataset.chip)"))
    page.click(f"#rack button.chip[data-chip='{biggest}']")
    for _ in range(maximum // biggest + 2):  # bounded: past the maximum within a few chips
        if page.is_visible(".spot[data-bet='ante'] .spot-error"):
            break
        page.click("button.circle[data-bet='ante']")
    refusal = page.text_content(".spot[data-bet='ante'] .spot-error") or ""
    assert page.is_visible(".spot[data-bet='ante'] .spot-error"), "the chip past the maximum is refused where it was placed"
    assert "at most" in refusal
    assert table.bet("ante") <= maximum and table.bet("ante") + biggest > maximum
    page.click("button.take-back[data-bet='ante']")
    assert table.bet("ante") + 2 * biggest > maximum
    assert table.play_round(choose=lambda choices: "surrender" if "surrender" in choices else choices[0]) == "ok"
    assert table.errors == []


def test_the_hebrew_page_reads_right_to_left(open_table, web_server) -> None:
    table = open_table(f"{web_server}/?lang=he")
    table.sign_in()
    page = table.page
    assert page.get_attribute("html", "dir") == "rtl" and page.get_attribute("html", "lang") == "he"
    assert page.evaluate("getComputedStyle(document.querySelector('#app')).direction") == "rtl"
    table.join(WAR)
    assert page.text_content("#place") == "חלוקה"
    assert "מלחמת קזינו" in page.text_content("#seat-title")
    table.set_bet("ante", [500])
    assert table.play_round(choose=lambda choices: "surrender" if "surrender" in choices else choices[0]) == "ok"
    head = page.locator("#settlement-table th").first.bounding_box()
    last = page.locator("#settlement-table th").last.bounding_box()
    assert head["x"] > last["x"], "the settlement's first column is on the right"
    assert "הוכרע" in page.text_content("#round-title")
    page.click("#lang")  # and back to English, the choice kept for the next visit
    assert page.get_attribute("html", "dir") == "ltr" and page.text_content("#place") == "Deal"
    page.click("#lang")
    assert table.errors == []
    save_screenshot(page, "hebrew")


def test_the_play_area_fits_one_phone_screen(open_table) -> None:
    table = open_table(viewport=(390, 844), is_mobile=True, has_touch=True, device_scale_factor=2)
    table.sign_in()
    table.join("casino-holdem-play")
    page = table.page
    table.set_bet("ante", [500])
    page.click("#place")
    table.idle()
    page.wait_for_selector("#round[data-phase='deciding']")
    page.locator("#play").scroll_into_view_if_needed()
    box = page.locator("#play").bounding_box()
    assert box["height"] <= 844, f"the play area is {box['height']:.0f} px tall"
    assert page.evaluate("document.documentElement.scrollWidth") <= 390, "nothing wider than the phone"
    save_screenshot(page, "phone")
    page.click("button.decision[data-choice='fold']")
    table.idle()
    assert table.verdict() == "ok"
    box = page.locator("#play").bounding_box()
    assert box["height"] <= 844, f"the settled round's play area is {box['height']:.0f} px tall"
    assert table.errors == []
