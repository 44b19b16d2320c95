"""Task handlers the acceptance tests run inside real ``tickwheel worker`` processes.

Each execution appends one JSON line per event to the file named by ``TW_RECORD_FILE``
(``O_APPEND`` writes of one short line, so lines from several processes never mix);
the test reads that file to prove which worker ran what, with which fencing token.

Behaviour is steered by the environment of the worker process and by the payload:

- ``TW_WORKER_NAME``: the worker's name, put in every record and in the result;
- ``TW_HOLD_S``: seconds the handler takes (default 0);
- ``TW_FAIL_FLAG``: while this file exists, ``flaky`` fails;
- payload ``{"wait_cancel": true}``: run until the task is cancelled.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from typing import Any

from scheduler.worker import ApplicationError, TaskContext

# A worker process's environment is set when it is spawned: read once, not per task
# (two environment reads were a tenth of a benchmark worker's CPU).
_WORKER_NAME = os.environ.get("TW_WORKER_NAME", "?")
_RECORD_FILE = os.environ.get("TW_RECORD_FILE")


def _worker() -> str:
    return _WORKER_NAME


def record(ctx: TaskContext, event: str, **extra: Any) -> None:
    """Append one line describing this attempt to ``TW_RECORD_FILE`` (if set)."""
    path = _RECORD_FILE
    if not path:
        return
    line = {
        "event": event,
        "task_id": str(ctx.task_id),
        "token": ctx.fencing_token,
        "attempt": ctx.attempt,
        "worker": _worker(),
        "at": time.time(),
        **extra,
    }
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (json.dumps(line) + "\n").encode())
    finally:
        os.close(fd)


async def work(ctx: TaskContext) -> dict[str, Any]:
    """Record the start, take ``TW_HOLD_S``, record the end; the result names the worker."""
    record(ctx, "start")
    hold = float(os.environ.get("TW_HOLD_S", "0") or 0)
    if ctx.payload.get("wait_cancel"):
        await asyncio.wait_for(ctx.cancelled.wait(), 60)
        record(ctx, "cancelled", reason=ctx.cancel_reason)
        return {"worker": _worker(), "token": ctx.fencing_token, "cancelled": True}
    if hold > 0:
        await asyncio.sleep(hold)
    record(ctx, "done")
    return {"worker": _worker(), "token": ctx.fencing_token}


def flaky(ctx: TaskContext) -> dict[str, Any]:
    """Fails while the ``TW_FAIL_FLAG`` file exists; succeeds once it is gone (sync: it
    runs in the worker's thread pool)."""
    flag = os.environ.get("TW_FAIL_FLAG", "")
    if flag and os.path.exists(flag):
        record(ctx, "failed")
        raise ApplicationError(f"flag {flag} is set (attempt {ctx.attempt})")
    record(ctx, "done")
    return {"worker": _worker(), "token": ctx.fencing_token}


async def fast(ctx: TaskContext) -> dict[str, Any]:
    """Does nothing but record (throughput tests)."""
    record(ctx, "done")
    return {"w": _worker()}


async def lateness(ctx: TaskContext) -> None:
    """Records how late the assignment arrived and how late the handler started
    (ack first: after the ack committed) (benchmarks)."""
    start_ms = (time.time() - ctx.due_at.timestamp()) * 1000.0
    late_ms = (ctx.received_at - ctx.due_at).total_seconds() * 1000.0
    record(ctx, "late", late_ms=late_ms, start_ms=start_ms, phase=ctx.payload.get("phase"))


async def echo(ctx: TaskContext) -> dict[str, Any]:
    """Checkpoints the payload, then returns it (JSON round trips)."""
    await ctx.checkpoint({"seen": ctx.payload})
    record(ctx, "done")
    return {"echo": ctx.payload}
