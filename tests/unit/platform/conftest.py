"""Engine fixtures for the platform's contract suites.

A PostgreSQL subclass of a contract only needs an `engine` fixture built like `sqlite_engine`,
from a server URL, under @pytest.mark.integration.
"""

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine

from croupier_platform.db import create_schema, make_engine


@pytest.fixture
def sqlite_engine(tmp_path: Path) -> Iterator[Engine]:
    engine = make_engine(f"sqlite:///{tmp_path / 'var' / 'croupier.db'}")
    create_schema(engine)
    yield engine
    engine.dispose()
