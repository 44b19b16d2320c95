"""Timing wheel against the alternatives, one lifecycle per timer.

1,000,000 timers due uniformly over one hour, 80% cancelled, 20% fired; time then moves
through the hour in 1-second steps, as a dispatcher would. Cost per timer is the whole
lifecycle (add, cancel or fire) divided by the number of timers. Run with
``pytest benchmarks/test_wheel.py --benchmark-only``.
"""

from __future__ import annotations

import asyncio
import gc
import heapq
import random
import time
from array import array
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import psutil
import pytest
import redis

from _wheel import IMPLEMENTATION
from _wheel._wheel_py import TimingWheel as PyTimingWheel

N = 1_000_000
HOUR_MS = 3_600_000
STEP_MS = 1_000
START_MS = 1_700_000_000_000


@dataclass
class Workload:
    keys: array[int]
    dues: array[int]
    cancel: array[int]  # 80% of the keys, in random order
    steps: list[int]  # the now_ms values of the advance calls


def _workload(n: int = N) -> Workload:
    rng = random.Random(20240601)
    keys = list(range(1, n + 1))
    rng.shuffle(keys)
    dues = [START_MS + 1 + rng.randrange(HOUR_MS) for _ in range(n)]
    cancel = rng.sample(keys, n * 8 // 10)
    steps = list(range(START_MS + STEP_MS, START_MS + HOUR_MS + 2 * STEP_MS, STEP_MS))
    return Workload(array("q", keys), array("q", dues), array("q", cancel), steps)


RESULTS: dict[str, dict[str, float]] = {}


@pytest.fixture(scope="module")
def work(wheel_results: dict[str, dict[str, float]]) -> Workload:
    global RESULTS
    RESULTS = wheel_results
    return _workload()


def _rss() -> int:
    gc.collect()
    return int(psutil.Process().memory_info().rss)


def _record(
    benchmark: Any, name: str, phases: dict[str, float], n: int, fired: int, mem: float
) -> None:
    total = sum(phases.values())
    cancelled = n * 8 // 10
    assert fired == n - cancelled
    figures = {
        "ns_per_timer": total / n * 1e9,
        "timers_per_s": n / total,
        "add_per_s": n / phases["add"],
        "cancel_per_s": cancelled / phases["cancel"],
        "expire_per_s": fired / phases["expire"],
        "bytes_per_timer": mem / n,
    }
    RESULTS[name] = figures
    benchmark.extra_info.update(figures)


def _once(benchmark: Any, run: Callable[[], None]) -> None:
    benchmark.pedantic(run, rounds=1, iterations=1, warmup_rounds=0)


def _wheel_run(
    benchmark: Any, name: str, work: Workload, cls: type[PyTimingWheel], *, bulk: bool
) -> None:
    def run() -> None:
        wheel = cls(start_ms=START_MS)
        phases: dict[str, float] = {}
        rss = _rss()
        t0 = time.perf_counter()
        if bulk:
            wheel.add_many(work.keys, work.dues)
        else:
            add = wheel.add
            for key, due in zip(work.keys, work.dues, strict=True):
                add(key, due)
        phases["add"] = time.perf_counter() - t0
        mem = wheel.memory_bytes() if IMPLEMENTATION == "c" else _rss() - rss
        assert len(wheel) == N
        t0 = time.perf_counter()
        if bulk:
            wheel.cancel_many(work.cancel)
        else:
            cancel = wheel.cancel
            for key in work.cancel:
                cancel(key)
        phases["cancel"] = time.perf_counter() - t0
        fired = 0
        advance = wheel.advance
        t0 = time.perf_counter()
        for now in work.steps:
            fired += len(advance(now))
        phases["expire"] = time.perf_counter() - t0
        assert len(wheel) == 0
        _record(benchmark, name, phases, N, fired, mem)

    _once(benchmark, run)


def test_wheel_add(benchmark: Any, work: Workload) -> None:
    """(a) the wheel, one ``add`` and one ``cancel`` call per timer."""
    from _wheel import TimingWheel

    _wheel_run(benchmark, "wheel_add", work, TimingWheel, bulk=False)


def test_wheel_add_many(benchmark: Any, work: Workload) -> None:
    """(b) the wheel, ``add_many`` and ``cancel_many`` over int64 buffers."""
    from _wheel import TimingWheel

    _wheel_run(benchmark, "wheel_add_many", work, TimingWheel, bulk=True)


def test_wheel_pure_python(benchmark: Any, work: Workload) -> None:
    """The pure-Python twin (the fallback), with the buffer calls."""
    _wheel_run(benchmark, "wheel_py_add_many", work, PyTimingWheel, bulk=True)


def test_heapq_lazy_cancel(benchmark: Any, work: Workload) -> None:
    """(c) ``heapq`` of ``(due, key)`` with a cancelled-key set checked on pop."""

    def run() -> None:
        heap: list[tuple[int, int]] = []
        cancelled: set[int] = set()
        phases: dict[str, float] = {}
        rss = _rss()
        t0 = time.perf_counter()
        push = heapq.heappush
        for key, due in zip(work.keys, work.dues, strict=True):
            push(heap, (due, key))
        phases["add"] = time.perf_counter() - t0
        mem = _rss() - rss
        t0 = time.perf_counter()
        discard = cancelled.add
        for key in work.cancel:
            discard(key)
        phases["cancel"] = time.perf_counter() - t0
        fired = 0
        pop = heapq.heappop
        t0 = time.perf_counter()
        for now in work.steps:
            out = []
            while heap and heap[0][0] <= now:
                key = pop(heap)[1]
                if key in cancelled:
                    cancelled.remove(key)
                else:
                    out.append(key)
            fired += len(out)
        phases["expire"] = time.perf_counter() - t0
        _record(benchmark, "heapq", phases, N, fired, mem)

    _once(benchmark, run)


class _VirtualClockLoop(asyncio.SelectorEventLoop):
    """An event loop whose clock the benchmark sets: an hour passes instantly."""

    virtual_s = 0.0

    def time(self) -> float:
        return self.virtual_s


def test_asyncio_call_at(benchmark: Any, work: Workload) -> None:
    """(d) ``loop.call_at`` + ``TimerHandle.cancel`` on a virtual-clock event loop."""

    def run() -> None:
        loop = _VirtualClockLoop()
        loop.virtual_s = START_MS / 1000
        fired = [0]

        def on_due(_key: int) -> None:
            fired[0] += 1

        phases: dict[str, float] = {}
        rss = _rss()
        t0 = time.perf_counter()
        call_at = loop.call_at
        handles = {
            key: call_at(due / 1000, on_due, key)
            for key, due in zip(work.keys, work.dues, strict=True)
        }
        phases["add"] = time.perf_counter() - t0
        mem = _rss() - rss
        t0 = time.perf_counter()
        for key in work.cancel:
            handles[key].cancel()
        phases["cancel"] = time.perf_counter() - t0
        del handles
        t0 = time.perf_counter()
        end = (START_MS + HOUR_MS + STEP_MS) / 1000
        loop.call_at(end, loop.stop)
        loop.virtual_s = end + 1
        loop.run_forever()
        phases["expire"] = time.perf_counter() - t0
        loop.close()
        _record(benchmark, "asyncio", phases, N, fired[0], mem)

    _once(benchmark, run)


def test_redis_zset(benchmark: Any, work: Workload, redis_server: Any) -> None:
    """(e) a Redis sorted set: pipelined ZADD / ZREM, ZRANGEBYSCORE + ZREMRANGEBYSCORE."""
    client = redis.Redis(host=redis_server.host, port=redis_server.port)
    zkey = "bench:wheel:zset"
    batch = 10_000

    def run() -> None:
        client.delete(zkey)
        before = int(client.info("memory")["used_memory"])
        phases: dict[str, float] = {}
        keys = work.keys.tolist()
        dues = work.dues.tolist()
        t0 = time.perf_counter()
        for i in range(0, N, batch):
            pipe = client.pipeline(transaction=False)
            for key, due in zip(keys[i : i + batch], dues[i : i + batch], strict=True):
                pipe.zadd(zkey, {key: due})
            pipe.execute()
        phases["add"] = time.perf_counter() - t0
        mem = int(client.info("memory")["used_memory"]) - before
        cancel = work.cancel.tolist()
        t0 = time.perf_counter()
        for i in range(0, len(cancel), batch):
            pipe = client.pipeline(transaction=False)
            for key in cancel[i : i + batch]:
                pipe.zrem(zkey, key)
            pipe.execute()
        phases["cancel"] = time.perf_counter() - t0
        fired = 0
        t0 = time.perf_counter()
        for now in work.steps:
            pipe = client.pipeline(transaction=True)
            pipe.zrangebyscore(zkey, "-inf", now)
            pipe.zremrangebyscore(zkey, "-inf", now)
            due_now, _ = pipe.execute()
            fired += len(due_now)
        phases["expire"] = time.perf_counter() - t0
        assert client.zcard(zkey) == 0
        _record(benchmark, "redis_zset", phases, N, fired, mem)

    try:
        _once(benchmark, run)
    finally:
        client.delete(zkey)
        client.close()
