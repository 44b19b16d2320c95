"""The Python worker of benchmarks/test_typescript_worker.py: a no-op handler."""

from __future__ import annotations

from scheduler.worker import TaskContext


async def noop(ctx: TaskContext) -> dict[str, object]:
    return {}
