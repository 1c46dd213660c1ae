"""The proto tree (proto/) passes `buf lint` with buf's standard rules and no exceptions: every RPC has its own
<Rpc>Request and <Rpc>Response, internal services live in their own package, names follow buf's style guide.

buf is built by `make install` (go install) into the venv; without Go the lint is skipped, saying so."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
BUF = ROOT / ".venv" / "bin" / "buf"
EXCEPTION_KEYS = ("except", "ignore", "ignore_only")


def _buf() -> str:
    found = str(BUF) if BUF.exists() else shutil.which("buf")
    if found is None:
        pytest.skip("buf is not built: `make install` builds it with `go install github.com/bufbuild/buf/cmd/buf@v1.75.0` (needs Go)")
    return found


def test_buf_yaml_uses_the_standard_rules_without_exceptions() -> None:
    config = yaml.safe_load((ROOT / "buf.yaml").read_text(encoding="utf-8"))
    assert config["modules"] == [{"path": "proto"}]
    assert config["lint"]["use"] == ["STANDARD"]
    assert not [key for key in EXCEPTION_KEYS if config["lint"].get(key)]
    assert config["lint"]["disallow_comment_ignores"] is True  # no `// buf:lint:ignore` in a proto either


def test_buf_lint_finds_nothing() -> None:
    result = subprocess.run([_buf(), "lint", "--error-format=text"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    findings = (result.stdout + result.stderr).strip()
    assert result.returncode == 0 and not findings, f"buf lint:\n{findings}"

