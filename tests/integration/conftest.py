"""Fixtures shared by the integration tests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from scheduler.store import Store, open_store


@pytest.fixture(params=["sqlite", "postgres"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    """A fresh store on each backend: SQLite in the test's directory, PostgreSQL in its
    own database cloned from the migrated template. A package that needs another store
    (``store/`` with its config, the SQLite-only spill tests) defines its own."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path}/tickwheel.db"
    else:
        url = request.getfixturevalue("pg_dsn")
    s = await open_store(url)
    try:
        yield s
    finally:
        await s.close()
