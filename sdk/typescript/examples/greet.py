"""The same "greet" task as examples/worker.mjs, for a Python worker:

    tickwheel worker --target 127.0.0.1:50051 --type greet=greet:greet
"""

from scheduler.worker import TaskContext


async def greet(ctx: TaskContext) -> dict[str, object]:
    ctx.raise_if_cancelled()
    return {"greeting": f"Hello, {ctx.payload['name']}!", "by": "python", "attempt": ctx.attempt}
