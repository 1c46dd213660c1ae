"""Every relative link and #anchor of the repository's pages (the README, docs/, the notes beside the code)
resolves: the file (or folder) exists inside the repository, and an anchor names a heading of its Markdown
page as GitHub slugs it. The README stays a front door (at most 250 lines), and neither it nor docs/ sends a
reader outside the repository's tree."""

import re
import unicodedata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
# The README, docs/, and the notes beside the code (bench/PROFILE.md, migrations/, services' READMEs).
_NOT_OURS = {".git", ".venv", "node_modules", "var", "build", "dist"}
PAGES = sorted(page for page in ROOT.rglob("*.md") if not _NOT_OURS & set(page.relative_to(ROOT).parts))
USERS_PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
README_MAX_LINES = 250

_FENCE = re.compile(r"^\s*(```|~~~)")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_CODE_SPAN = re.compile(r"(`+)(.+?)\1")
_LINK = re.compile(r"!?\[((?:[^\[\]]|\[[^\]]*\])*)\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def prose_lines(text: str) -> list[tuple[int, str]]:
    """The page's lines outside fenced code blocks, numbered from 1."""
    lines, fenced = [], False
    for number, line in enumerate(text.splitlines(), start=1):
        if _FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            lines.append((number, line))
    return lines


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: its rendered text lower-cased, punctuation and symbols dropped
    (letters, digits, marks, `-` and `_` stay), each space a hyphen."""
    text = _LINK.sub(lambda link: link.group(1), heading)
    text = _CODE_SPAN.sub(lambda span: span.group(2), text)
    text = re.sub(r"(?<!\w)_(.+?)_(?!\w)", r"\1", text)  # _emphasis_, not snake_case
    kept = (c for c in text.lower() if c in " -_" or unicodedata.category(c)[0] in "LNM")
    return "".join(kept).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """Every anchor the page's headings give, a repeated one numbered as GitHub numbers it (-1, -2, …)."""
    seen: dict[str, int] = {}
    found = set()
    for _, line in prose_lines(page.read_text()):
        heading = _HEADING.match(line)
        if heading:
            base = slug(heading.group(2))
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else f"{base}-{count}")
    return found


def broken_links(page: Path, root: Path = ROOT) -> list[str]:
    """What is wrong with each relative link of the page, one line each (none: every link resolves)."""
    problems = []
    for number, line in prose_lines(page.read_text()):
        for match in _LINK.finditer(_CODE_SPAN.sub("", line)):
            target = match.group(2)
            if not target or _SCHEME.match(target):
                continue
            path_part, _, anchor = target.partition("#")
            where = f"{page.relative_to(root)}:{number}: ({target})"
            resolved = (page.parent / path_part).resolve() if path_part else page
            if not resolved.is_relative_to(root.resolve()):
                problems.append(f"{where} leaves the repository")
            elif not resolved.exists():
                problems.append(f"{where} names no file: {resolved.relative_to(root.resolve())} does not exist")
            elif anchor and resolved.suffix != ".md":
                problems.append(f"{where} has an anchor, but {resolved.name} is not a Markdown page")
            elif anchor and anchor not in anchors(resolved):
                problems.append(f"{where} names no heading of {resolved.name}: no #{anchor} there")
    return problems


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(ROOT)))
def test_every_relative_link_and_anchor_resolves(page: Path) -> None:
    assert broken_links(page) == []


@pytest.mark.parametrize("page", USERS_PAGES, ids=lambda page: str(page.relative_to(ROOT)))
def test_no_users_page_sends_readers_outside_the_repository(page: Path) -> None:
    text = page.read_text()
    assert "../shared" not in text and "/work/" not in text


def test_the_readme_is_a_front_door_with_contents() -> None:
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= README_MAX_LINES, "the reference belongs in docs/, the README links to it"
    assert "\n## Contents\n" in readme


def test_the_checker_finds_a_missing_file_a_missing_anchor_and_an_exit(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "guide.md").write_text("# Guide\n\n## Run it — `make run`\n\n## Run it — `make run`\n")
    page = tmp_path / "README.md"
    page.write_text(
        "# Title\n\n"
        "[ok](docs/guide.md#run-it--make-run) [ok](docs/guide.md#run-it--make-run-1) [ok](#title) [ok](docs)\n"
        "[web](https://example.com/x#y) `[code](nowhere.md)`\n"
        "```\n[fenced](nowhere.md)\n```\n"
        "[gone](docs/missing.md) [bad anchor](docs/guide.md#walk) [self](#nothing) [out](../shared/STYLE.md)\n"
    )

    problems = broken_links(page, root=tmp_path)

    assert [problem.split(": (")[1].split(")")[0] for problem in problems] == [
        "docs/missing.md", "docs/guide.md#walk", "#nothing", "../shared/STYLE.md",
    ]
    assert "does not exist" in problems[0] and "no #walk" in problems[1] and "leaves the repository" in problems[3]


@pytest.mark.parametrize(
    ("heading", "anchor"),
    [
        ("2. War with a player-dealer — `war-p2p`", "2-war-with-a-player-dealer--war-p2p"),
        ("Live streams: WatchSeat and WatchRound", "live-streams-watchseat-and-watchround"),
        ("PAR sheets: `croupier par`", "par-sheets-croupier-par"),
        ("Casino Hold'em — `casino-holdem`", "casino-holdem--casino-holdem"),
        ("The [API](docs/api.md) and **its** errors", "the-api-and-its-errors"),
        ("`idle_limit_s` and _emphasis_", "idle_limit_s-and-emphasis"),
    ],
)
def test_anchors_are_githubs_slugs(heading: str, anchor: str) -> None:
    assert slug(heading) == anchor
