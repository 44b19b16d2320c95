"""Moving a tenant's home under load (issue 16): real ``tickwheel serve`` processes of
regions ``us`` and ``eu`` (a PostgreSQL server each, one directory), real worker
processes of the tenant, a client submitting all along with tasks due across the move,
and ``tickwheel tenants move`` run as an operator would.

Every task whose submission was acknowledged completes exactly once (the completion
ledgers of both regions together hold it once; no task is live in both), the calls made
during the move succeed (held back by TENANT_MOVING and made again by the SDK, or
forwarded to the new home), the workers follow the tenant to its new home, and the
move's pause is reported (its bound is measured in benchmarks/test_move.py).
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from scheduler.client import AdminClient, Client
from scheduler.states import TaskState
from tests.support.processes import ADMIN_TOKEN, TICKWHEEL, WorkerProcess
from tests.support.regions import Regions, start_regions
from tests.support.waiting import eventually

pytestmark = pytest.mark.postgres

HANDLER = {"work": "tests.acceptance.handlers:work"}


@pytest.fixture(scope="module")
def regions(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Regions]:
    """US and EU, each on a PostgreSQL server of its own (the session's server keeps its
    ``tickwheel`` database for the routing tests); one node each."""
    with start_regions(tmp_path_factory.mktemp("move"), ("us", "eu")) as started:
        yield started


def regions_file(regions: Regions, path: Path) -> Path:
    """The directory with each region's database, as the move command reads it."""
    doc = {
        "regions": {
            name: {"endpoints": list(stack.endpoints), "postgres_dsn": stack.dsn}
            for name, stack in regions.stacks.items()
        }
    }
    path.write_text(json.dumps(doc))
    return path


async def run_move(tenant_id: uuid.UUID, to: str, directory: Path) -> dict[str, Any]:
    """``tickwheel tenants move TENANT --to REGION --json`` as a child process."""
    proc = await asyncio.create_subprocess_exec(
        TICKWHEEL,
        "tenants",
        "move",
        str(tenant_id),
        "--to",
        to,
        "--regions-file",
        str(directory),
        "--json",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    doc: dict[str, Any] = json.loads(out)
    return doc


async def fetch(dsn: str, sql: str, *args: Any) -> list[asyncpg.Record]:
    conn = await asyncpg.connect(dsn)
    try:
        return list(await conn.fetch(sql, *args))
    finally:
        await conn.close()


class Submitter:
    """Submits a task every ``every_s`` until stopped, due now or up to 3 s later (so
    some are due during and after the move); keeps what was acknowledged and how long
    each call took."""

    def __init__(self, client: Client, every_s: float = 0.02) -> None:
        self.client = client
        self.every_s = every_s
        self.acked: list[uuid.UUID] = []
        self.latencies_s: list[float] = []
        self.errors: list[str] = []
        self._stop = asyncio.Event()

    async def run(self) -> None:
        n = 0
        while not self._stop.is_set():
            n += 1
            due = datetime.now(UTC) + timedelta(milliseconds=(n % 4) * 1000)
            started = time.monotonic()
            try:
                task = await self.client.submit(
                    "work", {"n": n}, scheduled_at=due, idempotency_key=f"move-{n}"
                )
            except Exception as exc:  # a failed call is a finding, not a crash
                self.errors.append(f"{type(exc).__name__}: {exc}")
            else:
                self.acked.append(task.id)
            self.latencies_s.append(time.monotonic() - started)
            await asyncio.sleep(self.every_s)

    def stop(self) -> None:
        self._stop.set()


async def test_a_tenant_moves_home_under_load_and_every_task_runs_once(
    regions: Regions, tmp_path: Path
) -> None:
    us, eu = regions["us"], regions["eu"]
    async with await AdminClient.connect(us.target, admin_token=ADMIN_TOKEN) as admin:
        tenant = await admin.create_tenant("mover")
        key = (await admin.create_api_key(tenant.id, "k")).secret
    assert key.startswith("tw_us.")
    workers = []
    for name in ("w1", "w2"):
        worker = WorkerProcess(
            tmp_path / name,
            us.target,
            key,
            HANDLER,
            name=f"move-{name}",
            slots=20,
            env={"TW_HOLD_S": "0.3", "TW_RECORD_FILE": str(tmp_path / "records.jsonl")},
        )
        regions.group.procs.append(worker)
        worker.start()
        workers.append(worker)
    try:
        async with await Client.connect(us.target, api_key=key) as client:
            submitter = Submitter(client)
            submitting = asyncio.create_task(submitter.run(), name="move-submitter")
            # Load first: tasks running, held for their due time and waiting.
            await eventually(
                lambda: asyncio.sleep(0, len(submitter.acked)),
                until=lambda n: n >= 60,
                what="60 acknowledged submissions before the move",
            )
            report = await run_move(tenant.id, "eu", regions_file(regions, tmp_path / "r.json"))
            before_end = len(submitter.acked)
            await eventually(
                lambda: asyncio.sleep(0, len(submitter.acked)),
                until=lambda n: n >= before_end + 60,
                what="60 more acknowledged submissions after the move",
            )
            submitter.stop()
            await submitting
            acked = set(submitter.acked)

            async def completed() -> int:
                rows = await fetch(
                    eu.admin_dsn,
                    "SELECT count(*) AS n FROM tasks WHERE tenant_id = $1 AND status = 'COMPLETED'"
                    " AND id = ANY($2::uuid[])",
                    tenant.id,
                    list(acked),
                )
                rows_us = await fetch(
                    us.admin_dsn,
                    "SELECT count(*) AS n FROM tasks WHERE tenant_id = $1 AND status = 'COMPLETED'"
                    " AND id = ANY($2::uuid[])",
                    tenant.id,
                    list(acked),
                )
                return int(rows[0]["n"]) + int(rows_us[0]["n"])

            await eventually(
                completed, until=lambda n: n == len(acked), timeout_s=30, what="every task done"
            )
            # Read through the old home's node: forwarded to the new one.
            last = await client.get(submitter.acked[-1])
            assert last.state is TaskState.COMPLETED
    finally:
        for worker in workers:
            worker.stop()

    print(
        f"\nmove: {report['tasks_moved']} live tasks moved, paused {report['paused_s']} s "
        f"(copy {report['copy_s']} s, flip {report['flip_s']} s, {report['copies']} copies); "
        f"{len(acked)} tasks acknowledged; slowest submit {max(submitter.latencies_s):.3f} s",
        file=sys.stderr,
    )
    assert submitter.errors == []  # every call made during the move succeeded
    assert report["tasks_moved"] > 0  # the move carried live work
    # The completion ledgers of both regions hold each acknowledged task exactly once.
    ledger: dict[uuid.UUID, int] = {}
    for stack in (us, eu):
        for row in await fetch(
            stack.admin_dsn,
            "SELECT task_id, count(*) AS n FROM task_completions WHERE tenant_id = $1"
            " GROUP BY task_id",
            tenant.id,
        ):
            ledger[row["task_id"]] = ledger.get(row["task_id"], 0) + int(row["n"])
    assert set(ledger) == acked
    assert {n for n in ledger.values()} == {1}
    # Nothing of the tenant is live at the old home; its new home is eu in both.
    live = await fetch(
        us.admin_dsn,
        "SELECT count(*) AS n FROM tasks WHERE tenant_id = $1 AND status NOT IN"
        " ('COMPLETED', 'CANCELLED', 'DEAD_LETTER')",
        tenant.id,
    )
    assert live[0]["n"] == 0
    for stack in (us, eu):
        home = await fetch(
            stack.admin_dsn, "SELECT home_region FROM tenants WHERE id = $1", tenant.id
        )
        assert home[0]["home_region"] == "eu"
    # No handler ran twice: a task running when its stream ended was completed at the
    # new home by the same worker (adopted: same worker id, same token, still leased).
    runs: dict[str, int] = {}
    for line in (tmp_path / "records.jsonl").read_text().splitlines():
        record = json.loads(line)
        if record["event"] == "done":
            runs[record["task_id"]] = runs.get(record["task_id"], 0) + 1
    assert {uuid.UUID(t) for t in runs} == acked
    assert {t: n for t, n in runs.items() if n > 1} == {}
    # Both workers followed the tenant home (the old home's node sent them there).
    for worker in workers:
        assert worker.log_has(r"lives in region eu: reconnecting to " + eu.target), worker.log()
