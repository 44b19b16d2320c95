"""The stampede benchmark's handler: records when each task started, in memory.

``benchmarks/test_stampede.py`` runs it in its ``tickwheel worker``. The handler only
appends ``(time, id, due, received)`` to a list; a thread writes what accrued as JSON
lines to ``TW_RECORD_FILE`` every 0.2 s (the lines of ``tests.acceptance.handlers``'s
``lateness``: ``event``, ``task_id``, ``at``, ``start_ms``, ``late_ms``). So the
worker's CPU a task is Tickwheel's, not the benchmark's ledger: the acceptance
handler's open, JSON and write of one line a task cost the worker about 28 µs a task
(2026-12-06), a third of what the stream itself costs. This is how the issue's outside
measurement recorded its start times (issue 41).
"""

from __future__ import annotations

import json
import os
import threading
import time
from datetime import datetime
from typing import Any

from scheduler.worker import TaskContext

_RECORD_FILE = os.environ.get("TW_RECORD_FILE", "")
_starts: list[tuple[float, Any, datetime, datetime]] = []


async def started(ctx: TaskContext) -> None:
    """Records the start (the handler's first line, after the ack committed)."""
    _starts.append((time.time(), ctx.task_id, ctx.due_at, ctx.received_at))


def _line(at: float, task_id: Any, due: datetime, received: datetime) -> str:
    due_s = due.timestamp()
    return json.dumps(
        {
            "event": "late",
            "task_id": str(task_id),
            "at": at,
            "start_ms": (at - due_s) * 1000.0,
            "late_ms": (received.timestamp() - due_s) * 1000.0,
        }
    )


def _flush_forever() -> None:
    done = 0
    while True:
        time.sleep(0.2)
        n = len(_starts)
        if n > done and _RECORD_FILE:
            with open(_RECORD_FILE, "a") as f:
                f.write("".join(_line(*s) + "\n" for s in _starts[done:n]))
            done = n


threading.Thread(target=_flush_forever, name="start-recorder", daemon=True).start()
