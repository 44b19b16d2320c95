"""The dead man's switch against a real database (SQLite file and PostgreSQL): a healthy
schedule raises nothing; a stopped scheduler alerts within interval + tolerance + check
interval, once, over a webhook; recovery resolves it. The canary records its times."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from scheduler.engine import Engine, WorkerHello
from scheduler.engine._schedules import ScheduleSpec
from scheduler.store import Store, open_store
from scheduler.types import Expectation, OverlapPolicy
from scheduler.watchdog import Case, Watchdog, WatchdogConfig
from tests.integration.workflows.conftest import Completer
from tests.support.clock import FakeClock
from tests.support.engine import engine_config
from tests.support.waiting import eventually

CONFIG = engine_config(schedule_interval_s=3600, schedule_lead_s=0)
INTERVAL_S, TOLERANCE_S, CHECK_S = 60, 30, 20


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/wd.db"
    return str(request.getfixturevalue("pg_dsn"))


@pytest.fixture
async def store(url: str) -> AsyncIterator[Store]:
    s = await open_store(url)
    try:
        yield s
    finally:
        await s.close()


class Hook:
    """A loopback HTTP server that records JSON bodies; fails the first ``fail`` POSTs."""

    def __init__(self, fail: int = 0) -> None:
        self.bodies: list[dict[str, object]] = []
        self.fail = fail
        self.server: asyncio.Server | None = None

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(
            int(line.split(b":")[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length")
        )
        body = await reader.readexactly(length)
        if self.fail > 0:
            self.fail -= 1
            writer.write(b"HTTP/1.1 500 Oops\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        else:
            self.bodies.append(json.loads(body))
            writer.write(b"HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n")
        await writer.drain()
        writer.close()

    async def start(self) -> str:
        self.server = await asyncio.start_server(self.handle, "127.0.0.1", 0)
        port = self.server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}/hook"

    async def stop(self) -> None:
        assert self.server is not None
        self.server.close()
        await self.server.wait_closed()


async def _setup(engine: Engine, store: Store) -> tuple[uuid.UUID, uuid.UUID]:
    t = await engine.tenancy.create_tenant(name="acme", rate_limit_rps=100_000)
    s = await engine.schedules.create(
        t.id,
        ScheduleSpec(
            name="ledger",
            task_type="step",
            interval_s=INTERVAL_S,
            overlap_policy=OverlapPolicy.ALLOW,
            jitter_s=0,  # each occurrence due on its instant (the fake clock steps to it)
        ),
    )
    await store.register_expectation(
        Expectation(
            id=uuid.uuid4(),
            tenant_id=t.id,
            job_id="ledger",
            schedule_id=s.id,
            interval_s=INTERVAL_S,
            tolerance_s=TOLERANCE_S,
            created_at=engine.now(),
        )
    )
    return t.id, s.id


async def _tick(engine: Engine, clock: FakeClock, completer: Completer, seconds: float) -> None:
    """Move time; the schedule fires; the worker completes what came due."""
    before = len(completer.done)
    clock.advance(seconds)
    fired = await engine.schedules.run_once()
    engine.wake()
    if fired:
        await eventually(lambda: _n(completer), until=lambda n: n >= before + fired)


async def _n(c: Completer) -> int:
    return len(c.done)


async def test_healthy_then_stopped_then_recovered(url: str, store: Store) -> None:
    clock = FakeClock(datetime.now(UTC).replace(microsecond=0))
    engine = Engine(store, CONFIG, clock=clock)
    await engine.start()
    tenant, _ = await _setup(engine, store)
    session = await engine.open_session(
        WorkerHello(worker_id="w", tenant_id=tenant, task_types=frozenset({"step"}), slots=10)
    )
    completer = Completer(session)
    hook = Hook(fail=1)  # the first POST fails: the sink retries
    dog = Watchdog(
        WatchdogConfig(
            database_url=url,
            check_interval_s=CHECK_S,
            webhook_url=await hook.start(),
            webhook_backoff_s=0.01,
            canary=False,
        ),
        now=clock,
    )
    try:
        # Healthy: ten minutes of checks every CHECK_S, the job completes every minute.
        for _ in range(30):
            await _tick(engine, clock, completer, CHECK_S)
            assert await dog.check_once() == []
        last_completion = clock.current
        # The scheduler stops (no more schedule passes, no completions).
        await completer.close()
        await engine.stop()
        first_alert = None
        for _ in range(20):
            clock.advance(CHECK_S)
            alerts = await dog.check_once()
            if alerts:
                first_alert = clock.current
                (alert,) = alerts
                assert alert.case is Case.NEVER_STARTED
                break
        assert first_alert is not None
        bound = timedelta(seconds=INTERVAL_S + TOLERANCE_S + CHECK_S)
        assert first_alert - last_completion <= bound
        # Deduplicated: later checks keep it firing without sending it again.
        clock.advance(CHECK_S)
        assert len(await dog.check_once()) == 1
        assert [b["event"] for b in hook.bodies] == ["firing"]
        assert hook.bodies[0]["case"] == "never_started"
        # The scheduler comes back: the next occurrence completes and the alert resolves.
        engine = Engine(store, CONFIG, clock=clock)
        await engine.start()
        session = await engine.open_session(
            WorkerHello(worker_id="w2", tenant_id=tenant, task_types=frozenset({"step"}), slots=10)
        )
        completer = Completer(session)
        await _tick(engine, clock, completer, 1)
        # The engine's own first schedule pass (at start) may have fired the occurrence
        # before the tick's pass did (which then fires nothing and waits for nothing):
        # either way the next occurrence completes.
        await eventually(lambda: _n(completer), until=lambda n: n >= 1, what="a completion")
        assert await dog.check_once() == []
        assert [b["event"] for b in hook.bodies] == ["firing", "resolved"]
    finally:
        await completer.close()
        await engine.stop()
        await hook.stop()
        await dog.source.close()


async def test_canary_records_scheduled_dispatched_completed(url: str, store: Store) -> None:
    clock = FakeClock(datetime.now(UTC).replace(microsecond=0))
    engine = Engine(store, engine_config(canary_interval_s=60), clock=clock)
    await engine.start()
    dog = Watchdog(WatchdogConfig(database_url=url, canary_stale_s=150), now=clock)
    try:
        slot = await engine.canary.schedule_next()
        clock.current = slot
        engine.wake()
        facts = await eventually(
            dog.source.canary, until=lambda f: f.last_completed is not None, what="canary done"
        )
        assert facts.latest_scheduled == slot
        assert facts.latest_dispatched == slot
        assert list(engine.stats.canary_lag_ms) == [0.0]
        assert await dog.check_once() == []
        # Canaries stop (scheduler down): the watchdog says so.
        await engine.stop()
        clock.advance(200)
        (alert,) = await dog.check_once()
        assert alert.case is Case.CANARY_STOPPED
    finally:
        await engine.stop()
        await dog.source.close()
