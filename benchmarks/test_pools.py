"""Critical-task dispatch wait under a 1M bulk backlog: pools against one FIFO queue.

A discrete-event simulation of the dispatch policy, driving the engine's real
``ReadyQueues`` (pools + fair share) and, as the baseline in the same run, a single
FIFO deque. Time is simulated, so the waits are the policy's, not this machine's noise;
pytest-benchmark times how long each policy takes to make all its decisions.

Model (the seed's deep dive 5): 650 worker slots; bulk capped at 150 in flight;
500 slots reserved for critical while critical work waits; 1,000,000 bulk tasks due at
t = 0; one critical task every 10 ms for 10 s; every task runs 50 ms.
"""

from __future__ import annotations

import collections
import heapq
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from scheduler.engine._ready import POOL_ORDER, ReadyQueues
from scheduler.types import Pool, Preloaded, TaskKey

SLOTS = 650
BULK_MAX = 150
RESERVED = 500
BULK = 1_000_000
CRITICAL_EVERY_MS = 10
CRITICAL_UNTIL_MS = 10_000
RUN_MS = 50
T0 = datetime(2026, 1, 1, tzinfo=UTC)
TENANT = uuid.UUID(int=1)
TYPES = frozenset({"t"})


def _task(pool: Pool, n: int) -> Preloaded:
    return Preloaded(
        key=TaskKey(uuid.UUID(int=n), T0),
        due_at=T0,
        tenant_id=TENANT,
        shard_id=0,
        pool=pool,
        type="t",
    )


def _percentiles(waits: list[float]) -> dict[str, float]:
    waits.sort()
    return {
        "p50_ms": waits[len(waits) // 2],
        "p99_ms": waits[int(0.99 * (len(waits) - 1))],
        "max_ms": waits[-1],
    }


def simulate_pools(bulk: list[Preloaded]) -> list[float]:
    rq = ReadyQueues(lambda _t: 1)
    rq.extend(bulk)
    inflight = collections.Counter[Pool]()
    running: list[tuple[int, Pool]] = []
    arrivals = {}
    waits: list[float] = []
    n = BULK
    now = 0
    while now <= CRITICAL_UNTIL_MS:
        while running and running[0][0] <= now:
            inflight[heapq.heappop(running)[1]] -= 1
        if now % CRITICAL_EVERY_MS == 0:
            n += 1
            rq.push(_task(Pool.CRITICAL, n))
            arrivals[n] = now
        free = SLOTS - sum(inflight.values())
        while free > 0:
            task = None
            for pool in POOL_ORDER:
                if pool is Pool.BULK and inflight[Pool.BULK] >= BULK_MAX:
                    continue
                if pool is not Pool.CRITICAL and rq.depth(Pool.CRITICAL):
                    noncritical = inflight[Pool.STANDARD] + inflight[Pool.BULK]
                    if noncritical >= SLOTS - RESERVED:
                        continue
                task = rq.pop(pool, TYPES, None)
                if task is not None:
                    break
            if task is None:
                break
            free -= 1
            inflight[task.pool] += 1
            heapq.heappush(running, (now + RUN_MS, task.pool))
            if task.pool is Pool.CRITICAL:
                waits.append(float(now - arrivals[task.key.id.int]))
        now += 1
    return waits


def simulate_fifo(bulk: list[Preloaded]) -> list[float]:
    queue = collections.deque(bulk)
    running: list[int] = []
    arrivals = {}
    waits: list[float] = []
    n = BULK
    now = 0
    # One queue for everything: a critical task runs only once all bulk ahead has
    # started. Simulated until every critical task has started.
    pending_critical = CRITICAL_UNTIL_MS // CRITICAL_EVERY_MS + 1
    while pending_critical:
        while running and running[0] <= now:
            heapq.heappop(running)
        if now <= CRITICAL_UNTIL_MS and now % CRITICAL_EVERY_MS == 0:
            n += 1
            queue.append(_task(Pool.CRITICAL, n))
            arrivals[n] = now
        free = SLOTS - len(running)
        while free > 0 and queue:
            task = queue.popleft()
            free -= 1
            heapq.heappush(running, now + RUN_MS)
            if task.pool is Pool.CRITICAL:
                waits.append(float(now - arrivals[task.key.id.int]))
                pending_critical -= 1
        now += 1
    return waits


@pytest.fixture(scope="module")
def backlog() -> list[Preloaded]:
    return [_task(Pool.BULK, i) for i in range(BULK)]


RESULTS: dict[str, dict[str, float]] = {}


@pytest.mark.parametrize("policy", ["pools", "fifo"])
def test_critical_wait_under_bulk_backlog(
    benchmark: Any, backlog: list[Preloaded], policy: str
) -> None:
    run = simulate_pools if policy == "pools" else simulate_fifo
    waits: list[float] = benchmark.pedantic(run, args=(backlog,), rounds=1, iterations=1)
    assert len(waits) == CRITICAL_UNTIL_MS // CRITICAL_EVERY_MS + 1
    stats = _percentiles(waits)
    benchmark.extra_info.update(stats)
    RESULTS[policy] = stats
    if len(RESULTS) == 2:
        pools, fifo = RESULTS["pools"], RESULTS["fifo"]
        print(
            f"\ncritical wait under {BULK:,} bulk backlog (simulated ms): "
            f"pools p50 {pools['p50_ms']:.0f} p99 {pools['p99_ms']:.0f} max {pools['max_ms']:.0f}; "
            f"FIFO p50 {fifo['p50_ms']:.0f} p99 {fifo['p99_ms']:.0f} max {fifo['max_ms']:.0f}"
        )


def _push_pop(tasks: list[Preloaded]) -> int:
    rq = ReadyQueues(lambda _t: 1)
    for p in tasks:
        rq.push(p)
    n = 0
    while rq.pop(Pool.BULK, TYPES, None) is not None:
        n += 1
    return n


@pytest.fixture(scope="module")
def arrivals() -> dict[str, list[Preloaded]]:
    """200,000 tasks of one tenant and type: in due order (what the wheel fires), and
    the same with every tenth task arriving 60 s late (a takeover's store check, a
    release), so it is older than what already waits."""
    n = 200_000
    in_order = [
        Preloaded(
            key=TaskKey(uuid.UUID(int=i + 1), T0),
            due_at=T0 + timedelta(milliseconds=i),
            tenant_id=TENANT,
            shard_id=0,
            pool=Pool.BULK,
            type="t",
        )
        for i in range(n)
    ]
    late = [p._replace(due_at=p.due_at - timedelta(seconds=60)) for p in in_order]
    mixed = [late[i] if i % 10 == 0 else p for i, p in enumerate(in_order)]
    return {"in_order": in_order, "late_tenth": mixed}


def _deque_push_pop(tasks: list[Preloaded]) -> int:
    queue: collections.deque[Preloaded] = collections.deque()
    for p in tasks:
        queue.append(p)
    n = 0
    while queue:
        queue.popleft()
        n += 1
    return n


@pytest.mark.parametrize("impl", ["ready", "deque"])
@pytest.mark.parametrize("arrival", ["in_order", "late_tenth"])
def test_ready_queue_push_pop(
    benchmark: Any, arrivals: dict[str, list[Preloaded]], arrival: str, impl: str
) -> None:
    """Push 200,000 due tasks into the ready queues and pop them all (the hot path of
    every dispatch round); a bare FIFO deque (no pools, no fair share, no due order) is
    the floor, measured in the same run."""
    tasks = arrivals[arrival]
    run = _push_pop if impl == "ready" else _deque_push_pop
    n = benchmark.pedantic(run, args=(tasks,), rounds=5, iterations=1)
    assert n == len(tasks)
