"""Debounce by key: 10,000 submissions of one key over 10 s (issue 43).

A real ``tickwheel serve`` on PostgreSQL (fsync on) and a real ``tickwheel worker``
process running ``tests.acceptance.handlers:work``, which appends a line per start
(wall clock) to a records file. ``SUBMITTERS`` concurrent clients paced on one
schedule send ``SUBMISSIONS - 1`` ``SubmitTask`` calls with the same debounce key
(period ``PERIOD_S``, latest payload) over ``SPREAD_S``; once all were answered, the
last one (``{"n": SUBMISSIONS - 1}``) goes alone, so "the last submission" is one call.

Checked (the run fails otherwise): every answer names one task, exactly one execution
(one ``start`` record), and it ran with the last payload. Figures: how far the start
is from the last submission's due time (its commit's ``now`` + period, as the answer
says) and from the client's send of the last call + period, in ms (target: +-10 ms);
the submissions per second reached; the submit round trip p50/p99 (ms).

The worker acks first (the default) unless ``TW_DEBOUNCE_START_ON_DELIVERY=1``.

Run: ``.venv/bin/pytest benchmarks/test_debounce.py --benchmark-only -p no:cacheprovider -s``
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.support.processes import ADMIN_TOKEN, ProcessGroup

from scheduler.client import AdminClient, Client, Debounce, Task, TaskState

SUBMISSIONS = int(os.environ.get("TW_DEBOUNCE_SUBMISSIONS", "10000"))
SPREAD_S = float(os.environ.get("TW_DEBOUNCE_SPREAD_S", "10"))
PERIOD_S = 1.0
SUBMITTERS = 64
START_ON_DELIVERY = os.environ.get("TW_DEBOUNCE_START_ON_DELIVERY") == "1"
"""``TW_DEBOUNCE_START_ON_DELIVERY=1``: the worker starts on delivery (no ack round trip
between the push and the handler's start: two process hops fewer after the due time)."""

FIGURES: dict[str, float] = {}


@pytest.fixture(scope="module", autouse=True)
def debounce_table(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    tr = request.config.pluginmanager.get_plugin("terminalreporter")
    if tr is None or not FIGURES:
        return
    tr.write_line("")
    tr.write_line(
        f"debounce: {SUBMISSIONS:,} submissions of one key over {SPREAD_S:.0f} s, "
        f"period {PERIOD_S:.1f} s"
        + (", worker starting on delivery" if START_ON_DELIVERY else ", worker acking first")
    )
    tr.write_line("  " + ", ".join(f"{k}={v:,.2f}" for k, v in FIGURES.items()))


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def _key(target: str) -> str:
    async with await AdminClient.connect(target, admin_token=ADMIN_TOKEN) as admin:
        tenant = await admin.create_tenant(
            "bench", rate_limit_rps=1_000_000, max_concurrent_workers=1_000_000
        )
        return (await admin.create_api_key(tenant.id, "bench")).secret


async def _burst(target: str, key: str, records: Path) -> dict[str, float]:
    d = Debounce(key="burst", period_s=PERIOD_S)
    clients = [await Client.connect(target, api_key=key) for _ in range(SUBMITTERS)]
    rtt_ms: list[float] = []
    answers: list[Task] = []
    try:
        loop = asyncio.get_running_loop()
        start = loop.time() + 0.5
        step = SPREAD_S / max(1, SUBMISSIONS - 1)

        async def submitter(k: int) -> None:
            client = clients[k]
            for n in range(k, SUBMISSIONS - 1, SUBMITTERS):
                delay = start + n * step - loop.time()
                if delay > 0:
                    await asyncio.sleep(delay)
                sent = time.perf_counter()
                answers.append(await client.submit("work", {"n": n}, debounce=d))
                rtt_ms.append((time.perf_counter() - sent) * 1000.0)

        began = loop.time()
        await asyncio.gather(*(submitter(k) for k in range(SUBMITTERS)))
        delay = start + (SUBMISSIONS - 1) * step - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        sent_at = time.time()
        last = await clients[0].submit("work", {"n": SUBMISSIONS - 1}, debounce=d)
        took_s = loop.time() - began
        answers.append(last)
        ids = {a.id for a in answers}
        assert ids == {last.id}, f"{len(ids)} tasks for one key"
        assert sum(a.created for a in answers) == 1
        done = await clients[0].wait(last.id, timeout_s=60)
        assert done.state is TaskState.COMPLETED
        assert done.payload == {"n": SUBMISSIONS - 1}
        await asyncio.sleep(PERIOD_S)  # a second run, if there were one, would show
    finally:
        for c in clients:
            await c.close()
    text = await asyncio.to_thread(records.read_text)
    lines = [json.loads(x) for x in text.splitlines() if x]
    starts = [r for r in lines if r["event"] == "start"]
    assert len(starts) == 1, f"{len(starts)} executions"
    started = starts[0]["at"]
    return {
        "executions": float(len(starts)),
        "start_minus_due_ms": (started - done.due_at.timestamp()) * 1000.0,
        "start_minus_last_send_plus_period_ms": (started - sent_at - PERIOD_S) * 1000.0,
        "submissions_per_s": SUBMISSIONS / took_s,
        "submit_p50_ms": _pct(rtt_ms, 0.5),
        "submit_p99_ms": _pct(rtt_ms, 0.99),
    }


def test_ten_thousand_debounced_submissions_run_once(
    benchmark: Any, slice_dsn: str, tmp_path: Path
) -> None:
    group = ProcessGroup(tmp_path / "procs")
    records = tmp_path / "records.jsonl"
    try:
        server = group.serve(slice_dsn, lease_ttl_s=30.0, extra_args=["--canary-interval-s", "0"])
        key = asyncio.run(_key(server.target))
        group.worker(
            server.target,
            key,
            {"work": "tests.acceptance.handlers:work"},
            name="worker",
            slots=10,
            env={"TW_RECORD_FILE": str(records)},
            extra_args=["--start-on-delivery"] if START_ON_DELIVERY else [],
        )
        figures: dict[str, float] = benchmark.pedantic(
            lambda: asyncio.run(_burst(server.target, key, records)), rounds=1, iterations=1
        )
    finally:
        group.stop_all()
    benchmark.extra_info.update(figures)
    FIGURES.update(figures)
