"""Fixtures of the store tests (every test runs on PostgreSQL and SQLite through the one
``store`` fixture of ``tests/support/stores.py``): the config they open with and a
tenant of the test's own. The builders (``NOW``, ``new_task``, ``running``,
``force_status``, ``count_rows``, ``system_conn``) are in ``tests/support/stores.py``."""

from __future__ import annotations

import pytest

from scheduler.store import Store, StoreConfig
from scheduler.types import Tenant
from tests.support.stores import new_tenant


@pytest.fixture
def store_config() -> StoreConfig:
    """A pre-load sweep of every day on every claim (no ``preload_sweep_interval_s``
    wait), so a test sees each claim take every due row."""
    return StoreConfig(preload_sweep_interval_s=0)


@pytest.fixture
async def tenant(store: Store) -> Tenant:
    """A tenant of this test's own."""
    return await store.create_tenant(new_tenant())
