"""Fixtures for workflow tests: an engine over each store (``store`` comes from
tests/integration/conftest.py), and a worker that completes."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator

import pytest

from scheduler.engine import AssignmentBatch, Engine, WorkerHello, WorkerSession
from scheduler.store import Store
from scheduler.types import Completion, FencedWrite
from tests.support.clock import FakeClock
from tests.support.engine import engine_config, started

CONFIG = engine_config()


@pytest.fixture
async def engine(store: Store, clock: FakeClock) -> AsyncIterator[Engine]:
    async with started(store, CONFIG, clock=clock) as e:
        yield e


@pytest.fixture
async def tenant(engine: Engine) -> uuid.UUID:
    # FakeClock never refills the rate bucket: give the tenant room for 10,000+ tasks.
    t = await engine.tenancy.create_tenant(
        name="acme", rate_limit_rps=1_000_000, max_concurrent_workers=100_000
    )
    return t.id


class Completer:
    """A worker on an engine session that acks and completes whatever it receives,
    recording the order; ``fail_types`` fail instead (not retryable)."""

    def __init__(self, session: WorkerSession, fail_types: frozenset[str] = frozenset()) -> None:
        self.session = session
        self.fail_types = fail_types
        self.done: list[uuid.UUID] = []
        self.payloads: dict[uuid.UUID, dict[str, object]] = {}
        self._task = asyncio.create_task(self._run(), name="test-completer")

    async def _run(self) -> None:
        from scheduler.engine import FailureReport

        while True:
            event = await self.session.next_event()
            if event is None:
                return
            if not isinstance(event, AssignmentBatch):
                continue
            batch = event.assignments
            await self.session.ack([FencedWrite(key=a.key, token=a.fencing_token) for a in batch])
            ok = [a for a in batch if a.type not in self.fail_types]
            bad = [a for a in batch if a.type in self.fail_types]
            if bad:
                await self.session.fail(
                    [
                        FailureReport(
                            key=a.key, token=a.fencing_token, error="boom", retryable=False
                        )
                        for a in bad
                    ]
                )
            if ok:
                await self.session.complete(
                    [Completion(key=a.key, token=a.fencing_token) for a in ok]
                )
            for a in batch:
                self.payloads[a.key.id] = a.payload
            # Recorded once the write returned: ``done`` holds only committed
            # completions (the watchdog's tests read the store right after). A test
            # that waits on the store's states must also wait for ``done``: this
            # coroutine may not have run again yet.
            self.done.extend(a.key.id for a in ok)
            self.session.grant(len(batch))

    async def close(self) -> None:
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        await self.session.close()


@pytest.fixture
async def completer(engine: Engine, tenant: uuid.UUID) -> AsyncIterator[Completer]:
    session = await engine.open_session(
        WorkerHello(
            worker_id="w1", tenant_id=tenant, task_types=frozenset({"step", "bad"}), slots=20_000
        )
    )
    c = Completer(session, frozenset({"bad"}))
    try:
        yield c
    finally:
        await c.close()
