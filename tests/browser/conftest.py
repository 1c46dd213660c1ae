"""The reference web table in a real browser: Debian's chromium, headless, driven by Playwright for
Python (no browser download: PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1), against a real `croupier serve`.

Each test saves a screenshot of its pages when it fails; the game tests also save one of each game's
table after a settled round. Both go to SCREENSHOTS (var/screenshots/, or $CROUPIER_SCREENSHOTS),
listed at the end of the run."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.conftest import CROUPIER, ROOT

CHROMIUM = os.environ.get("CROUPIER_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"]
SCREENSHOTS = Path(os.environ.get("CROUPIER_SCREENSHOTS", ROOT / "var" / "screenshots"))
# Playwright's waits: a round, its reveal and its check take well under a second here; generous for a busy CI.
TIMEOUT_MS = 20_000

_saved: list[Path] = []


def save_screenshot(page, name: str) -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    _saved.append(path)
    return path


def pytest_collection_modifyitems(items) -> None:
    here = Path(__file__).parent
    for item in items:
        if Path(item.fspath).parent == here:
            item.add_marker(pytest.mark.e2e)


def pytest_terminal_summary(terminalreporter) -> None:
    if _saved:
        terminalreporter.write_line(f"browser screenshots ({SCREENSHOTS}):")
        for path in _saved:
            terminalreporter.write_line(f"  {path}")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.when == "call" and report.failed:
        for index, page in enumerate(getattr(item, "pages", [])):
            try:
                report.sections.append(("screenshot", str(save_screenshot(page, f"FAILED-{item.name}-{index}"))))
            except Exception:  # noqa: BLE001 - a closed page has nothing to show
                pass


@contextmanager
def serving(data: Path, tables: Path | None = None, env: dict[str, str] | None = None) -> Iterator[str]:
    """`croupier serve` on loopback ports picked by the OS (with a table catalogue of its own, when given);
    the page's URL."""
    data.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "LOG_LEVEL": "WARNING", **(env or {})}
    log = open(data.parent / f"{data.name}-serve.log", "w")  # noqa: SIM115 - closed below
    command = [CROUPIER, "serve", "--data", str(data), "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0"]
    process = subprocess.Popen([*command, *(["--tables", str(tables)] if tables else [])], stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        deadline = time.monotonic() + 60
        served = data / "serve.json"
        while not (served.exists() and "http" in served.read_text()):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"croupier serve did not start: {Path(log.name).read_text()[-2000:]}")
            time.sleep(0.1)
        yield json.loads(served.read_text())["http"]
    finally:
        process.terminate()
        process.wait(timeout=30)
        log.close()


@pytest.fixture(scope="package")
def web_server(tmp_path_factory) -> Iterator[str]:
    with serving(tmp_path_factory.mktemp("web") / "data") as url:
        yield url


# Package scope, not session: Playwright's sync API runs its event loop in this thread while it is open,
# so every later asyncio.run() of the suite (the unit and integration tests) would find a loop running.
@pytest.fixture(scope="package")
def browser():
    sync_api = pytest.importorskip("playwright.sync_api")
    if not shutil.which(CHROMIUM):
        pytest.fail(f"no chromium at {CHROMIUM}: bash scripts/chromium.sh (apt-get install -y chromium), or set CROUPIER_CHROMIUM")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


class Table:
    """One player's page, with the steps a person takes on it."""

    def __init__(self, page, url: str) -> None:
        self.page = page
        self.url = url
        self.errors: list[str] = []
        page.on("pageerror", lambda error: self.errors.append(str(error)))

    def sign_in(self, name: str | None = None, top_up: int = 1000) -> str:
        name = name or f"web-{uuid.uuid4().hex[:8]}"
        page = self.page
        page.goto(self.url)
        page.wait_for_selector("#app[data-ready='1']")
        page.fill("#player", name)
        page.click("#login")
        page.wait_for_selector("#signed-in:not([hidden])")
        self.idle()
        if top_up:
            page.fill("#topup-amount", str(top_up))
            page.click("#topup")
            self.idle()
        return name

    def idle(self) -> None:
        self.page.wait_for_selector("body:not([data-busy])")

    def balance(self) -> int:
        self.idle()
        return int(self.page.get_attribute("#balance", "data-minor") or 0)

    def wait_balance(self, expected: int) -> int:
        """The balance the page shows once it is `expected` (a settlement reaches the wallet a moment
        after the round; the page refreshes it each second), or what it shows at the timeout."""
        try:
            self.page.wait_for_function(f"document.querySelector('#balance').dataset.minor === '{expected}'")
        except Exception:  # noqa: BLE001 - the assertion that follows says what was shown
            pass
        return self.balance()

    def join(self, table_id: str, role: str = "player", auto_confirm: bool = False, nickname: str = "") -> None:
        page = self.page
        page.select_option("#table", table_id)
        page.fill("#nickname", nickname)
        page.set_checked("#auto-confirm", auto_confirm)
        page.click("#join" if role == "player" else "#join-dealer")
        self.idle()
        page.wait_for_selector("#seat:not([hidden])")

    def set_bet(self, bet: str, chips: list[int]) -> None:
        """Clear the bet's circle, then for each chip: pick it from the rack and click the circle."""
        self.page.click(f"button[data-clear='{bet}']")
        for chip in chips:
            self.page.click(f"#rack button.chip[data-chip='{chip}']")
            self.page.click(f"button.circle[data-bet='{bet}']")

    def bet(self, bet: str) -> int:
        """The amount on the bet's circle, minor units."""
        return int(self.page.get_attribute(f"#bet-{bet}", "data-minor") or 0)

    def status(self, field: str) -> str:
        """A seat status box's value as the server sent it (data-value: the raw figure, not the formatted text)."""
        return self.page.get_attribute(f"#seat-status output[data-field='{field}']", "data-value") or ""

    def play_round(self, choose=None, rebet: bool = False) -> str:
        """Place the bets (or rebet) and deal, decide while asked (the first choice unless `choose`
        picks), until settled and checked in the page; the verdict element's state."""
        page = self.page
        before = page.get_attribute("#round", "data-round") or ""
        page.click("#rebet" if rebet else "#place")
        self.idle()
        assert not self.error(), f"the server refused: {self.error()}"
        # The new round on the felt (the last one's phase and verdict stand until it replaces them).
        page.wait_for_function(
            "before => { const r = document.querySelector('#round'); return r.dataset.round && r.dataset.round !== before"
            " && r.dataset.phase && r.dataset.phase !== 'betting'; }", arg=before, timeout=TIMEOUT_MS,
        )  # fmt: skip
        deadline = time.monotonic() + TIMEOUT_MS / 1000
        while page.get_attribute("#round", "data-phase") == "deciding" and time.monotonic() < deadline:
            buttons = page.locator("button.decision")
            choices = [buttons.nth(i).get_attribute("data-choice") for i in range(buttons.count())]
            pick = choose(choices) if choose else choices[0]
            page.click(f"button.decision[data-choice='{pick}'] >> nth=0")
            self.idle()
        return self.verdict(page.get_attribute("#round", "data-round") or "")

    def verdict(self, round_id: str = "") -> str:
        """The verdict's state once the page has checked the round (`round_id`: that round's, not the last one's)."""
        mine = f"[data-round='{round_id}']" if round_id else ""
        self.page.wait_for_selector(f"#verdict{mine}[data-state='ok'], #verdict{mine}[data-state='failed']", timeout=TIMEOUT_MS)
        return self.page.get_attribute("#verdict", "data-state") or ""

    def boxes_against_server(self) -> dict[str, list[str]]:
        """Each seat status box (and the balance) whose figure differs from GetSeatStatus read now, through
        the page's own client: {field: [shown, the server's]}."""
        return self.page.evaluate("""async () => {
          const seatId = document.querySelector('#seat-title').dataset.seat;
          const { status } = await window.croupier.tables.getSeatStatus({ seatId });
          const differ = {};
          for (const box of document.querySelectorAll('#seat-status output[data-field]')) {
            const server = String(status[box.dataset.field]);
            if (server !== box.dataset.value) differ[box.dataset.field] = [box.dataset.value, server];
          }
          const balance = document.querySelector('#balance').dataset.minor;
          if (String(status.balance) !== balance) differ.balance = [balance, String(status.balance)];
          return differ;
        }""")

    def wait_boxes_equal_server(self) -> None:
        """The boxes once they show the server's figures (settled by other services a moment after a round)."""
        deadline = time.monotonic() + TIMEOUT_MS / 1000
        while (differ := self.boxes_against_server()) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert differ == {}, f"the boxes differ from GetSeatStatus: {differ}"

    def error(self) -> str:
        box = self.page.locator("#error")
        return box.text_content() or "" if box.is_visible() else ""


@pytest.fixture
def open_table(browser, web_server, request):
    """open_table() -> a fresh browser context's page (its own cookies and storage) at the web table."""
    contexts = []
    request.node.pages = []

    def open_one(url: str = web_server, viewport: tuple[int, int] = (1100, 900), **context_options) -> Table:
        context = browser.new_context(viewport={"width": viewport[0], "height": viewport[1]}, **context_options)
        context.set_default_timeout(TIMEOUT_MS)
        contexts.append(context)
        page = context.new_page()
        request.node.pages.append(page)
        return Table(page, url)

    yield open_one
    for context in contexts:
        context.close()
