"""The stampede benchmark's handler: records when each task started, in memory.

``benchmarks/test_stampede.py`` runs it in its ``tickwheel worker``. The handler only
appends ``(time, id, due, received)`` to a list. A thread writes how many started to
``TW_RECORD_FILE.count`` every 0.2 s and, once ``TW_RECORD_FILE.dump`` exists (the
benchmark creates it after its CPU window), every start as a JSON line to
``TW_RECORD_FILE`` (the lines of ``tests.acceptance.handlers``'s ``lateness``: ``event``,
``task_id``, ``at``, ``start_ms``, ``late_ms``), then ``TW_RECORD_FILE.done``. So the
worker's CPU a task in the window is Tickwheel's, not the benchmark's ledger: the
acceptance handler's open, JSON and write of one line a task cost the worker about
28 µs a task (2026-12-06), and JSON lines written by a thread during the window still
18 % of the worker's samples. The issue's outside measurement recorded in memory too
(issue 41).
"""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from datetime import datetime
from pathlib import Path

from scheduler.worker import TaskContext

_RECORD_FILE = os.environ.get("TW_RECORD_FILE", "")
_starts: list[tuple[float, int, datetime, datetime]] = []
"""One tuple a start, of values the garbage collector does not track (a float, the id
as an int, two datetimes), so CPython untracks the tuple too: a million ``UUID``s kept
here were a million objects every later collection of the worker walked (a full one
610 ms, a second-generation one 230-300 ms in a 1M minute, 2026-12-07), lateness the
benchmark would have charged to Tickwheel."""


async def started(ctx: TaskContext) -> None:
    """Records the start (the handler's first line, after the ack committed)."""
    _starts.append((time.time(), ctx.task_id.int, ctx.due_at, ctx.received_at))


def _line(at: float, task_id: int, due: datetime, received: datetime) -> str:
    due_s = due.timestamp()
    return json.dumps(
        {
            "event": "late",
            "task_id": str(uuid.UUID(int=task_id)),
            "at": at,
            "start_ms": (at - due_s) * 1000.0,
            "late_ms": (received.timestamp() - due_s) * 1000.0,
        }
    )


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    tmp.replace(path)


def _run(out: Path) -> None:
    count, dump, done = (out.with_name(out.name + x) for x in (".count", ".dump", ".done"))
    while True:
        time.sleep(0.2)
        _write(count, str(len(_starts)))
        if dump.exists() and not done.exists():
            n = len(_starts)
            out.write_text("".join(_line(*s) + "\n" for s in _starts[:n]))
            _write(done, str(n))


if _RECORD_FILE:
    threading.Thread(target=_run, args=(Path(_RECORD_FILE),), name="starts", daemon=True).start()
