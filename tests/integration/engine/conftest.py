"""The engine on a real store (PostgreSQL and SQLite, the ``store`` fixture): the
fixtures most engine tests share.

``engine`` runs :data:`CONFIG` on a :class:`~tests.support.clock.FakeClock` (the
``clock`` fixture, so a test can move time); ``tenant`` is one tenant of it; ``hello``
is a worker "w" of type "email". A test module that needs another configuration
defines its own ``engine`` fixture, which takes precedence over this one.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest

from scheduler.engine import Engine, WorkerHello
from scheduler.store import Store
from tests.support.clock import FakeClock
from tests.support.engine import engine_config, started

CONFIG = engine_config()


@pytest.fixture
async def engine(store: Store, clock: FakeClock) -> AsyncIterator[Engine]:
    async with started(store, CONFIG, clock=clock) as e:
        yield e


@pytest.fixture
async def tenant(engine: Engine) -> uuid.UUID:
    return (await engine.tenancy.create_tenant(name="acme")).id


def hello(tenant: uuid.UUID, worker_id: str = "w", slots: int = 1) -> WorkerHello:
    """A worker of ``tenant`` for tasks of type "email"."""
    return WorkerHello(
        worker_id=worker_id, tenant_id=tenant, task_types=frozenset({"email"}), slots=slots
    )
