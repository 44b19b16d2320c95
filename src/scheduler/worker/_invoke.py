"""Calling a task's handler: :class:`Invoker`.

Owns the handlers by task type, the thread pool sync handlers run in (and the count of
its busy threads), the handler's timeout, and what a call comes to: the result as JSON
bytes, or the exception that fails the attempt.

May call: the handlers, ``_context`` (the :class:`Interrupted` of a task cancelled
before its handler started). Called by: the handler runner (one call an attempt; the
worker facade reads ``threads_busy`` and closes the pool through it).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import functools
import inspect
import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

from scheduler import jsonbytes
from scheduler.worker._context import JSON, Interrupted, TaskContext

_log = logging.getLogger("tickwheel.worker")

Handler = Callable[[TaskContext], Any]
"""``fn(ctx)``, sync or async, returning a JSON object (or None, or a value stored
under ``{"result": value}``)."""


class Invoker:
    """Calls the handlers: async ones on the loop, sync ones in a thread pool."""

    def __init__(self, handlers: Mapping[str, Handler], threads: int) -> None:
        self.handlers = dict(handlers)
        self._async_types = {t for t, h in self.handlers.items() if inspect.iscoroutinefunction(h)}
        self.threads_busy = 0
        """Sync handlers executing in threads right now."""
        self._threads_lock = threading.Lock()
        self._executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=threads, thread_name_prefix="tickwheel-handler"
        )

    def close(self, *, cancel_futures: bool) -> None:
        """Shut the thread pool down without waiting (a busy thread runs on unseen)."""
        self._executor.shutdown(wait=False, cancel_futures=cancel_futures)

    async def invoke(self, ctx: TaskContext) -> bytes | BaseException:
        """Run the handler; its result as JSON bytes, or the exception it raised (a
        result JSON cannot hold, such as a set or a NaN, fails the attempt)."""
        if ctx.cancel_reason is not None:
            # Cancelled, drained or lost before it started (while its ack, or its
            # due instant, was awaited): the handler never runs.
            return Interrupted(ctx.cancel_reason)
        handler = self.handlers[ctx.type]
        try:
            if ctx.timeout_s > 0:
                async with asyncio.timeout(ctx.timeout_s):
                    value = await self._call(handler, ctx)
            else:
                value = await self._call(handler, ctx)
        except TimeoutError:
            _log.warning(
                "task %s (type %s, attempt %d, fencing token %d): attempt failed: the handler "
                "exceeded its timeout of %s s",
                ctx.task_id,
                ctx.type,
                ctx.attempt,
                ctx.fencing_token,
                ctx.timeout_s,
            )
            return TimeoutError(f"handler exceeded its timeout of {ctx.timeout_s} s")
        except Exception as exc:
            if ctx.cancel_reason is None:
                _log.warning(
                    "task %s (type %s, attempt %d, fencing token %d): attempt failed: %r",
                    ctx.task_id,
                    ctx.type,
                    ctx.attempt,
                    ctx.fencing_token,
                    exc,
                    exc_info=exc,
                )
            return exc
        try:
            return jsonbytes.dumps(_as_result(value))
        except (TypeError, ValueError) as exc:
            _log.warning("task %s: the handler's result is not JSON: %s", ctx.task_id, exc)
            return TypeError(f"the handler's result is not JSON: {exc}")

    async def _call(self, handler: Handler, ctx: TaskContext) -> Any:
        if ctx.type in self._async_types:
            return await handler(ctx)
        loop = asyncio.get_running_loop()
        call = functools.partial(contextvars.copy_context().run, self._in_thread, handler, ctx)
        value = await loop.run_in_executor(self._executor, call)
        if inspect.isawaitable(value):
            value = await value
        return value

    def _in_thread(self, handler: Handler, ctx: TaskContext) -> Any:
        with self._threads_lock:
            self.threads_busy += 1
        try:
            return handler(ctx)
        finally:
            with self._threads_lock:
                self.threads_busy -= 1


def _as_result(value: Any) -> JSON:
    if value is None:
        return {}
    if isinstance(value, Mapping):
        return dict(value)
    return {"result": value}
