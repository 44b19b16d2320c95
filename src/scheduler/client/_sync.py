"""A synchronous client for scripts: the async :class:`Client` on a private loop thread.

::

    with SyncClient("localhost:50051", api_key=KEY) as client:
        handle = client.submit("email", {"to": "a@example.com"})
        print(handle.result(timeout=30))

Every method blocks the calling thread until the call on the private event loop
(one daemon thread per client) answers; it may be used from several threads. Do not
call it from inside a running event loop's thread (use :class:`Client` there).
"""

from __future__ import annotations

import asyncio
import builtins
import concurrent.futures
import threading
import uuid
from collections.abc import Coroutine, Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from scheduler.client._admin import AdminClient
from scheduler.client._client import Client
from scheduler.client._flow import PauseInfo, RateLimitInfo
from scheduler.client._handle import outcome
from scheduler.client._tls import TLSConfig
from scheduler.client._types import JSON, Task, TaskSpec
from scheduler.client._workers import WorkerInfo
from scheduler.regions import RegionDirectory
from scheduler.states import TaskState
from scheduler.types import Pool

_T = TypeVar("_T")


class _LoopThread:
    """An event loop running on a daemon thread of its own."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self.loop.run_forever, name="tickwheel-sync-client", daemon=True
        )
        self._thread.start()

    def run(
        self, coro: Coroutine[Any, Any, _T], timeout: float | None = None, *, closing: bool = False
    ) -> _T:
        if not closing:
            try:
                asyncio.get_running_loop()
            except RuntimeError:
                pass
            else:
                coro.close()
                raise RuntimeError("SyncClient called inside a running event loop; use Client")
        what = getattr(coro, "__qualname__", "the call")
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            # The same class as the builtin TimeoutError: the call's own (``wait``'s
            # "task … still SCHEDULED after 0.5 s …") passes through as it is; only
            # this bound on the call is reported here.
            if future.done():
                raise
            future.cancel()
            raise TimeoutError(f"SyncClient: {what} did not answer in {timeout:g} s") from None

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5.0)
        if not self._thread.is_alive():
            self.loop.close()


class SyncTaskHandle:
    """A submitted task (blocking). ``handle.result(timeout=30)``."""

    def __init__(self, client: SyncClient, task: Task) -> None:
        self._client = client
        self.task = task
        """The task as the submit answered it (``due_at`` is its effective time)."""

    @property
    def id(self) -> uuid.UUID:
        """The task id."""
        return self.task.id

    def __repr__(self) -> str:
        return f"<SyncTaskHandle {self.task.type} {self.task.id}>"

    def get(self) -> Task:
        """The task as it is now."""
        return self._client.get(self.id)

    def wait(self, timeout: float | None = None) -> Task:
        """The task once settled; TimeoutError after ``timeout`` seconds."""
        return self._client.wait(self.id, timeout)

    def result(self, timeout: float | None = None) -> JSON:
        """The handler's result; TaskFailed, TaskCancelled or TimeoutError."""
        return outcome(self.wait(timeout))

    def cancel(self) -> Task:
        """Cancel the task."""
        return self._client.cancel(self.id)


class SyncClient:
    """Blocking twin of :class:`Client` for scripts: submit, get, wait/result,
    cancel, list, and the flow control calls (rate limits, dispatch pauses, and with
    an ``admin``-scoped key its tenant's concurrency limits). ``close()`` (or
    ``with``) stops its loop thread."""

    def __init__(
        self,
        target: str | None = None,
        *,
        api_key: str,
        tls: TLSConfig | None = None,
        rpc_timeout_s: float = 30.0,
        connect_timeout_s: float = 10.0,
        regions: RegionDirectory | None = None,
    ) -> None:
        """``regions``: as :meth:`Client.connect` (the key's region's endpoints, with
        fail-over)."""
        self._loop = _LoopThread()
        try:
            self._client: Client = self._loop.run(
                Client.connect(
                    target,
                    api_key=api_key,
                    tls=tls,
                    rpc_timeout_s=rpc_timeout_s,
                    connect_timeout_s=connect_timeout_s,
                    regions=regions,
                )
            )
        except BaseException:
            self._loop.stop()
            raise
        self._api_key = api_key
        self._admin: AdminClient | None = None
        self._closed = False

    @property
    def aio(self) -> Client:
        """The async client underneath (its coroutines run on this client's loop)."""
        return self._client

    def run(self, coro: Coroutine[Any, Any, _T]) -> _T:
        """Run a coroutine of :attr:`aio` on the private loop and return its value."""
        return self._loop.run(coro)

    def submit(
        self,
        type: str,
        payload: JSON | None = None,
        *,
        delay: float | timedelta | None = None,
        **options: Any,
    ) -> SyncTaskHandle:
        """Submit one task; ``delay`` (seconds or a timedelta) sets ``scheduled_at`` to
        now + delay. Other options as :meth:`Client.submit`. A handle comes back."""
        if delay is not None:
            if "scheduled_at" in options:
                raise ValueError("give delay or scheduled_at, not both")
            options["scheduled_at"] = when_after(delay)
        task = self._loop.run(self._client.submit(type, payload, **options))
        return SyncTaskHandle(self, task)

    def submit_many(self, specs: Iterable[TaskSpec]) -> builtins.list[SyncTaskHandle]:
        """Submit many tasks in batched calls; one handle per spec, in order."""
        tasks = self._loop.run(self._client.submit_many(specs))
        return [SyncTaskHandle(self, t) for t in tasks]

    def get(self, task_id: uuid.UUID | str) -> Task:
        """Read one task."""
        return self._loop.run(self._client.get(task_id))

    def wait(self, task_id: uuid.UUID | str, timeout: float | None = None) -> Task:
        """The task once COMPLETED, CANCELLED or DEAD_LETTER (the WaitTask long poll);
        TimeoutError after ``timeout`` seconds (None: no limit)."""
        return self._loop.run(self._client.wait(task_id, timeout))

    def result(self, task_id: uuid.UUID | str, timeout: float | None = None) -> JSON:
        """The task's result once it completed; TaskFailed/TaskCancelled otherwise."""
        return outcome(self.wait(task_id, timeout))

    def cancel(self, task_id: uuid.UUID | str) -> Task:
        """Cancel a task."""
        return self._loop.run(self._client.cancel(task_id))

    def list(
        self,
        *,
        states: Sequence[TaskState] = (),
        type: str | None = None,
        limit: int | None = None,
    ) -> builtins.list[Task]:
        """The tenant's tasks with these filters (every page, or the first ``limit``)."""

        async def collect() -> builtins.list[Task]:
            out: builtins.list[Task] = []
            async for task in self._client.list(states=states, type=type):
                out.append(task)
                if limit is not None and len(out) >= limit:
                    break
            return out

        return self._loop.run(collect())

    # -- flow control (issue 43; docs/flow-control.md) ---------------------------------
    def set_rate_limit(self, key: str, rate: float, burst: int = 0) -> RateLimitInfo:
        """Limit the tasks naming ``rate_limit_key=key`` to ``rate`` starts a second
        across every node, bursts of up to ``burst`` (0: ``max(1, ceil(rate))``)."""
        return self._loop.run(self._client.set_rate_limit(key, rate, burst))

    def list_rate_limits(self) -> builtins.list[RateLimitInfo]:
        """The tenant's rate limits, by key."""
        return self._loop.run(self._client.list_rate_limits())

    def delete_rate_limit(self, key: str) -> None:
        """Remove a key's limit (NotFound if it had none)."""
        self._loop.run(self._client.delete_rate_limit(key))

    def list_workers(self) -> builtins.list[WorkerInfo]:
        """The worker streams connected to the node reached, by worker id."""
        return self._loop.run(self._client.list_workers())

    def pause_dispatch(
        self, task_type: str | None = None, pool: Pool | None = None, *, all_tenants: bool = False
    ) -> PauseInfo:
        """Hold the tenant's tasks of ``task_type`` and/or ``pool`` (both None: all
        of them) PRELOADED until :meth:`resume_dispatch`."""
        return self._loop.run(self._client.pause_dispatch(task_type, pool, all_tenants=all_tenants))

    def resume_dispatch(
        self, task_type: str | None = None, pool: Pool | None = None, *, all_tenants: bool = False
    ) -> None:
        """Remove the pause of exactly these fields (NotFound if none)."""
        self._loop.run(self._client.resume_dispatch(task_type, pool, all_tenants=all_tenants))

    def list_dispatch_pauses(self) -> builtins.list[PauseInfo]:
        """The pauses that apply to the tenant (its own and every all-tenants one)."""
        return self._loop.run(self._client.list_dispatch_pauses())

    def _admin_calls(self) -> AdminClient:
        # AdminService on the same channel with the same key (it needs the admin scope).
        if self._admin is None:
            self._admin = AdminClient(self._client._channel, api_key=self._api_key)
        return self._admin

    def set_concurrency_limit(
        self, tenant_id: uuid.UUID | str, type: str, limit: int | None
    ) -> int:
        """At most ``limit`` tasks of one concurrency key of ``type`` run at once,
        cluster-wide (None: back to 1). The key needs the ``admin`` scope of
        ``tenant_id``. Returns the limit in force."""
        return self._loop.run(self._admin_calls().set_concurrency_limit(tenant_id, type, limit))

    def concurrency_limits(self, tenant_id: uuid.UUID | str) -> dict[str, int]:
        """The concurrency limits set for the tenant, by task type (not listed: 1)."""
        return self._loop.run(self._admin_calls().concurrency_limits(tenant_id))

    def close(self) -> None:
        """Close the channel and stop the loop thread; safe twice."""
        if self._closed:
            return
        self._closed = True
        try:
            self._loop.run(self._client.close(), 10.0, closing=True)
        finally:
            self._loop.stop()

    def __enter__(self) -> SyncClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def when_after(delay: float | timedelta) -> datetime:
    """now + ``delay`` (seconds or a timedelta), timezone-aware."""
    span = delay if isinstance(delay, timedelta) else timedelta(seconds=delay)
    if span < timedelta(0):
        raise ValueError("delay must not be negative")
    return datetime.now(UTC) + span
