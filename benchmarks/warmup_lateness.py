"""How late the first tasks after ``tickwheel serve`` starts reach a real worker.

A script, not a test (no timing assertion): it starts PostgreSQL (the test harness),
``tickwheel serve`` on a fresh migrated database, then submits a *cold* series of
``--tasks`` tasks (``--gap-ms`` apart, the first ``--lead-s`` later) before anything
ran the dispatch path, starts one ``tickwheel worker`` process, and when those ran a
*warm* series on the same server. For each series it prints the lateness of the
first 12 tasks and of the rest: received (the worker got the assignment) and started
(the handler ran; ack-first waits for the ack's commit) minus the due time.

    .venv/bin/python -m benchmarks.warmup_lateness [--store sqlite] [--gap-ms 1]
        [--tasks 200] [--start-on-delivery] [--serve-arg=--flag ...]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

from tests.support.processes import ADMIN_TOKEN, ServeProcess, WorkerProcess
from tests.support.servers import PostgresServer

from scheduler.client import AdminClient, Client, TaskSpec

HANDLERS = "tests.acceptance.handlers"


class SqliteServe(ServeProcess):
    """``tickwheel serve`` on a SQLite file."""

    def command(self) -> list[str]:
        cmd = list(super().command())
        i = cmd.index("--postgres-dsn")
        cmd[i : i + 2] = ["--store", f"sqlite:///{self.postgres_dsn}"]
        return cmd


Series = tuple[list[float], list[float]]
"""(received - due, handler started - due), ms, in due order."""


async def _series(
    client: Client, records: Path, n: int, gap_ms: float, lead_s: float, phase: str
) -> tuple[datetime, list[str]]:
    first = datetime.now(UTC) + timedelta(seconds=lead_s)
    specs = [
        TaskSpec(
            type="late",
            payload={"phase": phase},
            scheduled_at=first + timedelta(milliseconds=i * gap_ms),
            strict_timing=True,
        )
        for i in range(n)
    ]
    return first, [str(t.id) for t in await client.submit_many(specs)]


def _read_lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


async def _collect(
    records: Path, first: datetime, ids: list[str], gap_ms: float, timeout_s: float
) -> Series:
    deadline = time.monotonic() + timeout_s
    rows: dict[str, dict[str, float]] = {}
    while time.monotonic() < deadline:
        lines = _read_lines(records)
        rows = {r["task_id"]: r for r in map(json.loads, lines)}
        if all(i in rows for i in ids):
            break
        await asyncio.sleep(0.1)
    due = {i: (first + timedelta(milliseconds=k * gap_ms)).timestamp() for k, i in enumerate(ids)}
    received = [rows[i]["late_ms"] for i in ids if i in rows]
    started = [(rows[i]["at"] - due[i]) * 1000.0 for i in ids if i in rows]
    return received, started


async def _measure(
    serve: ServeProcess, base: Path, n: int, gap_ms: float, lead_s: float, worker_args: list[str]
) -> dict[str, Series]:
    """A cold series (submitted as soon as serve listens, due before anything else ran
    the dispatch path), then a warm one on the same server."""
    async with await AdminClient.connect(serve.target, admin_token=ADMIN_TOKEN) as admin:
        tenant = await admin.create_tenant("warmup")
        key = (await admin.create_api_key(tenant.id, "warmup")).secret
    records = base / "records.jsonl"
    client = await Client.connect(serve.target, api_key=key)
    worker = WorkerProcess(
        base / "worker",
        serve.target,
        key,
        {"late": f"{HANDLERS}:lateness"},
        name="w1",
        slots=2000,
        env={"TW_RECORD_FILE": str(records)},
        extra_args=worker_args,
    )
    try:
        first, ids = await _series(client, records, n, gap_ms, lead_s, "cold")
        await asyncio.to_thread(worker.start)
        cold = await _collect(records, first, ids, gap_ms, lead_s + n * gap_ms / 1000 + 30)
        first, ids = await _series(client, records, n, gap_ms, 1.0, "warm")
        warm = await _collect(records, first, ids, gap_ms, 1.0 + n * gap_ms / 1000 + 30)
    finally:
        await client.close()
        await asyncio.to_thread(worker.stop)
    return {"cold": cold, "warm": warm}


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--store", choices=["postgres", "sqlite"], default="postgres")
    parser.add_argument("--tasks", type=int, default=40)
    parser.add_argument("--gap-ms", type=float, default=20.0)
    parser.add_argument("--lead-s", type=float, default=4.0, help="cold series: due after")
    parser.add_argument("--start-on-delivery", action="store_true")
    parser.add_argument("--serve-arg", action="append", default=[])
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="tickwheel-warmup-"))
    pg: PostgresServer | None = None
    try:
        if args.store == "postgres":
            pg = PostgresServer()
            pg.start()
            pg.ensure_app_role()
            name = f"w_{uuid.uuid4().hex[:8]}"
            pg.psql(f"CREATE DATABASE {name} OWNER {pg.app_user}")
            from tests.support.db import migrate_sync

            migrate_sync(pg.app_dsn(name))
            serve: ServeProcess = ServeProcess(
                base / "serve",
                pg.app_dsn(name),
                extra_args=("--canary-interval-s", "0", *args.serve_arg),
            )
        else:
            serve = SqliteServe(
                base / "serve",
                str(base / "t.db"),
                extra_args=("--canary-interval-s", "0", *args.serve_arg),
            )
        await asyncio.to_thread(serve.start)
        try:
            worker_args = ["--start-on-delivery"] if args.start_on_delivery else []
            figures = await _measure(serve, base, args.tasks, args.gap_ms, args.lead_s, worker_args)
        finally:
            await asyncio.to_thread(serve.stop)
    finally:
        if pg is not None:
            pg.stop()
            pg.cleanup()
    print(f"{args.store}: {args.tasks} tasks a series, {args.gap_ms:g} ms apart")
    for series, (received, started) in figures.items():
        for what, late in (("received", received), ("started", started)):
            head, tail = late[:12], late[12:]
            rest = (
                f"; the rest mean {statistics.mean(tail):.1f} max {max(tail):.1f}" if tail else ""
            )
            print(
                f"{series:>4} {what:>8} - due: first 12 mean {statistics.mean(head):.1f} "
                f"max {max(head):.1f}{rest}  [{' '.join(f'{x:.0f}' for x in late[:16])} ...]"
            )


if __name__ == "__main__":
    asyncio.run(main())
