"""The game service's configuration: where its table catalogue comes from."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

TABLES_ENV = "CROUPIER_TABLES"
DEFAULT_TABLES_FILE = Path(__file__).with_name("tables.toml")
# The relay is woken after every commit; the poll is only a safety net (rows another replica left).
RELAY_POLL_INTERVAL_S = 0.5


def tables_file(explicit: Path | None = None, environ: Mapping[str, str] = os.environ) -> Path:
    """An explicit path first, then $CROUPIER_TABLES, then the catalogue shipped with the service."""
    if explicit is not None:
        return explicit
    if environ.get(TABLES_ENV):
        return Path(environ[TABLES_ENV])
    return DEFAULT_TABLES_FILE
