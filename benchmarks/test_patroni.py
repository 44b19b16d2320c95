"""Patroni failover drill (issue 42): repeated rounds of each fault, with the figures
docs/ha.md reports: fault → promoted, fault → first dispatch on the new primary, the
latest first dispatch after due, handlers run twice, pre-failover tokens refused.

Each round starts a fresh Patroni pair (``tests/support/patroni_drill.py``; the
acceptance test runs one round of each). ``TW_BENCH_PATRONI_ROUNDS`` (default 3).

Run: ``.venv/bin/pytest benchmarks/test_patroni.py --benchmark-only -p no:cacheprovider -s``
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest
from tests.support.patroni import patroni_pair
from tests.support.patroni_drill import FAULTS, FailoverFigures, failover_round
from tests.support.servers import EtcdServer, RedisServer

ROUNDS = int(os.environ.get("TW_BENCH_PATRONI_ROUNDS", "3"))
TASKS = 1200
SPAN_S = 45.0


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_patroni_failover(
    benchmark: Any,
    fault: str,
    etcd_server: EtcdServer,
    redis_server: RedisServer,
    tmp_path: Path,
) -> None:
    def go() -> list[FailoverFigures]:
        out = []
        for i in range(ROUNDS):
            (tmp_path / f"round{i}").mkdir()
            with patroni_pair(etcd_server.endpoint) as pair:
                f = asyncio.run(
                    failover_round(
                        fault,
                        pair,
                        etcd_server,
                        redis_server,
                        tmp_path / f"round{i}",
                        tasks=TASKS,
                        span_s=SPAN_S,
                    )
                )
            print(f"\nround {i + 1}: " + f.line())
            out.append(f)
        return out

    figures: list[FailoverFigures] = benchmark.pedantic(go, rounds=1, iterations=1)
    assert all(f.refused == f.held for f in figures)
    benchmark.extra_info.update(
        rounds=len(figures),
        promoted_s_max=max(f.promoted_s for f in figures),
        resumed_s_max=max(f.resumed_s for f in figures),
        latest_dispatch_s_max=max(f.latest_dispatch_s for f in figures),
        ran_twice_total=sum(f.ran_twice for f in figures),
        tokens_refused=f"{sum(f.refused for f in figures)}/{sum(f.held for f in figures)}",
    )
