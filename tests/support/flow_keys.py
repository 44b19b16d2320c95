"""Concurrency keys under faults, on a real cluster (issue 43): the acceptance test and
``benchmarks/test_flow_keys.py`` share it.

``tasks`` tasks of one concurrency key (limit ``limit``), all due at once, run on
``nodes`` real ``tickwheel serve`` processes (etcd, Redis, one PostgreSQL) with one
``tickwheel worker`` each; the handler (``tests.acceptance.handlers:work``) writes a
ledger line when an attempt starts and when it ends. Faults are applied while the tasks
drain: ``kill9`` (a node killed with SIGKILL), ``node_stop`` (a node SIGSTOPped past its
etcd lease, then resumed) and ``worker_stop`` (a worker SIGSTOPped past the task lease,
then resumed). :func:`max_running` reads the ledger: at no instant may more than
``limit`` attempts run; :class:`KeyFigures` also counts lost (not COMPLETED) and
doubled (completed more than once) tasks.

A worker frozen by SIGSTOP runs nothing while frozen: its attempts count as running from
their start to the freeze and from the thaw to their end. What they do after the thaw
(their lease long gone, their task started elsewhere) is a zombie's: its writes are
refused by the fencing token, and :attr:`KeyFigures.zombie_overlap` says whether such a
tail ran beside the key's live attempts (reported apart from ``max_running``).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from scheduler.client import AdminClient, Client, TaskSpec
from tests.support import cluster
from tests.support.processes import ADMIN_TOKEN, ProcessGroup, WorkerProcess
from tests.support.servers import EtcdServer, RedisServer
from tests.support.waiting import eventually

KEY = "acme"


@dataclass(frozen=True)
class KeyFigures:
    """What one run saw."""

    tasks: int
    limit: int
    faults: tuple[str, ...]
    max_running: int
    """Most attempts of the key running at one instant (frozen spans excluded)."""
    zombie_overlap: int
    """Most attempts running at once counting zombie tails (attempts resumed after their
    lease was lost); equal to ``max_running`` when no zombie tail overlapped."""
    lost: int
    doubled: int
    attempts: int
    """Attempts started (re-runs after a fault included)."""
    drain_s: float

    def line(self) -> str:
        return (
            f"concurrency key limit {self.limit}, {self.tasks} tasks, faults "
            f"{'+'.join(self.faults) or 'none'}: max running {self.max_running} "
            f"(with zombie tails {self.zombie_overlap}), lost {self.lost}, doubled "
            f"{self.doubled}, attempts {self.attempts}, drained in {self.drain_s:.1f} s"
        )


def read_ledger(path: Path) -> list[dict[str, Any]]:
    """Every line the handlers wrote."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def max_running(
    ledger: Sequence[dict[str, Any]],
    frozen: dict[str, tuple[float, float]] | None = None,
    *,
    zombies: bool = False,
) -> int:
    """Most attempts running at one instant, from the start/done lines by (task, token).

    ``frozen``: worker -> (stopped at, resumed at): an attempt of that worker runs nothing
    in between. Its tail after the thaw counts only with ``zombies`` (when the attempt
    began before the freeze its lease was lost meanwhile). An attempt with no end line
    runs to the end of the ledger."""
    frozen = frozen or {}
    starts: dict[tuple[str, int], dict[str, Any]] = {}
    ends: dict[tuple[str, int], float] = {}
    last = 0.0
    for e in ledger:
        k = (e["task_id"], e["token"])
        last = max(last, e["at"])
        if e["event"] == "start":
            starts[k] = e
        elif e["event"] == "done":
            ends[k] = e["at"]
    edges: list[tuple[float, int]] = []
    for k, s in starts.items():
        begin, end = s["at"], ends.get(k, last)
        window = frozen.get(s["worker"])
        if window is not None and begin < window[0] < end:
            edges += [(begin, 1), (window[0], -1)]
            if zombies and end > window[1]:
                edges += [(window[1], 1), (end, -1)]
            continue
        edges += [(begin, 1), (end, -1)]
    edges.sort(key=lambda x: (x[0], x[1]))  # an end before a start at the same instant
    most = now = 0
    for _, d in edges:
        now += d
        most = max(most, now)
    return most


async def run(
    group: ProcessGroup,
    pg_dsn: str,
    etcd: EtcdServer,
    redis: RedisServer,
    *,
    tasks: int,
    limit: int = 2,
    hold_s: float = 0.05,
    nodes: int = 2,
    faults: Sequence[str] = ("kill9",),
    etcd_ttl_s: float = 3.0,
    task_lease_s: float = 3.0,
    timeout_s: float = 300.0,
) -> KeyFigures:
    """Start the cluster, submit ``tasks`` keyed tasks due now, apply ``faults`` one
    after the other while they drain, and read what happened."""
    ledger_path = group.dir / "ledger.jsonl"
    env = {"TW_RECORD_FILE": str(ledger_path), "TW_HOLD_S": str(hold_s)}
    frozen: dict[str, tuple[float, float]] = {}
    async with cluster.running(
        group,
        pg_dsn,
        etcd,
        redis,
        nodes,
        etcd_ttl_s=etcd_ttl_s,
        worker_slots=20,
        worker_env=env,
        task_lease_s=task_lease_s,
    ) as c:
        async with await AdminClient.connect(c.nodes[0].target, admin_token=ADMIN_TOKEN) as admin:
            assert await admin.set_concurrency_limit(c.tenant_id, "work", limit) == limit
        started = time.monotonic()
        async with await Client.connect(c.nodes[0].target, api_key=c.api_key) as client:
            now = datetime.now(UTC)
            specs = [
                TaskSpec(type="work", scheduled_at=now, strict_timing=True, concurrency_key=KEY)
                for _ in range(tasks)
            ]
            await client.submit_many(specs)
        workers = [p for p in group.procs if isinstance(p, WorkerProcess)]
        share = max(1, tasks // (len(faults) + 2))
        for i, fault in enumerate(faults):
            # Each fault once a further share of the tasks completed.
            await eventually(
                lambda: cluster.completed(c),
                until=lambda n, i=i: n >= share * (i + 1),
                timeout_s=timeout_s,
                what=f"{share * (i + 1)} tasks done before {fault}",
            )
            if fault == "kill9":
                c.nodes[-1].kill9()
            elif fault == "node_stop":
                node = c.nodes[0]
                os.killpg(node.pid, signal.SIGSTOP)
                await asyncio.sleep(etcd_ttl_s + 2)  # past its etcd lease
                os.killpg(node.pid, signal.SIGCONT)
            elif fault == "worker_stop":
                w = workers[0]
                at = time.time()
                os.killpg(w.pid, signal.SIGSTOP)
                await asyncio.sleep(task_lease_s + 2)  # past its tasks' lease
                os.killpg(w.pid, signal.SIGCONT)
                frozen[w.name] = (at, time.time())
            else:
                raise ValueError(f"unknown fault {fault!r}")
        await eventually(
            lambda: cluster.completed(c),
            until=lambda n: n == tasks,
            timeout_s=timeout_s,
            what=f"all {tasks} keyed tasks completed",
        )
        drain_s = time.monotonic() - started
        done = await c.db.fetchrow(
            "SELECT count(*) FILTER (WHERE status = 'COMPLETED') AS ok"
            " FROM tasks WHERE tenant_id = $1",
            c.tenant_id,
        )
        per_task = await c.db.fetch(
            "SELECT task_id, count(*) AS n FROM task_completions WHERE tenant_id = $1"
            " GROUP BY task_id",
            c.tenant_id,
        )
    ledger = read_ledger(ledger_path)
    return KeyFigures(
        tasks=tasks,
        limit=limit,
        faults=tuple(faults),
        max_running=max_running(ledger, frozen),
        zombie_overlap=max_running(ledger, frozen, zombies=True),
        lost=tasks - int(done["ok"]),
        doubled=sum(1 for r in per_task if r["n"] > 1),
        attempts=sum(1 for e in ledger if e["event"] == "start"),
        drain_s=drain_s,
    )
