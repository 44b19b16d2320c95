"""Task handlers the browser tests' ``tickwheel worker`` processes run.

``ok`` completes with a small result and a checkpoint; ``boom`` always fails (with
``max_retries=0`` its task goes straight to DEAD_LETTER).
"""

from __future__ import annotations

from typing import Any

from scheduler.worker import ApplicationError, TaskContext


async def ok(ctx: TaskContext) -> dict[str, Any]:
    """Write a checkpoint, then complete with a result naming the payload."""
    await ctx.checkpoint({"step": 1, "n": ctx.payload.get("n")})
    return {"ok": True, "echo": ctx.payload.get("n")}


async def boom(ctx: TaskContext) -> None:
    """Fail every attempt with a recognisable error."""
    raise ApplicationError(f"boom: browser-test failure (attempt {ctx.attempt})")
