"""Acceptance fixtures: ``tickwheel serve`` and workers as real processes on PostgreSQL.

``cluster`` starts one server (short leases, so lease expiry shows within seconds) on
this test's own database, creates a tenant and an API key through the admin API, and
hands out a connected :class:`~scheduler.client.Client`. Workers are started on demand
with :meth:`Cluster.worker`; every process is stopped at the end, and a failing test
shows the log tail of each.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import uuid
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from scheduler.client import AdminClient, Client
from tests.support.processes import (
    ADMIN_TOKEN,
    ProcessGroup,
    ServeProcess,
    WorkerProcess,
    process_group,
)

HANDLERS = "tests.acceptance.handlers"
LEASE_TTL_S = 3.0


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "serve_args(*args): extra `tickwheel serve` flags")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """On failure, attach the log tail of every Tickwheel process the test started."""
    outcome = yield
    report = outcome.get_result()
    group: ProcessGroup | None = getattr(item, "_tickwheel_group", None)
    if report.failed and group is not None:
        report.sections.append(("tickwheel process logs", group.explain()))


@dataclasses.dataclass
class Cluster:
    """A served Tickwheel, one tenant, its client, and the records file of the handlers."""

    group: ProcessGroup
    server: ServeProcess
    dsn: str
    client: Client
    api_key: str
    tenant_id: uuid.UUID
    records_path: Path
    db: asyncpg.Connection

    async def worker(
        self,
        name: str,
        types: Mapping[str, str] | None = None,
        *,
        slots: int = 10,
        env: Mapping[str, str] | None = None,
        start_on_delivery: bool = False,
    ) -> WorkerProcess:
        """Start a worker process (default: task type ``work``) and wait until connected."""
        types = types or {"work": f"{HANDLERS}:work"}
        env = {"TW_RECORD_FILE": str(self.records_path), **(env or {})}
        return await asyncio.to_thread(
            self.group.worker,
            self.server.target,
            self.api_key,
            types,
            name=name,
            slots=slots,
            env=env,
            extra_args=("--start-on-delivery",) if start_on_delivery else (),
        )

    def records(self, event: str | None = None) -> list[dict[str, Any]]:
        """Every line the handlers appended so far (optionally one kind of event)."""
        if not self.records_path.exists():
            return []
        lines = [json.loads(x) for x in self.records_path.read_text().splitlines() if x]
        return [r for r in lines if event is None or r["event"] == event]

    async def status_counts(self) -> dict[str, int]:
        """How many of the tenant's tasks are in each state (straight from PostgreSQL)."""
        rows = await self.db.fetch(
            "SELECT status, count(*) FROM tasks WHERE tenant_id = $1 GROUP BY status",
            self.tenant_id,
        )
        return {r[0]: r[1] for r in rows}

    async def transitions(self, task_id: uuid.UUID) -> list[tuple[str, str, int, str]]:
        """The audit trail of one task: (from, to, token, actor), oldest first."""
        rows = await self.db.fetch(
            "SELECT from_status, to_status, fencing_token, actor FROM task_transitions"
            " WHERE task_id = $1 ORDER BY at, fencing_token",
            task_id,
        )
        return [(r[0], r[1], r[2], r[3]) for r in rows]

    async def ledger_count(self, task_id: uuid.UUID) -> int:
        """Rows of the completion ledger for one task."""
        return int(
            await self.db.fetchval(
                "SELECT count(*) FROM task_completions WHERE task_id = $1", task_id
            )
        )


@pytest.fixture
async def cluster(
    pg_dsn: str, tmp_path: Path, request: pytest.FixtureRequest
) -> AsyncIterator[Cluster]:
    """A served Tickwheel on this test's database (extra serve flags via the
    ``serve_args`` marker)."""
    marker = request.node.get_closest_marker("serve_args")
    extra = tuple(marker.args) if marker else ()
    with process_group(tmp_path / "procs") as group:
        request.node._tickwheel_group = group
        server = await asyncio.to_thread(
            group.serve,
            pg_dsn,
            lease_ttl_s=LEASE_TTL_S,
            # The canary adds a task of its own every minute: off, so counts stay exact.
            extra_args=("--preload-interval-s", "0.2", "--canary-interval-s", "0", *extra),
        )
        async with await AdminClient.connect(server.target, admin_token=ADMIN_TOKEN) as admin:
            tenant = await admin.create_tenant("acceptance")
            key = (await admin.create_api_key(tenant.id, "acceptance")).secret
        client = await Client.connect(server.target, api_key=key)
        db = await asyncpg.connect(pg_dsn)
        try:
            yield Cluster(
                group=group,
                server=server,
                dsn=pg_dsn,
                client=client,
                api_key=key,
                tenant_id=tenant.id,
                records_path=tmp_path / "records.jsonl",
                db=db,
            )
        finally:
            await db.close()
            await client.close()
