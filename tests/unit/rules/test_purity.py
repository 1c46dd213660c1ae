import importlib.util
from pathlib import Path

LINT = Path(__file__).resolve().parents[3] / "scripts" / "lint_rules_purity.py"


def test_rules_library_imports_nothing_impure():
    spec = importlib.util.spec_from_file_location("lint_rules_purity", LINT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.problems() == []
