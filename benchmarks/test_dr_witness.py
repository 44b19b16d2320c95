"""Automatic failover drills with a witness (issue 38), real processes
(tests/support/witness.py: a 3-member etcd cluster, A's node on the primary holding the
region lease through a TCP proxy, B's standby node, ``tickwheel dr watch`` in B).

- ``test_a_lost``: ``LOST_DRILLS`` times, at the defaults (lease 5 s, margin 1 s,
  detection 5 s), synchronous standby: A's node, worker, PostgreSQL and etcd member
  SIGKILLed with tasks due every 0.1 s; figures: loss -> promote, -> B serving, -> B's
  first dispatch; how late the timers due during the outage started after B served;
  acknowledged submissions lost.
- ``test_partition``: ``PARTITION_DRILLS`` times (lease 2 s, margin 0.5 s, detection
  1 s), A's node cut from etcd by the proxy while every process runs; figures: cut ->
  A's last dispatch, -> B's first, the gap between them, drills where a dispatch of A
  came after B's first or in the same second (target 0).
- ``test_slow_a``: ``SLOW_DRILLS`` SIGSTOPs of A's node on one set-up (lease 4 s,
  margin 1 s, detection 4 s), each frozen for a random 1-5 s (shorter than the bound:
  lease + detection - a renewal period - the node's 1 s lease retry = 6 s); promotions
  (target 0).

Run: ``PYTHONPATH=src:. .venv/bin/pytest benchmarks/test_dr_witness.py --benchmark-only -s``
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import statistics
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg
from grpc_health.v1 import health_pb2
from tests.acceptance.regions.test_witness import _health, _started_by, _submit, _tenant_key
from tests.support.waiting import eventually
from tests.support.witness import dispatch_times, generation, sites

LOST_DRILLS = 3
PARTITION_DRILLS = int(os.environ.get("TW_DRILLS", "20"))
"""``TW_DRILLS`` runs fewer (a quick check of the harness)."""
SLOW_DRILLS = 20


async def _lost_once(base: Path) -> dict[str, float]:
    async with sites(base, ttl_s=5, margin_s=1.0, detection_s=5.0, synchronous=True) as s:
        key = await _tenant_key(s)
        worker_a = await s.worker(s.node_a.target, key, "worker-a")
        ids = await _submit(s, key, 400, span_s=40.0, lead_s=1.0)
        due = await _due(s, ids)
        await eventually(lambda: _started_by(s, "worker-a"), until=lambda n: n >= 20)
        lost_at = time.time()
        worker_a.kill9()
        s.node_a.kill9()
        s.pair.kill_primary()
        s.etcd["a"].kill9()
        await eventually(
            lambda: _health(s.node_b.target),
            until=lambda st: st == health_pb2.HealthCheckResponse.SERVING,
            timeout_s=90,
            interval_s=0.05,
        )
        serving_at = time.time()
        await s.worker(s.node_b.target, key, "worker-b")
        db = await asyncpg.connect(s.pair.standby_admin_dsn)
        try:
            await eventually(
                lambda: db.fetchval(
                    "SELECT count(*) FROM tasks WHERE id = ANY($1) AND status = 'COMPLETED'", ids
                ),
                until=lambda n: n == len(ids),
                timeout_s=120,
            )
            present = await db.fetchval("SELECT count(*) FROM tasks WHERE id = ANY($1)", ids)
            raised = await db.fetchval("SELECT raised_at FROM fencing_generation")
        finally:
            await db.close()
        g = await generation(s.pair.standby_admin_dsn)
        first_b = (await dispatch_times(s.pair.standby_admin_dsn, above_token=g << 40))[0]
        starts = [json.loads(x) for x in s.records.read_text().splitlines() if '"start"' in x]
        late = [
            float(r["at"]) - max(due[r["task_id"]], serving_at)
            for r in starts
            if r["worker"] == "worker-b" and lost_at <= due.get(r["task_id"], 0) <= serving_at
        ]
        return {
            "loss_to_promote_s": raised.timestamp() - lost_at,
            "loss_to_serving_s": serving_at - lost_at,
            "loss_to_first_dispatch_s": first_b.timestamp() - lost_at,
            "outage_timers": len(late),
            "outage_timers_max_late_after_serving_s": max(late) if late else 0.0,
            "acknowledged_lost": len(ids) - int(present),
        }


async def _due(s: Any, ids: list[Any]) -> dict[str, float]:
    conn = await asyncpg.connect(s.pair.primary.dsn("tickwheel_dr"))
    try:
        await conn.execute("SELECT set_config('tickwheel.tenant', '*', false)")
        rows = await conn.fetch("SELECT id, scheduled_at FROM tasks WHERE id = ANY($1)", ids)
    finally:
        await conn.close()
    return {str(r["id"]): r["scheduled_at"].timestamp() for r in rows}


def test_a_lost(benchmark: Any, tmp_path: Path) -> None:
    def run() -> dict[str, float]:
        runs = [asyncio.run(_lost_once(tmp_path / f"lost-{i}")) for i in range(LOST_DRILLS)]
        for i, r in enumerate(runs):
            print(f"A lost, drill {i}: " + ", ".join(f"{k} {v:.2f}" for k, v in r.items()))
        out: dict[str, float] = {}
        for k in runs[0]:
            out[f"{k}_max"] = max(r[k] for r in runs)
            out[f"{k}_median"] = statistics.median(r[k] for r in runs)
        return out

    figures = benchmark.pedantic(run, rounds=1, iterations=1)
    benchmark.extra_info.update(figures)
    print(figures)


async def _partition_once(base: Path) -> dict[str, float]:
    async with sites(base, peer_proxies=True) as s:
        key = await _tenant_key(s)
        await s.worker(s.node_a.target, key, "worker-a")
        await _submit(s, key, 300, span_s=30.0)
        await eventually(lambda: _started_by(s, "worker-a"), until=lambda n: n >= 5)
        cut_at = datetime.now(UTC)
        s.partition_a()
        await eventually(
            lambda: _health(s.node_b.target),
            until=lambda st: st == health_pb2.HealthCheckResponse.SERVING,
            timeout_s=60,
            interval_s=0.05,
        )
        await s.worker(s.node_b.target, key, "worker-b")
        g = await generation(s.pair.standby_admin_dsn)
        b = await eventually(
            lambda: dispatch_times(s.pair.standby_admin_dsn, above_token=g << 40),
            until=lambda d: len(d) >= 5,
            timeout_s=30,
        )
        a = await dispatch_times(s.pair.primary_dsn)
        assert s.node_a.running()
        seconds_a = {int(t.timestamp()) for t in a}
        return {
            "cut_to_last_a_s": (a[-1] - cut_at).total_seconds(),
            "cut_to_first_b_s": (b[0] - cut_at).total_seconds(),
            "gap_s": (b[0] - a[-1]).total_seconds(),
            "a_after_b": float(sum(1 for t in a if t >= b[0])),
            "same_second": float(len(seconds_a & {int(t.timestamp()) for t in b})),
        }


def test_partition(benchmark: Any, tmp_path: Path) -> None:
    def run() -> dict[str, float]:
        runs = []
        for i in range(PARTITION_DRILLS):
            r = asyncio.run(_partition_once(tmp_path / f"cut-{i}"))
            print(f"partition drill {i}: " + ", ".join(f"{k} {v:.2f}" for k, v in r.items()))
            runs.append(r)
        return {
            "drills": float(len(runs)),
            "drills_with_double_dispatch": float(
                sum(1 for r in runs if r["a_after_b"] or r["same_second"])
            ),
            "cut_to_last_a_s_max": max(r["cut_to_last_a_s"] for r in runs),
            "cut_to_first_b_s_median": statistics.median(r["cut_to_first_b_s"] for r in runs),
            "gap_s_min": min(r["gap_s"] for r in runs),
            "gap_s_median": statistics.median(r["gap_s"] for r in runs),
        }

    figures = benchmark.pedantic(run, rounds=1, iterations=1)
    benchmark.extra_info.update(figures)
    print(figures)
    assert figures["drills_with_double_dispatch"] == 0


async def _slow(base: Path) -> dict[str, float]:
    rng = random.Random(38)
    freezes: list[float] = []
    async with sites(base, ttl_s=4, margin_s=1.0, detection_s=4.0) as s:
        key = await _tenant_key(s)
        await s.worker(s.node_a.target, key, "worker-a")
        await _submit(s, key, 2000, span_s=SLOW_DRILLS * 15.0)
        await eventually(lambda: _started_by(s, "worker-a"), until=lambda n: n >= 3)
        fenced = 0
        for _ in range(SLOW_DRILLS):
            freeze = rng.uniform(1.0, 5.0)
            freezes.append(freeze)
            frozen_at = time.time()
            s.node_a.pause()
            await eventually(
                lambda: asyncio.sleep(0, time.time()),
                until=lambda t, f=freeze, at=frozen_at: t >= at + f,
                timeout_s=10,
            )
            s.node_a.resume()
            resumed = time.time()
            # A serves again, and B polled past the moment it would have promoted.
            await eventually(
                lambda r=resumed: _started_by(s, "worker-a", after=r),
                until=lambda n: n >= 2,
                timeout_s=30,
            )
            await eventually(
                lambda: asyncio.sleep(0, time.time()),
                until=lambda t, at=frozen_at: t >= at + s.ttl_s + s.detection_s + 2,
                timeout_s=20,
            )
            fenced = s.node_a.log().count("lost region")
        decisions = await s.decisions()
        return {
            "drills": float(SLOW_DRILLS),
            "freeze_s_min": min(freezes),
            "freeze_s_max": max(freezes),
            "times_a_fenced_itself": float(fenced),
            "absences_seen_by_b": decisions.get("primary-absent", 0.0),
            "promotions": decisions.get("promote", 0.0) + decisions.get("holding", 0.0),
            "still_in_recovery": float(await s.in_recovery()),
        }


def test_slow_a(benchmark: Any, tmp_path: Path) -> None:
    figures = benchmark.pedantic(lambda: asyncio.run(_slow(tmp_path)), rounds=1, iterations=1)
    benchmark.extra_info.update(figures)
    print(figures)
    assert figures["promotions"] == 0
