"""Handlers run by the ``tickwheel worker`` children of the worker lifecycle tests.

Each appends JSON lines to the file named in ``payload["log"]`` (one short
``O_APPEND`` write per line, so lines from several processes never mix) and names the
worker from ``TW_WORKER`` in its environment.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from typing import Any

from scheduler.worker import Interrupted, TaskContext


def record(ctx: TaskContext, event: str, **extra: Any) -> None:
    """Append one event of this attempt to the test's log file."""
    line = {
        "event": event,
        "task_id": str(ctx.task_id),
        "attempt": ctx.attempt,
        "token": ctx.fencing_token,
        "worker": os.environ.get("TW_WORKER", "?"),
        **extra,
    }
    fd = os.open(ctx.payload["log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (json.dumps(line) + "\n").encode())
    finally:
        os.close(fd)


def short(ctx: TaskContext) -> dict[str, Any]:
    """A sync task that takes ``sleep_s`` and ignores the drain (it finishes in time)."""
    record(ctx, "start")
    time.sleep(ctx.payload["sleep_s"])
    record(ctx, "done", cancel_reason=ctx.cancel_reason)
    return {"attempt": ctx.attempt, "token": ctx.fencing_token, "worker": record_worker()}


async def rows(ctx: TaskContext) -> dict[str, Any]:
    """The seed's long task: ``rows`` rows in chunks, a checkpoint after each chunk;
    on a drain it checkpoints and gives the task back; it resumes from a checkpoint."""
    total, chunk, pause = ctx.payload["rows"], ctx.payload["chunk"], ctx.payload["chunk_s"]
    done = int((ctx.checkpoint_data or {}).get("processed_rows", 0))
    record(ctx, "start", resume_row=done + 1)
    while done < total:
        if ctx.is_cancelled:
            await ctx.checkpoint({"processed_rows": done, "last_processed_id": f"usr_{done}"})
            record(ctx, "interrupted", reason=ctx.cancel_reason, processed_rows=done)
            raise Interrupted(ctx.cancel_reason)
        await asyncio.sleep(pause)
        done += chunk
        await ctx.checkpoint({"processed_rows": done, "last_processed_id": f"usr_{done}"})
    record(ctx, "done", processed_rows=done)
    return {"processed_rows": done, "worker": record_worker()}


async def waiter(ctx: TaskContext) -> None:
    """Runs until cancelled, then stops."""
    record(ctx, "start")
    await ctx.cancelled.wait()
    record(ctx, "stopped", reason=ctx.cancel_reason)
    raise Interrupted(ctx.cancel_reason)


def record_worker() -> str:
    """The name of the worker process running this handler."""
    return os.environ.get("TW_WORKER", "?")
