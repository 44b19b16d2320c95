"""The worker SDK's own CPU per task, in one process, without gRPC or a server.

The real ``Stream`` (its batching, request ids, answers and writer queue, with no call
behind it), ``Slots`` and ``HandlerRunner`` run ``n`` tasks with 2,000 slots; a fake
server in the same loop takes what the stream queues: it answers acks and
``Completions`` at once and pushes up to 64 assignments for every ``Credit``, as the
real server pushes against credit. The handler sleeps 5 ms (a stand-in for I/O, so
tasks finish a few at a time as they do under a real handler). The baseline, in the
same run: the same credit loop starting one bare task per item that sleeps the same
5 ms. Both are CPU-bound in this process, so the machine's load touches them alike.

Figures: CPU µs per task of the SDK (ack first, and start on delivery), of the
baseline, and the SDK's cost over it. ``TW_BENCH_SDK_TASKS`` sets ``n`` (default
30,000). Measured in docs/benchmarks.md ("The worker SDK under a real handler").

Run: ``.venv/bin/pytest benchmarks/test_worker_sdk_cost.py --benchmark-only -s``
"""

from __future__ import annotations

import asyncio
import gc
import os
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from scheduler._wellknown import set_timestamp
from scheduler.worker import TaskContext
from scheduler.worker._outbox import Encoded
from scheduler.worker._runner import HandlerRunner
from scheduler.worker._slots import Slots
from scheduler.worker._stream import Conn, ReconnectConfig, Stream

N = int(os.environ.get("TW_BENCH_SDK_TASKS", "30000"))
SLOTS = 2_000
PUSH = 64
IO_S = 0.005


class _Drain:
    """The drain's flag and tally, as the runner sees them (never draining here)."""

    stopping = False

    def count(self, what: str) -> None:
        """Nothing to tally outside a drain."""


async def _handler(ctx: TaskContext) -> None:
    await asyncio.sleep(IO_S)


def _assignments(n: int) -> list[pb.Assignment]:
    now = datetime.now(UTC)
    tenant = str(uuid.uuid4())
    out = []
    for i in range(n):
        a = pb.Assignment(
            task_id=str(uuid.uuid4()),
            type="io",
            fencing_token=1,
            attempt=1,
            max_retries=3,
            tenant_id=tenant,
        )
        a.payload.update({"i": i})
        set_timestamp(a.scheduled_at, now)
        set_timestamp(a.due_at, now)
        out.append(a)
    return out


async def _sdk(start_on_delivery: bool, todo: list[pb.Assignment]) -> float:
    """CPU seconds of the SDK running ``todo`` against a fake server."""
    stream = Stream(
        "unused:1",
        api_key="k",
        tls=None,
        worker_id="bench",
        task_types=["io"],
        pools=(),
        start_on_delivery=start_on_delivery,
        heartbeat_interval_s=None,
        request_timeout_s=30.0,
        reconnect=ReconnectConfig(),
    )
    conn = Conn()
    stream._conn = conn  # the stream is "up" with no call behind it
    stream.connected.set()
    drain = _Drain()
    slots = Slots(SLOTS, send=stream.send, stopping=lambda: drain.stopping)
    runner = HandlerRunner(
        {"io": _handler},
        stream=stream,
        slots=slots,
        drain=drain,  # type: ignore[arg-type]
        kafka_mode=False,
        start_on_delivery=start_on_delivery,
        tracer_provider=None,
    )
    runner.bind(asyncio.get_running_loop())
    n, pos, credit, done = len(todo), 0, SLOTS, 0
    finished = asyncio.Event()

    def push() -> None:
        nonlocal pos, credit
        while (k := min(credit, n - pos, PUSH)) > 0:
            runner.on_assignments(todo[pos : pos + k])
            pos += k
            credit -= k

    async def server() -> None:
        nonlocal credit, done
        while True:
            msg = await conn.queue.get()
            assert msg is not None
            if isinstance(msg, Encoded):  # written as bytes (_outbox): read as the server does
                msg = pb.WorkerMessage.FromString(msg.SerializeToString())
            kind = msg.WhichOneof("kind")
            if kind == "credit":
                credit += msg.credit.slots
                push()
                continue
            if kind == "ack":
                refs = list(msg.ack.tasks)
            elif kind == "completions":
                refs = [c.task for c in msg.completions.items]
                done += len(refs)
            else:
                continue
            conn.pending.pop(msg.request_id).set_result(
                [pb.TaskResult(task_id=r.task_id, ok=True) for r in refs]
            )
            if done >= n:
                finished.set()

    serving = asyncio.create_task(server(), name="bench-fake-server")
    cpu0 = time.process_time()
    push()
    await finished.wait()
    cpu = time.process_time() - cpu0
    serving.cancel()
    await asyncio.gather(serving, return_exceptions=True)
    return cpu


async def _bare(n: int) -> float:
    """CPU seconds of the same credit loop starting one bare sleeping task per item."""
    loop = asyncio.get_running_loop()
    started, credit, done = 0, SLOTS, 0
    finished = asyncio.Event()
    scheduled = False

    def start() -> None:
        nonlocal started, credit, scheduled
        scheduled = False
        while (k := min(credit, n - started, PUSH)) > 0:
            for _ in range(k):
                loop.create_task(asyncio.sleep(IO_S)).add_done_callback(ended)
            started += k
            credit -= k

    def ended(_: Any) -> None:
        nonlocal done, credit, scheduled
        done += 1
        credit += 1
        if done == n:
            finished.set()
        if not scheduled:
            scheduled = True
            loop.call_soon(start)

    cpu0 = time.process_time()
    start()
    await finished.wait()
    return time.process_time() - cpu0


def test_worker_sdk_cpu_per_task(benchmark: Any) -> None:
    """Baseline, ack first, start on delivery, baseline again (the baseline's mean)."""

    def go() -> dict[str, float]:
        gc.collect()
        runs: dict[str, Callable[[], Any]] = {
            "bare_1": lambda: _bare(N),
            "ack": lambda: _sdk(False, _assignments(N)),
            "on_delivery": lambda: _sdk(True, _assignments(N)),
            "bare_2": lambda: _bare(N),
        }
        return {name: asyncio.run(run()) / N * 1e6 for name, run in runs.items()}

    us = benchmark.pedantic(go, rounds=1, iterations=1)
    bare = (us["bare_1"] + us["bare_2"]) / 2
    figures = {
        "bare_us_per_task": bare,
        "ack_us_per_task": us["ack"],
        "on_delivery_us_per_task": us["on_delivery"],
        "ack_over_bare_us": us["ack"] - bare,
        "on_delivery_over_bare_us": us["on_delivery"] - bare,
    }
    benchmark.extra_info.update(figures)
    print("\nworker SDK in process, CPU per task:", {k: round(v, 1) for k, v in figures.items()})
