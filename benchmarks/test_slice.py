"""The vertical slice, measured end to end (issue 5): real processes, real PostgreSQL.

- ``submit``: SubmitTask one at a time (sequential, and 64 in flight) and SubmitTasks
  in batches of 1,000, against ``tickwheel serve`` in its own process.
- ``lifecycle``: submit -> dispatch -> ack -> complete on PostgreSQL with fsync on;
  ``tickwheel serve`` and ``tickwheel worker`` are separate processes; tasks/s from the
  first submit to the last completion (the ledger's ``completed_at``).
- ``stream_vs_unary``: the same completions sent on the worker stream against one
  ``CompleteTask`` unary call per task. There is no unary *fetch* RPC (assignments are
  only ever pushed on the stream), so the per-task unary baseline is the fenced write
  that does exist as a unary RPC: completion. Dispatch and ack are identical in both.
- ``lateness``: 1,000,000 PRELOADED timers (due in 10-55 min) sit in the wheel while a
  steady stream due 1 s after submission runs at 1k/s, 5k/s and then 10k/s for 10 s each,
  each task due ``1 / rate`` s after the one before (``TW_BENCH_LATENESS_DUE=bursts``:
  a submit call's tasks all due at one instant, as before 2026-12-05); lateness = time
  the worker process received the assignment - due time, and when its handler started
  (and the engine's own delivery lateness). Engine and gRPC server run in this process,
  the worker in its own; the CPU a task of each is reported. The tasks are submitted
  by ``engine.submit`` in this process (``TW_BENCH_LATENESS_CLIENT=process``: by a
  client process over gRPC, ``steady_client.py``). ``in_process``: the engine alone,
  its tasks consumed in this process too.
- ``metrics``: the lifecycle with ``/metrics`` on (scraped every second) and off.

Every figure goes into ``benchmark.extra_info`` and into the table printed at the end of
the module. The machine has 2 cores shared by server, worker(s), PostgreSQL and this
process: the figures are bounded by that. Method and figures: docs/benchmarks.md.

Run: ``make bench`` or
``.venv/bin/pytest benchmarks/test_slice.py --benchmark-only -p no:cacheprovider -s``
"""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import json
import os
import statistics
import sys
import time
import uuid
from collections.abc import Callable, Coroutine, Iterator
from contextlib import suppress
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import grpc
import pytest
from tests.support.processes import ADMIN_TOKEN, ProcessGroup, ServeProcess, WorkerProcess
from tests.support.servers import PostgresServer

from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from scheduler._proto.tickwheel.v1 import tickwheel_pb2_grpc as pbg
from scheduler.cli._runner import tune_gc
from scheduler.client import AdminClient, Client, TaskSpec
from scheduler.engine import (
    AssignmentBatch,
    Engine,
    EngineConfig,
    SubmitSpec,
    WorkerHello,
    WorkerSession,
)
from scheduler.jsonbytes import as_dict
from scheduler.server import Server, ServerConfig
from scheduler.store import StoreConfig
from scheduler.store.postgres import PostgresStore
from scheduler.types import Completion, FencedWrite, Tenant

HANDLERS = "tests.acceptance.handlers"
FAR = datetime.now(UTC) + timedelta(days=2)

#: benchmark -> figures, printed as one table at the end of the module.
SLICE: dict[str, dict[str, float]] = {}


@pytest.fixture(scope="module", autouse=True)
def slice_table(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    tr = request.config.pluginmanager.get_plugin("terminalreporter")
    if tr is None or not SLICE:
        return
    w = tr.write_line
    w("")
    w("vertical slice (2 cores: server, worker, PostgreSQL fsync=on and the driver)")
    for name, figures in SLICE.items():
        cells = ", ".join(
            f"{k}={v:,.1f}" if isinstance(v, float) else f"{k}={v:,}" for k, v in figures.items()
        )
        w(f"  {name:<28} {cells}")


def _record(benchmark: Any, name: str, **figures: float) -> None:
    SLICE[name] = figures
    benchmark.extra_info.update(figures)


@pytest.fixture(scope="module")
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    """One event loop for the module's async set-up and measurements."""
    lp = asyncio.new_event_loop()
    try:
        yield lp
    finally:
        lp.close()


def _run(loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, Any]) -> Any:
    return loop.run_until_complete(coro)


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


# -- a served Tickwheel ---------------------------------------------------------------


@dataclasses.dataclass
class Served:
    group: ProcessGroup
    server: ServeProcess
    api_key: str
    tenant_id: uuid.UUID
    dsn: str


async def _tenant_key(target: str) -> tuple[uuid.UUID, str]:
    async with await AdminClient.connect(target, admin_token=ADMIN_TOKEN) as admin:
        tenant = await admin.create_tenant(
            "bench", rate_limit_rps=1_000_000, max_concurrent_workers=1_000_000
        )
        key = await admin.create_api_key(tenant.id, "bench")
    return tenant.id, key.secret


@pytest.fixture
def served(slice_dsn: str, tmp_path: Path, loop: asyncio.AbstractEventLoop) -> Iterator[Served]:
    group = ProcessGroup(tmp_path / "procs")
    try:
        server = group.serve(slice_dsn, lease_ttl_s=30.0, extra_args=("--canary-interval-s", "0"))
        tenant_id, key = _run(loop, _tenant_key(server.target))
        yield Served(group, server, key, tenant_id, slice_dsn)
    finally:
        group.stop_all()


# -- submit throughput ------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["single", "single_x64", "batch_1000"])
def test_submit_throughput(
    benchmark: Any, served: Served, loop: asyncio.AbstractEventLoop, mode: str
) -> None:
    n = {"single": 2_000, "single_x64": 6_400, "batch_1000": 30_000}[mode]

    async def go() -> float:
        async with await Client.connect(served.server.target, api_key=served.api_key) as c:
            await c.submit("warm", scheduled_at=FAR)
            started = time.perf_counter()
            if mode == "single":
                for i in range(n):
                    await c.submit("bench", {"i": i}, scheduled_at=FAR, strict_timing=True)
            elif mode == "single_x64":

                async def lane(k: int) -> None:
                    for i in range(k, n, 64):
                        await c.submit("bench", {"i": i}, scheduled_at=FAR, strict_timing=True)

                await asyncio.gather(*(lane(k) for k in range(64)))
            else:
                for start in range(0, n, 1000):
                    await c.submit_many(
                        TaskSpec(type="bench", payload={"i": i}, scheduled_at=FAR)
                        for i in range(start, start + 1000)
                    )
            return time.perf_counter() - started

    elapsed = benchmark.pedantic(lambda: _run(loop, go()), rounds=1, iterations=1)
    _record(benchmark, f"submit {mode}", tasks=n, seconds=elapsed, tasks_per_s=n / elapsed)


# -- full durable lifecycle ----------------------------------------------------------------


async def _wait_completed(dsn: str, n: int, timeout_s: float) -> datetime:
    """Poll until ``n`` tasks completed; the last ledger ``completed_at``.

    Twice a second: each poll counts the ledger, CPU taken from the system measured
    (the figure is the ledger's last ``completed_at``, not when the poll saw it)."""
    conn = await asyncpg.connect(dsn)
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            done = await conn.fetchval("SELECT count(*) FROM task_completions WHERE type = 'bench'")
            if done >= n:
                return await conn.fetchval(
                    "SELECT max(completed_at) FROM task_completions WHERE type = 'bench'"
                )
            if time.monotonic() > deadline:
                raise AssertionError(f"only {done} of {n} tasks completed in {timeout_s} s")
            await asyncio.sleep(0.5)
    finally:
        await conn.close()


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("start", ["ack", "on_delivery"])
def test_full_lifecycle(
    benchmark: Any, served: Served, loop: asyncio.AbstractEventLoop, workers: int, start: str
) -> None:
    n = 40_000
    procs: list[WorkerProcess] = [
        served.group.worker(
            served.server.target,
            served.api_key,
            {"bench": f"{HANDLERS}:fast"},
            name=f"bench-worker-{i}",
            slots=2_000,
            extra_args=("--start-on-delivery",) if start == "on_delivery" else (),
        )
        for i in range(workers)
    ]

    async def go() -> dict[str, float]:
        async with await Client.connect(served.server.target, api_key=served.api_key) as c:
            first = datetime.now(UTC)
            for start in range(0, n, 10_000):
                await c.submit_many(
                    TaskSpec(type="bench", payload={"i": i}, strict_timing=True)
                    for i in range(start, start + 10_000)
                )
            submitted = (datetime.now(UTC) - first).total_seconds()
            last = await _wait_completed(served.dsn, n, timeout_s=300)
        total = (last - first).total_seconds()
        return {"submit_s": submitted, "seconds": total}

    figures = benchmark.pedantic(lambda: _run(loop, go()), rounds=1, iterations=1)
    assert all(p.running() for p in procs), served.group.explain()
    _record(
        benchmark,
        f"lifecycle {workers} worker(s), {start}",
        tasks=n,
        submit_s=figures["submit_s"],
        seconds=figures["seconds"],
        tasks_per_s=n / figures["seconds"],
        vs_target_8000=n / figures["seconds"] / 8000,
    )


# -- on/off comparisons ------------------------------------------------------------------


def _ab_order(runs: int) -> list[str]:
    """``runs`` runs of each mode, alternating so drift hits both: on, off, off, on, ..."""
    return [m for i in range(runs) for m in (("on", "off") if i % 2 == 0 else ("off", "on"))]


def _ab_series(
    benchmark: Any, label: str, runs: int, one: Callable[[int, str], float]
) -> dict[str, float]:
    """Run ``one(i, mode)`` over :func:`_ab_order` under the benchmark, record each rate
    and the means under ``label``; the recorded figures."""

    def all_runs() -> dict[str, list[float]]:
        out: dict[str, list[float]] = {"on": [], "off": []}
        for i, mode in enumerate(_ab_order(runs)):
            out[mode].append(one(i, mode))
        return out

    f = benchmark.pedantic(all_runs, rounds=1, iterations=1)
    mean_on, mean_off = statistics.fmean(f["on"]), statistics.fmean(f["off"])
    figures: dict[str, float] = {f"{m}_{i}": r for m in ("on", "off") for i, r in enumerate(f[m])}
    figures |= {
        "mean_on": mean_on,
        "mean_off": mean_off,
        "ratio_on_off": mean_on / mean_off,
        "cost_pct": (1 - mean_on / mean_off) * 100,
    }
    _record(benchmark, label, **figures)
    return figures


async def _submit_and_drain(target: str, key: str, dsn: str, n: int) -> float:
    """Submit ``n`` immediate tasks in batches of 10,000; tasks/s until all completed."""
    async with await Client.connect(target, api_key=key) as c:
        first = datetime.now(UTC)
        for start in range(0, n, 10_000):
            await c.submit_many(
                TaskSpec(type="bench", payload={"i": i}, strict_timing=True)
                for i in range(start, start + 10_000)
            )
        last = await _wait_completed(dsn, n, timeout_s=300)
    return n / (last - first).total_seconds()


# -- the cost of row-level security ------------------------------------------------------


def test_lifecycle_row_level_security_cost(
    benchmark: Any, new_slice_database: Any, tmp_path: Path, loop: asyncio.AbstractEventLoop
) -> None:
    """The lifecycle (ack, 1 worker) with ``serve --row-level-security`` on and off,
    alternating (on, off, off, on, ...), each run on a fresh database owned by the
    application role; ``TW_BENCH_RLS_RUNS`` runs of each (default 3)."""
    import contextlib
    import os

    runs = int(os.environ.get("TW_BENCH_RLS_RUNS", "3"))
    n = 40_000

    def one(i: int, mode: str) -> float:
        with contextlib.ExitStack() as stack:
            dsn = stack.enter_context(new_slice_database())
            group = ProcessGroup(tmp_path / f"run{i}-{mode}")
            stack.callback(group.stop_all)
            flag = "--row-level-security" if mode == "on" else "--no-row-level-security"
            server = group.serve(
                dsn, lease_ttl_s=30.0, extra_args=("--canary-interval-s", "0", flag)
            )
            _tenant, key = _run(loop, _tenant_key(server.target))
            worker = group.worker(
                server.target, key, {"bench": f"{HANDLERS}:fast"}, name="rls-w", slots=2_000
            )

            rate: float = _run(loop, _submit_and_drain(server.target, key, dsn, n))
            assert worker.running(), group.explain()
            return rate

    _ab_series(benchmark, "lifecycle rls on vs off", runs, one)


# -- the cost of /metrics ---------------------------------------------------------------


async def _scrape_every(urls: list[str], interval_s: float, stop: asyncio.Event) -> int:
    """Scrape each URL every ``interval_s`` until ``stop``; how many scrapes."""
    import urllib.request

    n = 0

    def get(url: str) -> int:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return len(resp.read())

    while not stop.is_set():
        for url in urls:
            await asyncio.to_thread(get, url)
            n += 1
        with suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), interval_s)
    return n


def test_lifecycle_metrics_cost(
    benchmark: Any, new_slice_database: Any, tmp_path: Path, loop: asyncio.AbstractEventLoop
) -> None:
    """The lifecycle (ack, 1 worker) with ``/metrics`` on and off, alternating (on, off,
    off, on, ...), each run on a fresh database. "On": ``serve`` and ``worker`` serve
    ``/metrics`` (the node's depth query every second, not the default 10 s) and this
    process scrapes both every second while the tasks run (15 times Prometheus' default
    rate). The counters are kept either way (plain ints and bucket lists); "on" adds
    the scrapes, the exposition and the depth query. ``TW_BENCH_METRICS_RUNS`` runs of
    each (default 3)."""
    import contextlib
    import os

    from tests.support.servers import free_port

    runs = int(os.environ.get("TW_BENCH_METRICS_RUNS", "3"))
    n = 40_000

    def one(i: int, mode: str) -> float:
        with contextlib.ExitStack() as stack:
            dsn = stack.enter_context(new_slice_database())
            group = ProcessGroup(tmp_path / f"run{i}-{mode}")
            stack.callback(group.stop_all)
            serve_args: tuple[str, ...] = ("--canary-interval-s", "0")
            worker_args: tuple[str, ...] = ()
            urls: list[str] = []
            if mode == "on":
                node_port, worker_port = free_port(), free_port()
                serve_args += (
                    "--metrics-port",
                    str(node_port),
                    "--metrics-depth-interval-s",
                    "1",
                )
                worker_args = ("--metrics-port", str(worker_port))
                urls = [
                    f"http://127.0.0.1:{node_port}/metrics",
                    f"http://127.0.0.1:{worker_port}/metrics",
                ]
            server = group.serve(dsn, lease_ttl_s=30.0, extra_args=serve_args)
            _tenant, key = _run(loop, _tenant_key(server.target))
            worker = group.worker(
                server.target,
                key,
                {"bench": f"{HANDLERS}:fast"},
                name="metrics-w",
                slots=2_000,
                extra_args=worker_args,
            )

            async def go() -> float:
                stop = asyncio.Event()
                scraper = asyncio.create_task(_scrape_every(urls, 1.0, stop), name="scraper")
                rate = await _submit_and_drain(server.target, key, dsn, n)
                stop.set()
                scrapes = await scraper
                assert scrapes >= len(urls)
                return rate

            rate: float = _run(loop, go())
            assert worker.running(), group.explain()
            return rate

    _ab_series(benchmark, "lifecycle metrics on vs off", runs, one)
    assert SLICE["lifecycle metrics on vs off"]["mean_on"] > 0


# -- streaming against one task per unary call ------------------------------------------


class RawStream:
    """A minimal worker on the bidi stream: collects assignments, matches results."""

    def __init__(self, channel: grpc.aio.Channel, api_key: str) -> None:
        stub = pbg.WorkerServiceStub(channel)  # type: ignore[no-untyped-call]
        self.call = stub.Connect(metadata=(("x-api-key", api_key),))
        self.refs: list[pb.TaskRef] = []
        self.results: dict[int, pb.Result] = {}
        self.changed = asyncio.Event()
        self._ids = 0
        self._reader: asyncio.Task[None] | None = None

    async def open(self, slots: int) -> None:
        hello = pb.Hello(worker_id="raw-bench", task_types=["bench"], slots=slots)
        await self.call.write(pb.WorkerMessage(hello=hello))
        first = await self.call.read()
        assert first.WhichOneof("kind") == "welcome"
        self._reader = asyncio.create_task(self._read(), name="bench-raw-reader")

    async def _read(self) -> None:
        while True:
            msg = await self.call.read()
            if msg is grpc.aio.EOF:  # type: ignore[attr-defined]
                return
            kind = msg.WhichOneof("kind")
            if kind == "assignments":
                self.refs.extend(
                    pb.TaskRef(
                        task_id=a.task_id,
                        fencing_token=a.fencing_token,
                        scheduled_at=a.scheduled_at,
                    )
                    for a in msg.assignments.tasks
                )
            elif kind == "result":
                self.results[msg.result.request_id] = msg.result
            self.changed.set()

    async def until(self, predicate: Any, timeout_s: float = 120.0) -> None:
        deadline = time.monotonic() + timeout_s
        while not predicate():
            self.changed.clear()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError("raw stream: timed out")
            try:
                await asyncio.wait_for(self.changed.wait(), remaining)
            except TimeoutError:
                continue

    async def send(self, msg: pb.WorkerMessage) -> int:
        self._ids += 1
        msg.request_id = self._ids
        await self.call.write(msg)
        return self._ids

    async def close(self) -> None:
        await self.call.done_writing()
        if self._reader is not None:
            await self._reader


async def _dispatched_and_acked(c: Client, raw: RawStream, n: int) -> list[pb.TaskRef]:
    """Submit ``n`` tasks due now; wait until the stream has them all and acked them."""
    before = len(raw.refs)
    await c.submit_many(
        TaskSpec(type="bench", payload={"i": i}, strict_timing=True) for i in range(n)
    )
    await raw.until(lambda: len(raw.refs) >= before + n)
    refs = raw.refs[before : before + n]
    rid = await raw.send(pb.WorkerMessage(ack=pb.Ack(tasks=refs)))
    await raw.until(lambda: rid in raw.results)
    assert all(r.ok for r in raw.results[rid].results)
    return refs


def test_stream_vs_unary_completion(
    benchmark: Any, served: Served, loop: asyncio.AbstractEventLoop
) -> None:
    n = 3_000
    meta = (("x-api-key", served.api_key),)

    async def go() -> dict[str, float]:
        async with await Client.connect(served.server.target, api_key=served.api_key) as c:
            channel = grpc.aio.insecure_channel(served.server.target)
            raw = RawStream(channel, served.api_key)
            try:
                await raw.open(slots=4 * n)
                stub = pbg.WorkerServiceStub(channel)  # type: ignore[no-untyped-call]
                out: dict[str, float] = {}

                refs = await _dispatched_and_acked(c, raw, n)
                t0 = time.perf_counter()
                ids = [
                    await raw.send(pb.WorkerMessage(completion=pb.Completion(task=ref)))
                    for ref in refs
                ]
                await raw.until(lambda: all(i in raw.results for i in ids))
                out["stream_s"] = time.perf_counter() - t0
                assert all(raw.results[i].results[0].ok for i in ids)

                refs = await _dispatched_and_acked(c, raw, n)
                t0 = time.perf_counter()
                for ref in refs:
                    await stub.CompleteTask(
                        pb.CompleteTaskRequest(task=ref), metadata=meta, timeout=30
                    )
                out["unary_s"] = time.perf_counter() - t0

                refs = await _dispatched_and_acked(c, raw, n)
                t0 = time.perf_counter()

                async def lane(k: int) -> None:
                    for ref in refs[k::64]:
                        await stub.CompleteTask(
                            pb.CompleteTaskRequest(task=ref), metadata=meta, timeout=30
                        )

                await asyncio.gather(*(lane(k) for k in range(64)))
                out["unary_x64_s"] = time.perf_counter() - t0
                await raw.close()
            finally:
                await channel.close(None)
        return out

    f = benchmark.pedantic(lambda: _run(loop, go()), rounds=1, iterations=1)
    _record(
        benchmark,
        "stream vs unary completion",
        tasks=n,
        stream_per_s=n / f["stream_s"],
        unary_per_s=n / f["unary_s"],
        unary_x64_per_s=n / f["unary_x64_s"],
        ratio_vs_unary=f["unary_s"] / f["stream_s"],
        ratio_vs_unary_x64=f["unary_x64_s"] / f["stream_s"],
    )


# -- dispatch lateness with 1M outstanding timers -----------------------------------------

OUTSTANDING = int(os.environ.get("TW_BENCH_OUTSTANDING", "1000000"))
"""Timers waiting in the wheel (due in 10-55 min) while the lateness is measured."""
RATES = tuple(
    int(r) for r in os.environ.get("TW_BENCH_LATENESS_RATES", "1000,5000,10000").split(",")
)
"""The steady rates (fires/s) of the lateness benchmark, 10 s each."""
CLIENT_PROCESS = os.environ.get("TW_BENCH_LATENESS_CLIENT", "") == "process"
"""``TW_BENCH_LATENESS_CLIENT=process``: the worker-process benchmark's tasks are
submitted by a client process over gRPC (``steady_client.py``), not by
``engine.submit`` in this process (on 2 cores that third process costs more than it
frees: docs/benchmarks.md, "Steady fires")."""
BURSTS = os.environ.get("TW_BENCH_LATENESS_DUE", "spread") == "bursts"
"""``TW_BENCH_LATENESS_DUE=bursts``: every task of one submit call is due at the same
instant (the pattern before 2026-12-05: bursts of one call's tasks, 27-50 a second at
5k/s), instead of each task ``1 / rate`` s after the one before."""


async def _seed_outstanding(dsn: str, tenant_id: uuid.UUID, n: int) -> None:
    """``n`` PRELOADED tasks due in 10-55 minutes, written by PostgreSQL itself (set-up,
    not measured; COPY is refused on a table with row-level security)."""
    now = datetime.now(UTC)
    conn = await asyncpg.connect(dsn)
    try:
        for day in range(2):
            await conn.execute(
                "SELECT tickwheel_ensure_partition($1::date)", (now + timedelta(days=day)).date()
            )
        await conn.execute(
            """
            INSERT INTO tasks (id, tenant_id, type, scheduled_at, due_at, status,
                               idempotency_key, payload, shard_id)
            SELECT gen_random_uuid(), $2, 'idle', t, t, 'PRELOADED', g::text, '{}', g % 256
            FROM (SELECT g, $1::timestamptz + interval '10 minutes'
                         + (g::float8 * 2700.0 / $3) * interval '1 second' AS t
                  FROM generate_series(0, $3 - 1) g) s
            """,
            now,
            tenant_id,
            n,
        )
        await conn.execute("ANALYZE tasks")
    finally:
        await conn.close()


async def _steady_stream(
    engine: Engine, tenant_id: uuid.UUID, rate: int, seconds: float
) -> tuple[int, float]:
    """Submit ``rate`` tasks/s for ``seconds`` in calls of at most 1,000: task ``j`` is
    due ``1 + j / rate`` s after the phase began (1 s after its turn to be sent), so
    the fires are ``1 / rate`` s apart, not in bursts of one call's tasks. Returns
    (tasks sent, slowest submit call in ms)."""
    phase = f"{rate}"
    loop = asyncio.get_running_loop()
    started = loop.time()
    first_due = datetime.now(UTC) + timedelta(seconds=1)
    sent = 0
    slowest = 0.0
    total = int(rate * seconds)
    while sent < total:
        k = min(1000, min(total, int((loop.time() - started) * rate) + 1) - sent)
        if k > 0:
            burst = datetime.now(UTC) + timedelta(seconds=1) if BURSTS else None
            t0 = loop.time()
            await engine.submit(
                tenant_id,
                [
                    SubmitSpec(
                        type="late",
                        payload={"phase": phase},
                        scheduled_at=burst or first_due + timedelta(seconds=j / rate),
                        strict_timing=True,
                    )
                    for j in range(sent, sent + k)
                ],
            )
            slowest = max(slowest, (loop.time() - t0) * 1000.0)
            sent += k
        if k < 1000:
            await asyncio.sleep(0.01)
    return sent, slowest


async def _client_stream(
    target: str, secret: str, rate: int, seconds: float
) -> tuple[int, float, float]:
    """:func:`_steady_stream` from a client process of its own, over gRPC
    (``steady_client.py``), as clients submit to ``tickwheel serve``. Returns (tasks
    sent, slowest submit call in ms, the client's CPU seconds)."""
    args = ["--target", target, "--key", secret, "--rate", str(rate)]
    args += ["--seconds", str(seconds), "--phase", str(rate)]
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(Path(__file__).with_name("steady_client.py")),
        *args,
        *(["--bursts"] if BURSTS else []),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await proc.communicate()
    if proc.returncode != 0:
        raise RuntimeError(f"steady_client.py failed ({proc.returncode}): {err.decode()[-2000:]}")
    done = json.loads(out.decode().strip().splitlines()[-1])
    return int(done["sent"]), float(done["slowest_submit_ms"]), float(done["cpu_s"])


async def _in_process_records(
    seen: dict[str, list[float]], phase: str, n: int, timeout_s: float
) -> list[float]:
    deadline = time.monotonic() + timeout_s
    while True:
        late = seen.get(phase, [])
        if len(late) >= n or time.monotonic() > deadline:
            return late
        await asyncio.sleep(0.2)


class _RecordTail:
    """The worker's records file, read from where the last read stopped: only new
    complete lines are parsed, on the event loop in slices. (Parsing the whole file
    every poll held the loop for 140-185 ms at 50,000 records while the phase's last
    second of tasks was still being delivered; parsing in a thread was worse, the
    loop then waited for the GIL at every switch: up to 281 ms. Either was the 5k/s
    phase's p99, not the scheduler.)"""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._offset = 0
        self.rows: list[dict[str, Any]] = []

    async def read_new(self) -> None:
        if not self._path.exists():
            return
        with self._path.open("rb") as f:
            f.seek(self._offset)
            data = f.read()
        end = data.rfind(b"\n") + 1  # a line being written waits for the next read
        self._offset += end
        lines = data[:end].splitlines()
        for start in range(0, len(lines), 1000):
            self.rows.extend(json.loads(line) for line in lines[start : start + 1000] if line)
            await asyncio.sleep(0)


async def _lateness_records(
    tail: _RecordTail, phase: str, n: int, timeout_s: float
) -> tuple[list[float], list[float]]:
    """Wait until the worker recorded ``n`` assignments of ``phase``; how late each
    was received, and how late its handler started (ack first: after the ack). The
    first read comes once the phase's last task is due (1 s after its submission)."""
    await asyncio.sleep(1.5)
    deadline = time.monotonic() + timeout_s
    while True:
        await tail.read_new()
        rows = [r for r in tail.rows if r.get("phase") == phase]
        if len(rows) >= n or time.monotonic() > deadline:
            return [r["late_ms"] for r in rows], [r["start_ms"] for r in rows]
        await asyncio.sleep(0.2)


async def _in_process_consumer(session: WorkerSession, late: dict[str, list[float]]) -> None:
    """A worker without gRPC: records delivery lateness, acks and completes each batch
    (one batched call each), so the engine and the store are measured on their own."""
    pending: set[asyncio.Task[Any]] = set()

    async def finish(batch: AssignmentBatch) -> None:
        writes = [FencedWrite(key=a.key, token=a.fencing_token) for a in batch.assignments]
        await session.ack(writes)
        await session.complete([Completion(key=w.key, token=w.token) for w in writes])
        session.grant(len(writes))

    while (event := await session.next_event()) is not None:
        if not isinstance(event, AssignmentBatch):
            continue
        now = datetime.now(UTC)
        for a in event.assignments:
            late.setdefault(str(as_dict(a.payload).get("phase")), []).append(
                (now - a.due_at).total_seconds() * 1000.0
            )
        t = asyncio.create_task(finish(event), name="bench-consumer-finish")
        pending.add(t)
        t.add_done_callback(pending.discard)
    await asyncio.gather(*pending, return_exceptions=True)


class GcPauses:
    """Collector pauses in this process (the engine's), per generation."""

    def __init__(self) -> None:
        self.started = 0.0
        self.pauses: dict[int, list[float]] = {0: [], 1: [], 2: []}

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self.started = time.perf_counter()
        else:
            self.pauses[info["generation"]].append((time.perf_counter() - self.started) * 1e3)

    def reset(self) -> None:
        for v in self.pauses.values():
            v.clear()


@pytest.mark.parametrize("consumer", ["worker_process", "in_process"])
def test_dispatch_lateness_with_1m_outstanding_timers(
    benchmark: Any,
    slice_postgres: PostgresServer,
    slice_dsn: str,
    tmp_path: Path,
    loop: asyncio.AbstractEventLoop,
    consumer: str,
) -> None:
    import psutil

    records = tmp_path / "late.jsonl"
    tail = _RecordTail(records)
    group = ProcessGroup(tmp_path / "procs")
    seconds = 10.0

    async def go() -> dict[str, float]:
        store = await PostgresStore.open(slice_dsn, StoreConfig())
        tenant = await store.create_tenant(
            Tenant(
                id=uuid.uuid4(),
                name="bench",
                rate_limit_rps=1_000_000,
                max_concurrent_workers=1_000_000,
            )
        )
        t0 = time.perf_counter()
        # COPY is refused under row-level security: the set-up seeds as the superuser.
        database = slice_dsn.rsplit("/", 1)[-1].split("?")[0]
        await _seed_outstanding(slice_postgres.dsn(database), tenant.id, OUTSTANDING)
        out: dict[str, float] = {"seed_s": time.perf_counter() - t0}
        # Acks linger as under `tickwheel serve` (its --ack-linger-ms default; the
        # engine's own default, 0, writes each ack before answering it).
        engine = Engine(
            store, EngineConfig(lease_ttl_s=30.0, heartbeat_interval_s=10.0, ack_linger_ms=500)
        )
        server = Server(engine, ServerConfig(listen="127.0.0.1:0"))
        thresholds = gc.get_threshold()
        try:
            t0 = time.perf_counter()
            await engine.start()
            out["recover_s"] = time.perf_counter() - t0
            # As `tickwheel serve` does after start: the recovered wheel entries live as
            # long as the process, so keep them out of full GC passes; and as it does
            # before, its young-generation threshold (`tune_gc`, which freezes too).
            tune_gc()
            out["rss_mb"] = psutil.Process().memory_info().rss / 2**20
            port = await server.start()
            _key, secret = await engine.tenancy.create_api_key(tenant.id, "bench")
            in_proc: dict[str, list[float]] = {}
            session: WorkerSession | None = None
            reader: asyncio.Task[None] | None = None
            worker: psutil.Process | None = None
            if consumer == "worker_process":
                proc = await asyncio.to_thread(
                    group.worker,
                    f"127.0.0.1:{port}",
                    secret,
                    {"late": f"{HANDLERS}:lateness"},
                    name="late-worker",
                    slots=20_000,
                    env={"TW_RECORD_FILE": str(records)},
                )
                worker = psutil.Process(proc.pid)
            else:
                session = await engine.open_session(
                    WorkerHello(
                        worker_id="in-process",
                        tenant_id=tenant.id,
                        task_types=frozenset({"late"}),
                        slots=20_000,
                    )
                )
                reader = asyncio.create_task(
                    _in_process_consumer(session, in_proc), name="bench-consumer"
                )
            gc_pauses = GcPauses()
            gc.callbacks.append(gc_pauses)
            for rate in RATES:
                engine.stats.lateness_ms.clear()
                gc_pauses.reset()
                cpu0 = sum(psutil.Process().cpu_times()[:2])
                wcpu0 = sum(worker.cpu_times()[:2]) if worker is not None else 0.0
                started: list[float] = []
                client_cpu = 0.0
                if consumer == "worker_process" and CLIENT_PROCESS:
                    sent, slowest, client_cpu = await _client_stream(
                        f"127.0.0.1:{port}", secret, rate, seconds
                    )
                else:
                    sent, slowest = await _steady_stream(engine, tenant.id, rate, seconds)
                if consumer == "worker_process":
                    late, started = await _lateness_records(tail, str(rate), sent, timeout_s=120)
                else:
                    late = await _in_process_records(in_proc, str(rate), sent, timeout_s=120)
                eng = list(engine.stats.lateness_ms)
                tag = f"{rate // 1000}k"
                # This process's CPU over the phase (submission to the last record),
                # per task: the engine's, and in process the consumer's too.
                cpu = sum(psutil.Process().cpu_times()[:2]) - cpu0
                out[f"{tag}_process_us_per_task"] = cpu / max(1, sent) * 1e6
                if worker is not None:
                    wcpu = sum(worker.cpu_times()[:2]) - wcpu0
                    out[f"{tag}_worker_us_per_task"] = wcpu / max(1, sent) * 1e6
                if client_cpu:
                    out[f"{tag}_client_us_per_task"] = client_cpu / max(1, sent) * 1e6
                out[f"{tag}_sent"] = sent
                out[f"{tag}_slowest_submit_ms"] = slowest
                out[f"{tag}_received"] = len(late)
                out[f"{tag}_gc2_count"] = len(gc_pauses.pauses[2])
                out[f"{tag}_gc2_max_ms"] = max(gc_pauses.pauses[2], default=0.0)
                for name, values in (("worker", late), ("started", started), ("engine", eng)):
                    if values:
                        out[f"{tag}_{name}_p50_ms"] = _pct(values, 0.50)
                        out[f"{tag}_{name}_p99_ms"] = _pct(values, 0.99)
                        out[f"{tag}_{name}_max_ms"] = max(values)
                        out[f"{tag}_{name}_mean_ms"] = statistics.fmean(values)
            gc.callbacks.remove(gc_pauses)
            if session is not None and reader is not None:
                await session.close()
                await reader
        finally:
            await asyncio.to_thread(group.stop_all)
            await server.stop(0)
            await engine.stop()
            await store.close()
            gc.unfreeze()
            gc.set_threshold(*thresholds)
        return out

    figures = benchmark.pedantic(lambda: _run(loop, go()), rounds=1, iterations=1)
    _record(benchmark, f"lateness 1M timers, {consumer}", **figures)
