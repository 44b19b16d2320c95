"""Concurrency keys on a real two-node cluster with a node killed (issue 43).

Two ``tickwheel serve`` processes (etcd, Redis, one PostgreSQL) and a worker each; a
concurrency key limited to 2; 60 tasks of that key due at once; the second node is
killed with SIGKILL after a third of them completed. The handlers' ledger must show at
no instant more than 2 attempts of the key running, and every task must complete
exactly once (0 lost, 0 doubled). The long version (1,000 tasks, kill -9 and SIGSTOP of
a node and of a worker) is ``benchmarks/test_flow_keys.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import flow_keys
from tests.support.processes import process_group
from tests.support.servers import EtcdServer, RedisServer


@pytest.mark.timeout(240)
async def test_a_key_limited_to_two_never_runs_three_even_when_a_node_dies(
    pg_dsn: str, etcd_server: EtcdServer, redis_server: RedisServer, tmp_path: Path
) -> None:
    with process_group(tmp_path / "procs") as group:
        figures = await flow_keys.run(
            group,
            pg_dsn,
            etcd_server,
            redis_server,
            tasks=60,
            limit=2,
            hold_s=0.05,
            faults=("kill9",),
            timeout_s=120,
        )
    print("\n" + figures.line())
    assert figures.max_running == 2  # the key ran at its limit, never above
    assert figures.lost == 0
    assert figures.doubled == 0
    assert figures.attempts >= 60


def test_the_ledger_reader_counts_overlaps_and_frozen_spans() -> None:
    """The check itself (pure): overlapping attempts, an end before a start at the same
    instant, and a frozen worker's span and zombie tail."""

    def e(event: str, task: str, at: float, worker: str = "w1", token: int = 2) -> dict:
        return {"event": event, "task_id": task, "token": token, "at": at, "worker": worker}

    ledger = [e("start", "a", 0), e("start", "b", 1), e("done", "a", 2), e("start", "c", 2)]
    ledger += [e("done", "b", 3), e("done", "c", 4)]
    assert flow_keys.max_running(ledger) == 2
    ledger.append(e("start", "d", 3.5))
    assert flow_keys.max_running(ledger) == 2  # b ended at 3, d began at 3.5: c and d
    frozen_run = [e("start", "z", 0, "w9"), e("start", "y", 6), e("start", "x", 7)]
    frozen_run += [e("done", "z", 10.1, "w9"), e("done", "y", 11), e("done", "x", 11)]
    frozen = {"w9": (1.0, 10.0)}
    assert flow_keys.max_running(frozen_run) == 3
    assert flow_keys.max_running(frozen_run, frozen) == 2
    assert flow_keys.max_running(frozen_run, frozen, zombies=True) == 3
