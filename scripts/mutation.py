"""Mutation testing of the rules library with mutmut 3 (`make mutation`); too slow for CI.

    python scripts/mutation.py run [MODULE ...]   mutate and test (all modules, or e.g. `money games`)
    python scripts/mutation.py score              killed / total per module, also without string-only mutants
    python scripts/mutation.py survivors          the surviving mutants' names (`mutmut show NAME` in build/mutation)

mutmut 3 names a mutant after its import path below ./, src/ or source/, and the tests import
`croupier_rules` from libs/rules/src. So mutmut runs in build/mutation, where src/, tests/, docs/,
scripts/, examples/ and pyproject.toml (its [tool.mutmut] section) are links into the repository;
it copies and mutates them into build/mutation/mutants/ and never writes to the tree itself.
MODULE is a module of croupier_rules (games, round_decider, money, fairness, round_checker, or games.dueling, ...).
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORK = ROOT / "build" / "mutation"
LINKS = {
    "src": ROOT / "libs" / "rules" / "src",
    "tests": ROOT / "tests",
    "docs": ROOT / "docs",
    "scripts": ROOT / "scripts",
    "examples": ROOT / "examples",
    "pyproject.toml": ROOT / "pyproject.toml",
}
PACKAGE = "croupier_rules"
# exit codes as mutmut 3.8 records them (mutmut/stats.py)
KILLED = {1, 3}
SURVIVED = {0}
TIMEOUT = {36, -24, 24, 152, 255}
NOT_RUN = {None, 5, 33, 34}  # not checked yet, no covering test, skipped


def prepare() -> None:
    WORK.mkdir(parents=True, exist_ok=True)
    for name, target in LINKS.items():
        link = WORK / name
        if link.is_symlink() and link.resolve() == target:
            continue
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(target)


def run(modules: list[str]) -> int:
    prepare()
    mutmut = Path(sys.executable).parent / "mutmut"
    names = [f"{PACKAGE}.{m}.*" for m in modules]
    return subprocess.call([str(mutmut), "run", *names], cwd=WORK)


def _module_of(meta: Path) -> str:
    # build/mutation/mutants/src/croupier_rules/games/dueling.py.meta -> games.dueling
    relative = meta.relative_to(WORK / "mutants" / "src" / PACKAGE)
    return str(relative)[: -len(".py.meta")].replace(os.sep, ".")


def _string_only(source: Path) -> set[str]:
    """Mutant keys (x_f__mutmut_3) whose function differs from the original in string literals only."""
    tree = ast.parse(source.read_text())
    dumps: dict[str, str] = {}

    class Blank(ast.NodeTransformer):
        def visit_Constant(self, node: ast.Constant) -> ast.AST:
            return ast.copy_location(ast.Constant(value=""), node) if isinstance(node.value, str) else node

    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and "__mutmut_" in node.name:
            name = node.name
            node.name = ""
            node.decorator_list = []
            dumps[name] = ast.dump(Blank().visit(node))
    only = set()
    for name, dump in dumps.items():
        base, _, suffix = name.rpartition("__mutmut_")
        if suffix != "orig" and dumps.get(f"{base}__mutmut_orig") == dump:
            only.add(name)
    return only


def results() -> dict[str, dict[str, tuple[int | None, bool]]]:
    """{module: {mutant: (exit code, string-only)}} from mutmut's .meta files."""
    by_module: dict[str, dict[str, tuple[int | None, bool]]] = defaultdict(dict)
    for meta in sorted((WORK / "mutants" / "src" / PACKAGE).rglob("*.py.meta")):
        codes = json.loads(meta.read_text())["exit_code_by_key"]
        string_only = _string_only(meta.with_suffix(""))
        for key, code in codes.items():
            local = key.rpartition(".")[2]
            by_module[_module_of(meta)][key] = (code, local in string_only)
    return by_module


def score() -> int:
    by_module = results()
    if not by_module:
        print("no results: run `make mutation` (or scripts/mutation.py run) first", file=sys.stderr)
        return 1
    header = f"{'module':<22}{'killed/total':>14}{'score':>9}{'without strings':>22}{'survived':>10}{'timeout':>9}{'untested':>10}"
    print(header)
    totals = defaultdict(int)
    groups = {"games": [m for m in by_module if m.startswith("games.")]}
    rows = [(m, [m]) for m in sorted(by_module)] + [("games (all)", groups["games"]), ("all", list(by_module))]
    for label, modules in rows:
        mutants = [v for m in modules for v in by_module[m].values()]
        tested = [(c, s) for c, s in mutants if c not in NOT_RUN]
        killed = sum(1 for c, _ in tested if c in KILLED or c in TIMEOUT)
        total = len(tested)
        no_str = [(c, s) for c, s in tested if not s]
        killed_no_str = sum(1 for c, _ in no_str if c in KILLED or c in TIMEOUT)
        survived = sum(1 for c, _ in tested if c in SURVIVED)
        timeout = sum(1 for c, _ in tested if c in TIMEOUT)
        untested = len(mutants) - total
        pct = f"{100 * killed / total:.1f}%" if total else "-"
        pct_no_str = f"{killed_no_str}/{len(no_str)} {100 * killed_no_str / len(no_str):.1f}%" if no_str else "-"
        if label in ("games (all)", "all"):
            print("-" * len(header))
        print(f"{label:<22}{f'{killed}/{total}':>14}{pct:>9}{pct_no_str:>22}{survived:>10}{timeout:>9}{untested:>10}")
    print("(killed counts timeouts; 'without strings' leaves out mutants that only change a string literal;"
          " 'untested' were not run, or have no covering test)")
    return 0


def survivors() -> int:
    for module, mutants in sorted(results().items()):
        for key, (code, string_only) in sorted(mutants.items()):
            if code not in NOT_RUN and code not in KILLED and code not in TIMEOUT:
                print(f"{key}  exit={code}{'  (string only)' if string_only else ''}")
    return 0


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in ("run", "score", "survivors"):
        print(__doc__, file=sys.stderr)
        return 2
    if argv[0] == "run":
        status = run(argv[1:])
        score()
        return status
    return score() if argv[0] == "score" else survivors()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
