import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CROUPIER = str(Path(sys.executable).parent / "croupier")


def pytest_configure(config):
    os.environ.setdefault("CROUPIER_ROOT", str(ROOT))
