"""Concurrency keys (issue 43): what they cost the task lifecycle, and the long chaos run.

- ``test_lifecycle_cost``: the store's whole lifecycle (insert, claim, dispatch, ack,
  complete) of 1,000-task batches on PostgreSQL, rounds interleaved in one run: tasks
  without a key (flow control off) against tasks that each name a key, 10,000 distinct
  keys in turn (every dispatch takes the keyed path: an advisory lock and a count per
  key). The issue's target: keyed >= 0.8x of off.
- ``test_lifecycle_sql_vs_main``: flow control off against main: the lifecycle's
  statements as this branch runs them (``rawsql``, the store's SQL on a raw connection)
  against main's statements (read from ``git show main:...``), interleaved, same
  database. The issue's target: within 3%.
- ``test_chaos``: 1,000 tasks of one key limited to 2, due at once, on three real nodes
  with a node killed (kill -9), a node and a worker SIGSTOPped: the handlers' ledger's
  most attempts running at once, lost and doubled (``tests/support/flow_keys.py``).

Run: ``PYTHONPATH=src:. .venv/bin/pytest benchmarks/test_flow_keys.py --benchmark-only
-p no:cacheprovider -s``; the figures are in docs/benchmarks.md.
"""

from __future__ import annotations

import re
import statistics
import subprocess
import time
from collections.abc import Callable, Coroutine
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from benchmarks.test_store import LEASE, NOW, Env, _bounds, _fenced_sql, _insert_args
from benchmarks.test_store import bench_pg_dsn as bench_pg_dsn
from benchmarks.test_store import env as env
from tests.support import flow_keys
from tests.support.processes import process_group
from tests.support.servers import EtcdServer, RedisServer

from scheduler.store import _sql
from scheduler.store.postgres import Q
from scheduler.types import Completion, DispatchRequest, FencedWrite, NewTask, TaskKey

N = 1000
ROUNDS = 20
REPO = Path(__file__).resolve().parents[1]


def _keyed(env: Env, n: int, offset: int) -> list[NewTask]:
    import dataclasses

    return [
        dataclasses.replace(t, concurrency_key=f"customer-{(offset + i) % 10_000}")
        for i, t in enumerate(env.new_tasks(n))
    ]


async def _life(env: Env, tasks: list[NewTask]) -> None:
    s = env.store
    await s.insert_tasks(tasks, NOW)
    pre = await s.claim_preload(None, NOW + timedelta(minutes=60), len(tasks), NOW)
    asg = await s.mark_dispatched(
        [DispatchRequest(key=p.key, worker_id="w1", lease_expires_at=LEASE) for p in pre], NOW
    )
    writes = [FencedWrite(key=a.key, token=a.fencing_token) for a in asg if hasattr(a, "key")]
    assert len(writes) == len(tasks), "a keyed task was held: keys must be distinct"
    await s.ack(writes, LEASE, NOW)
    await s.complete([Completion(key=w.key, token=w.token) for w in writes], NOW)


def _interleave(
    env: Env, cases: dict[str, tuple[Callable[[], Any], Callable[[Any], Coroutine[Any, Any, Any]]]]
) -> dict[str, float]:
    """Median seconds per case, one run of each per round, in turn."""
    times: dict[str, list[float]] = {k: [] for k in cases}
    order = list(cases)
    for _ in range(ROUNDS):
        order.reverse()  # each case first in every other round
        for name in order:
            setup, op = cases[name]
            arg = setup()
            t0 = time.perf_counter()
            env.run(op(arg))
            times[name].append(time.perf_counter() - t0)
    return {k: statistics.median(v) for k, v in times.items()}


def test_lifecycle_cost(benchmark: Any, env: Env) -> None:
    offset = [0]

    def keyed() -> list[NewTask]:
        env.seed(0, "SCHEDULED")
        offset[0] += N
        return _keyed(env, N, offset[0])

    def plain() -> list[NewTask]:
        env.seed(0, "SCHEDULED")
        return env.new_tasks(N)

    medians = benchmark.pedantic(
        lambda: _interleave(
            env, {"off": (plain, lambda t: _life(env, t)), "keys": (keyed, lambda t: _life(env, t))}
        ),
        rounds=1,
        iterations=1,
    )
    ratio = medians["off"] / medians["keys"]
    benchmark.extra_info.update(
        off_tasks_per_s=round(N / medians["off"]),
        keys_tasks_per_s=round(N / medians["keys"]),
        keys_over_off=round(ratio, 3),
    )
    print(
        f"\nlifecycle, {N}-task batches, median of {ROUNDS} interleaved rounds: off "
        f"{N / medians['off']:,.0f} tasks/s, 10,000 distinct keys "
        f"{N / medians['keys']:,.0f} tasks/s ({ratio:.2f}x of off)"
    )


def _main_queries() -> dict[str, str]:
    text = subprocess.run(
        ["git", "show", "main:src/scheduler/store/sql/postgres/queries.sql"],
        cwd=REPO,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return {k: _sql.expand(v) for k, v in _sql.parse_sections(text).items()}


def _params(sql: str) -> int:
    """How many parameters a statement takes (its highest $n)."""
    return max(int(n) for n in re.findall(r"\$(\d+)", sql))


def test_lifecycle_sql_vs_main(benchmark: Any, env: Env) -> None:
    main = _main_queries()
    day = NOW.replace(hour=0, minute=0, second=0)

    def life(q: dict[str, str], branch: bool) -> Callable[[Any], Coroutine[Any, Any, Any]]:
        async def run(args: tuple[Any, ...]) -> None:
            raw = env.raw
            insert = args[: _params(q["insert_tasks"])]  # an older main: no key column
            async with raw.transaction():
                await raw.fetch(q["insert_tasks"], *insert)
            rows = await raw.fetch(
                q["claim_preload"], NOW + timedelta(minutes=60), None, day,
                day + timedelta(days=1), N, NOW, "scheduler", NOW + timedelta(minutes=60),
            )  # fmt: skip
            ks = [TaskKey(r[0], r[1]) for r in rows]
            lo, hi = _bounds(ks)
            dispatch = [
                [k.id for k in ks], [k.scheduled_at for k in ks], ["w1"] * N, [LEASE] * N,
                NOW, lo, hi, "scheduler", [None] * N, [False] * N,
            ]  # fmt: skip
            if _params(q["mark_dispatched"]) > 10:
                dispatch.append(False)  # keyed: tasks with a key take the keyed path
            await raw.fetch(q["mark_dispatched"], *dispatch)
            await _fenced_sql(env, "ack", ks, LEASE, NOW, lo, hi)
            await _fenced_sql(env, "complete", ks, [None] * N, NOW, lo, hi, [None] * N, tx=True)

        return run

    def setup() -> tuple[Any, ...]:
        env.seed(0, "SCHEDULED")
        return _insert_args(env.new_tasks(N))

    medians = benchmark.pedantic(
        lambda: _interleave(
            env, {"main": (setup, life(main, False)), "branch": (setup, life(Q, True))}
        ),
        rounds=1,
        iterations=1,
    )
    ratio = medians["main"] / medians["branch"]
    benchmark.extra_info.update(
        main_tasks_per_s=round(N / medians["main"]),
        branch_tasks_per_s=round(N / medians["branch"]),
        branch_over_main=round(ratio, 3),
    )
    print(
        f"\nlifecycle SQL, {N}-task batches, median of {ROUNDS} interleaved rounds: main "
        f"{N / medians['main']:,.0f} tasks/s, this branch (no keys) "
        f"{N / medians['branch']:,.0f} tasks/s ({ratio:.3f}x of main)"
    )


@pytest.mark.timeout(900)
def test_chaos(
    benchmark: Any,
    slice_dsn: str,
    etcd_server: EtcdServer,
    redis_server: RedisServer,
    tmp_path: Path,
) -> None:
    import asyncio

    def once() -> flow_keys.KeyFigures:
        with process_group(tmp_path / "procs") as group:
            return asyncio.run(
                flow_keys.run(
                    group,
                    slice_dsn,
                    etcd_server,
                    redis_server,
                    tasks=1000,
                    limit=2,
                    hold_s=0.02,
                    nodes=3,
                    faults=("kill9", "node_stop", "worker_stop"),
                    timeout_s=600,
                )
            )

    figures = benchmark.pedantic(once, rounds=1, iterations=1)
    print("\n" + figures.line())
    benchmark.extra_info.update(
        max_running=figures.max_running,
        zombie_overlap=figures.zombie_overlap,
        lost=figures.lost,
        doubled=figures.doubled,
        attempts=figures.attempts,
        drain_s=round(figures.drain_s, 1),
    )
    assert figures.max_running <= 2
    assert (figures.lost, figures.doubled) == (0, 0)
