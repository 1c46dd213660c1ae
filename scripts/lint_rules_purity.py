"""The rules library is pure: it imports only the standard library, pydantic and itself,
and never reaches for a clock, randomness, ids or I/O. Run by `make lint` and by the tests."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

RULES = Path(__file__).resolve().parents[1] / "libs" / "rules" / "src" / "croupier_rules"
ALLOWED_ROOTS = {"pydantic", "croupier_rules"}
FORBIDDEN_MODULES = {"random", "secrets", "uuid", "time", "datetime", "os", "socket", "subprocess", "io", "pathlib",
                     "shutil", "tempfile", "threading", "asyncio", "sqlite3", "logging"}
FORBIDDEN_CALLS = {"open", "input", "print"}


def problems() -> list[str]:
    found: list[str] = []
    stdlib = set(sys.stdlib_module_names)
    for path in sorted(RULES.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            for name in names:
                root = name.split(".")[0]
                if root in FORBIDDEN_MODULES:
                    found.append(f"{path.name}:{node.lineno} imports {name}: no clock, randomness, ids or I/O in the rules")
                elif root not in stdlib and root not in ALLOWED_ROOTS and root != "__future__":
                    found.append(f"{path.name}:{node.lineno} imports {name}: the rules use only the standard library and pydantic")
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in FORBIDDEN_CALLS:
                found.append(f"{path.name}:{node.lineno} calls {node.func.id}(): the rules do no I/O")
    return found


if __name__ == "__main__":
    issues = problems()
    for issue in issues:
        print(issue)
    sys.exit(1 if issues else 0)
