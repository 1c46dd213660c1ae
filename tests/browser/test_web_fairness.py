"""The page's fairness verifier (web/src/fairness.ts, as bundled in web/dist) run in chromium: it passes
every vector of docs/fairness-vectors.json, as the Python verifier does (tests/unit/rules/
test_fairness_vectors.py), and fails a vector with any input changed."""

from __future__ import annotations

import copy
import json

import pytest

from croupier_rules.verify import verify_round
from tests.conftest import ROOT

VECTORS = json.loads((ROOT / "docs" / "fairness-vectors.json").read_text())["vectors"]


@pytest.fixture(scope="module")
def verifier(browser, web_server):
    context = browser.new_context()
    page = context.new_page()
    page.goto(web_server)
    page.wait_for_selector("#app[data-ready='1']")
    yield lambda vector: page.evaluate("v => window.croupier.fairness.checkVector(v)", vector)
    context.close()


@pytest.mark.parametrize("vector", VECTORS, ids=[v["name"] for v in VECTORS])
def test_the_browser_verifier_passes_every_vector(verifier, vector) -> None:
    assert verifier(vector) == []


@pytest.mark.parametrize("change", ["salt", "shoe", "seed"])
def test_the_browser_verifier_fails_a_changed_vector(verifier, change: str) -> None:
    vector = copy.deepcopy(next(v for v in VECTORS if v["inputs"]["cut_seed"]))
    inputs = vector["inputs"]
    if change == "salt":
        inputs["salt_hex"] = ("ff" + inputs["salt_hex"])[:64]
    elif change == "shoe":
        inputs["revealed_shoe"][0], inputs["revealed_shoe"][-1] = inputs["revealed_shoe"][-1], inputs["revealed_shoe"][0]
    else:
        inputs["cut_seed"] += " "  # hashed exactly as sent: no trimming
    mismatches = verifier(vector)
    assert any(m.startswith("commitment" if change != "seed" else "cut_digest") for m in mismatches), mismatches


def test_a_tampered_round_fails_in_the_page_as_it_does_in_croupier_verify(open_table) -> None:
    """A good round verifies; the same round with two cards of its revealed shoe swapped does not. The
    rules library's verifier (`croupier verify --file`), given exactly what the page was shown,
    reaches the same verdict on each check the page makes, and passes the settlement too."""
    table = open_table()
    table.sign_in()
    table.join("casino-war-play")
    table.page.fill("#cut-seed", "über-cut ✓")
    assert table.play_round() == "ok"
    page = table.page
    page.click("#tamper")
    page.wait_for_selector("#tampered-verdict[data-state]")
    assert page.get_attribute("#tampered-verdict", "data-state") == "failed"
    assert page.locator("#tampered-verdict li[data-check='commitment']").text_content().startswith("✘")
    assert page.locator("#tampered-verdict li[data-check='cards']").text_content().startswith("✘")
    assert page.get_attribute("#verdict", "data-state") == "ok", "the round itself still verifies"

    checked = page.evaluate("window.croupier.checked")
    for view, page_report in ((checked["round"], checked["report"]), (checked["tampered"], checked["tamperedReport"])):
        python = verify_round(view, committed_before=checked["committedBefore"] if view is checked["round"] else None).as_dict()
        by_name = {c["name"]: c["passed"] for c in python["checks"]}
        assert {c["name"]: c["passed"] for c in page_report["checks"]} == {n: by_name[n] for n in ("commitment", "shoe", "cut", "cards")}
    assert verify_round(checked["round"]).ok, "the settlement replays too"
