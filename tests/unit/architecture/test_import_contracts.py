"""The layers hold: the import contracts in pyproject.toml ([tool.importlinter]) are kept, so the suite
fails on an import that breaks one, as `make lint` does. The contracts name every service, and the
checker this runs does fail on a broken contract."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def _lint_imports(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(LINT_IMPORTS), "--no-cache", *args], cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_the_import_contracts_are_kept() -> None:
    result = _lint_imports()
    assert result.returncode == 0, f"an import breaks the layers (pyproject.toml [tool.importlinter]):\n{result.stdout}{result.stderr}"
    assert "0 broken" in result.stdout


def test_the_contracts_name_every_service() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]
    services = {f"croupier_{path.name}" for path in (ROOT / "services").iterdir() if (path / "src").is_dir()}
    contracts = {contract["id"]: contract for contract in config["contracts"]}
    assert set(contracts["service-layers"]["containers"]) == services
    assert set(contracts["services-independent"]["modules"]) == services
    assert {module.rsplit(".", 1)[0] for module in contracts["domain-no-storage"]["source_modules"]} == services
    assert services <= set(config["root_packages"])


def test_a_broken_contract_fails_the_check(tmp_path: Path) -> None:
    """An arrow the game has (its application imports its domain) forbidden: the checker reports it broken."""
    broken = tmp_path / "importlinter.toml"
    broken.write_text(
        '[tool.importlinter]\nroot_packages = ["croupier_game"]\n\n'
        '[[tool.importlinter.contracts]]\nname = "reversed on purpose"\ntype = "forbidden"\n'
        'source_modules = ["croupier_game.application"]\nforbidden_modules = ["croupier_game.domain"]\n',
        encoding="utf-8",
    )
    result = _lint_imports("--config", str(broken))
    assert result.returncode != 0
    assert "reversed on purpose BROKEN" in result.stdout
