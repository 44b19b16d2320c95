"""The canary: a task scheduled every ``canary_interval_s`` that measures real lag.

Each node schedules the next canary at the next multiple of the interval (an id and
idempotency key derived from that instant, so all nodes agree and it exists once),
records it in ``canary_executions`` (scheduled time), and runs it on a built-in
in-process worker session of the SYSTEM tenant (type ``tickwheel.canary``), which
records the dispatched and completed times. The lag (dispatched - scheduled) goes to
``EngineStats.canary_lag_ms``; ``tickwheel watchdog`` alerts when canaries stop
completing or lag past its threshold. The canary travels the whole real path (store,
pre-loader, wheel, dispatcher, session, fenced completion) minus the network hop to an
external worker.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

from scheduler._aio import cancel_and_wait, wait_event
from scheduler._errors import NotFound
from scheduler.engine._admission import Admission
from scheduler.engine._config import EngineConfig
from scheduler.engine._sessions import WorkerSession
from scheduler.engine._stats import EngineStats
from scheduler.engine._timeline import Timeline
from scheduler.engine._types import AssignmentBatch, SubmitSpec, WorkerHello
from scheduler.jsonbytes import as_dict
from scheduler.logs import task_extra
from scheduler.store import Store
from scheduler.types import Completion, FencedWrite, Pool, Tenant

log = logging.getLogger("tickwheel.engine.canary")

SYSTEM_TENANT_ID = uuid.UUID("00000000-0000-0000-0000-00000000c0de")
"""The SYSTEM tenant that owns canary tasks."""
CANARY_TYPE = "tickwheel.canary"
_NAMESPACE = uuid.UUID("5d6f0c8e-2b7a-4c61-9d1e-7ac0ffee0001")


def canary_id(at: datetime) -> uuid.UUID:
    """The id of the canary scheduled at ``at`` (the same on every node)."""
    return uuid.uuid5(_NAMESPACE, at.astimezone(UTC).isoformat())


class Canary:
    """Schedules canaries and runs them on an in-process session."""

    def __init__(
        self,
        store: Store,
        config: EngineConfig,
        now: Callable[[], datetime],
        node_id: str,
        admission: Admission,
        timeline: Timeline,
        stats: EngineStats,
        open_session: Callable[[WorkerHello], Awaitable[WorkerSession]],
    ) -> None:
        self._store = store
        self._config = config
        self._now = now
        self._node_id = node_id
        self._admission = admission
        self._timeline = timeline
        self._stats = stats
        self._open_session = open_session
        self._session: WorkerSession | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._wake = asyncio.Event()

    def wake(self) -> None:
        """Schedule the next canary now (after a fake clock moved)."""
        self._wake.set()

    async def _ensure_tenant(self) -> None:
        store = self._store
        try:
            await store.get_tenant(SYSTEM_TENANT_ID)
        except NotFound:
            with contextlib.suppress(Exception):
                await store.create_tenant(
                    Tenant(id=SYSTEM_TENANT_ID, name="tickwheel-system", tier="SYSTEM")
                )

    async def start(self) -> None:
        """Open the built-in session and start both loops."""
        if self._tasks:
            return
        await self._ensure_tenant()
        self._session = await self._open_session(
            WorkerHello(
                worker_id=f"{self._node_id}/canary",
                tenant_id=SYSTEM_TENANT_ID,
                task_types=frozenset({CANARY_TYPE}),
                slots=8,
            )
        )
        self._tasks = [
            asyncio.create_task(self._schedule_loop(), name="tickwheel-canary-scheduler"),
            asyncio.create_task(self._worker_loop(), name="tickwheel-canary-worker"),
        ]

    async def stop(self) -> None:
        """Stop the loops and close the session; safe twice or before start."""
        tasks, self._tasks = self._tasks, []
        await cancel_and_wait(tasks)
        if self._session is not None:
            session, self._session = self._session, None
            await session.close()

    async def schedule_next(self) -> datetime:
        """Create the canary of the next interval boundary (idempotent); its time."""
        interval = self._config.canary_interval_s
        now = self._now()
        slot = datetime.fromtimestamp(math.floor(now.timestamp() / interval + 1) * interval, tz=UTC)
        cid = canary_id(slot)
        await self._store.record_canary(cid, slot)
        spec = SubmitSpec(
            type=CANARY_TYPE,
            payload={"canary_id": str(cid), "scheduled_at": slot.isoformat()},
            scheduled_at=slot,
            pool=Pool.CRITICAL,
            strict_timing=True,
            max_retries=0,
        )
        task = self._admission.new_task(
            SYSTEM_TENANT_ID, spec, now, idempotency_key=f"canary:{slot.isoformat()}"
        )
        results = await self._store.insert_tasks([task], now)
        self._timeline.admit(results)
        return slot

    async def _schedule_loop(self) -> None:
        interval = self._config.canary_interval_s
        while True:
            try:
                await self.schedule_next()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("could not schedule the canary")
            self._wake.clear()
            await wait_event(self._wake, interval / 2)

    async def _worker_loop(self) -> None:
        session = self._session
        assert session is not None
        while True:
            event = await session.next_event()
            if event is None:
                return
            if not isinstance(event, AssignmentBatch):
                continue
            for a in event.assignments:
                try:
                    payload = as_dict(a.payload)
                    cid = uuid.UUID(str(payload["canary_id"]))
                    scheduled = datetime.fromisoformat(str(payload["scheduled_at"]))
                    dispatched = self._now()
                    await session.ack([FencedWrite(key=a.key, token=a.fencing_token)])
                    await self._store.record_canary(cid, scheduled, dispatched_at=dispatched)
                    self._stats.canary_lag_ms.append(
                        (dispatched - scheduled).total_seconds() * 1000.0
                    )
                    await session.complete([Completion(key=a.key, token=a.fencing_token)])
                    await self._store.record_canary(cid, scheduled, completed_at=self._now())
                except asyncio.CancelledError:
                    raise
                except Exception:
                    log.exception(
                        "canary %s failed",
                        a.key.id,
                        extra=task_extra(
                            task_id=a.key.id, tenant_id=a.tenant_id, fencing_token=a.fencing_token
                        ),
                    )
            session.grant(len(event.assignments))
