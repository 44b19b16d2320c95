"""The client's task calls: submit, read, list, wait, cancel, redrive, fenced writes
outside a stream, a task's history and the two-step bulk actions."""

from __future__ import annotations

import asyncio
import builtins
import uuid
from collections.abc import AsyncIterator, Iterable, Sequence
from datetime import datetime
from typing import Any

from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from scheduler.client import _convert as conv
from scheduler.client._base import _Base
from scheduler.client._submit_wire import decode_submit_answer, encode_tasks
from scheduler.client._types import JSON, BulkPlan, BulkResult, Task, TaskPage, TaskSpec
from scheduler.jitter import JitterMode
from scheduler.limits import MAX_SUBMIT_BATCH
from scheduler.states import TaskState
from scheduler.types import (
    Debounce,
    IdempotencyScope,
    Pool,
    RetryPolicy,
    TaskOrder,
    Throttle,
    Transition,
)

WAIT_SLICE_S = 60.0
"""The longest one WaitTask call asks the server to wait (the server's own bound)."""

_ORDER_TO_PROTO = {
    TaskOrder.SCHEDULED_ASC: pb.TASK_ORDER_SCHEDULED_ASC,
    TaskOrder.SCHEDULED_DESC: pb.TASK_ORDER_SCHEDULED_DESC,
    TaskOrder.CREATED_ASC: pb.TASK_ORDER_CREATED_ASC,
    TaskOrder.CREATED_DESC: pb.TASK_ORDER_CREATED_DESC,
}


class TaskCalls(_Base):
    """SchedulerService's task RPCs and WorkerService's unary fenced writes."""

    _sched: Any
    """The SchedulerService stub (set by :class:`~scheduler.client._client.Client`)."""
    _worker: Any
    """The WorkerService stub."""
    _submit_bytes: Any
    """SubmitTasks as raw bytes (the request written and the answer read natively)."""

    async def submit(
        self,
        type: str,
        payload: JSON | None = None,
        *,
        scheduled_at: datetime | None = None,
        idempotency_key: str | None = None,
        pool: Pool = Pool.STANDARD,
        strict_timing: bool = False,
        jitter_mode: JitterMode | None = None,
        max_retries: int | None = None,
        timeout_s: float = 0.0,
        trace_context: dict[str, str] | None = None,
        retry_policy: RetryPolicy | None = None,
        debounce: Debounce | None = None,
        throttle: Throttle | None = None,
        idempotency_ttl_s: float = 0.0,
        idempotency_scope: IdempotencyScope = IdempotencyScope.FOREVER,
        concurrency_key: str | None = None,
        rate_limit_key: str | None = None,
    ) -> Task:
        """Submit one task.

        ``scheduled_at`` (aware) defaults to now; ``strict_timing`` disables jitter;
        ``jitter_mode`` None means the default rule (never before ``scheduled_at``:
        late-only on a whole minute, no jitter otherwise); ``max_retries`` None means the server
        default (3) and 0 means no retry; ``timeout_s`` 0 means no run-time limit.
        ``trace_context`` (``traceparent``/``tracestate``) defaults to the active
        OpenTelemetry span, sent as call metadata; workers' spans join that trace.
        An idempotent resubmit returns the existing task with ``created=False``.
        ``retry_policy``: this task's own backoff, attempts and non-retryable errors.
        ``debounce``: replace the pending task of ``debounce.key`` instead of adding one
        (the answer is that task, ``debounced=True``; docs/flow-control.md).
        ``throttle``: at most one task per period per key (inside it the answer is the
        period's task, ``throttled=True``). ``idempotency_ttl_s`` / ``idempotency_scope``:
        how long ``idempotency_key`` dedupes (a TTL; or only until its task finishes).
        ``concurrency_key``: at most the type's concurrency limit of this key's tasks run
        at once, cluster-wide (``Admin.set_concurrency_limit``; docs/flow-control.md).
        ``rate_limit_key``: the key whose rate limit (:meth:`set_rate_limit`) paces
        this task's start, across every node.
        """
        spec = TaskSpec(
            type=type,
            payload=payload or {},
            scheduled_at=scheduled_at,
            idempotency_key=idempotency_key,
            pool=pool,
            strict_timing=strict_timing,
            jitter_mode=jitter_mode,
            max_retries=max_retries,
            timeout_s=timeout_s,
            trace_context=trace_context,
            retry_policy=retry_policy,
            debounce=debounce,
            throttle=throttle,
            idempotency_ttl_s=idempotency_ttl_s,
            idempotency_scope=idempotency_scope,
            concurrency_key=concurrency_key,
            rate_limit_key=rate_limit_key,
        )
        resp = await self._rpc(
            self._sched.SubmitTask, pb.SubmitTaskRequest(task=conv.spec_to_proto(spec)), trace=True
        )
        return conv.task_from_proto(
            resp.task, created=resp.created, debounced=resp.debounced, throttled=resp.throttled
        )

    async def submit_many(self, specs: Iterable[TaskSpec]) -> builtins.list[Task]:
        """Submit many tasks, in batched calls of up to 10,000; results in order."""
        items = builtins.list(specs)
        out: builtins.list[Task] = []
        for start in range(0, len(items), MAX_SUBMIT_BATCH):
            request = encode_tasks(items[start : start + MAX_SUBMIT_BATCH])
            answer: bytes = await self._rpc(self._submit_bytes, request, trace=True)
            out.extend(decode_submit_answer(answer))
        return out

    async def get(self, task_id: uuid.UUID | str) -> Task:
        """Read one task."""
        resp = await self._rpc(self._sched.GetTask, pb.GetTaskRequest(task_id=str(task_id)))
        return conv.task_from_proto(resp.task)

    async def cancel(self, task_id: uuid.UUID | str) -> Task:
        """Cancel a task (CANCELLED, or ``cancel_requested`` while its worker stops)."""
        resp = await self._rpc(self._sched.CancelTask, pb.CancelTaskRequest(task_id=str(task_id)))
        return conv.task_from_proto(resp.task)

    async def redrive(
        self, task_id: uuid.UUID | str, *, scheduled_at: datetime | None = None
    ) -> Task:
        """Move a DEAD_LETTER task back to SCHEDULED (now, or at ``scheduled_at``)."""
        req = pb.RedriveTaskRequest(task_id=str(task_id))
        if scheduled_at is not None:
            req.scheduled_at.CopyFrom(conv.to_timestamp(scheduled_at))
        resp = await self._rpc(self._sched.RedriveTask, req)
        return conv.task_from_proto(resp.task)

    async def wait(self, task_id: uuid.UUID | str, timeout_s: float | None = None) -> Task:
        """The task once it is COMPLETED, CANCELLED or DEAD_LETTER.

        Long polls ``WaitTask`` (the server answers the moment the task settles, or
        after at most 60 s, and this call asks again) until ``timeout_s`` (None: no
        limit) has passed; then TimeoutError. Not a busy loop: one call per minute
        while nothing happens.
        """
        loop = asyncio.get_running_loop()
        deadline = None if timeout_s is None else loop.time() + max(timeout_s, 0.0)
        while True:
            left = WAIT_SLICE_S if deadline is None else min(WAIT_SLICE_S, deadline - loop.time())
            resp = await self._rpc(
                self._sched.WaitTask,
                pb.WaitTaskRequest(task_id=str(task_id), timeout_s=max(left, 0.0)),
                deadline_s=max(left, 0.0) + self._timeout_s,
            )
            if resp.done:
                return conv.task_from_proto(resp.task)
            if deadline is not None and loop.time() >= deadline:
                task = conv.task_from_proto(resp.task)
                raise TimeoutError(
                    f"task {task_id} ({task.type}) still {task.state.value} after {timeout_s:g} s"
                    " of waiting for it to finish (COMPLETED, CANCELLED or DEAD_LETTER);"
                    f" due_at {task.due_at.isoformat(timespec='milliseconds')}"
                )

    async def list_page(
        self,
        *,
        states: Sequence[TaskState] = (),
        type: str | None = None,
        scheduled_from: datetime | None = None,
        scheduled_to: datetime | None = None,
        page_size: int = 100,
        page_token: str = "",
        order: TaskOrder = TaskOrder.SCHEDULED_ASC,
    ) -> TaskPage:
        """One page of tasks, filtered, in ``order``; pass ``next_page_token`` back (with
        the same order) for the next."""
        req = pb.ListTasksRequest(
            states=[conv.state_to_proto(s) for s in states],
            type=type or "",
            page_size=page_size,
            page_token=page_token,
            order=_ORDER_TO_PROTO[order],
        )
        if scheduled_from is not None:
            req.scheduled_from.CopyFrom(conv.to_timestamp(scheduled_from))
        if scheduled_to is not None:
            req.scheduled_to.CopyFrom(conv.to_timestamp(scheduled_to))
        resp = await self._rpc(self._sched.ListTasks, req)
        return TaskPage(tuple(conv.task_from_proto(t) for t in resp.tasks), resp.next_page_token)

    async def list(
        self,
        *,
        states: Sequence[TaskState] = (),
        type: str | None = None,
        scheduled_from: datetime | None = None,
        scheduled_to: datetime | None = None,
        page_size: int = 100,
        order: TaskOrder = TaskOrder.SCHEDULED_ASC,
    ) -> AsyncIterator[Task]:
        """Every matching task in ``order``, fetching pages as the iteration goes."""
        token = ""
        while True:
            page = await self.list_page(
                states=states,
                type=type,
                scheduled_from=scheduled_from,
                scheduled_to=scheduled_to,
                page_size=page_size,
                page_token=token,
                order=order,
            )
            for task in page.tasks:
                yield task
            token = page.next_page_token
            if not token:
                return

    async def complete(
        self,
        task_id: uuid.UUID | str,
        fencing_token: int,
        result: JSON | None = None,
        *,
        scheduled_at: datetime | None = None,
    ) -> Task:
        """Fenced completion outside a worker stream (StaleFencingToken for a zombie)."""
        req = pb.CompleteTaskRequest(
            task=self._ref(task_id, fencing_token, scheduled_at),
            result_json=conv.json_fields(result),
        )
        resp = await self._rpc(self._worker.CompleteTask, req)
        return conv.task_from_proto(resp.task)

    async def fail(
        self,
        task_id: uuid.UUID | str,
        fencing_token: int,
        error: str,
        *,
        retryable: bool = True,
        scheduled_at: datetime | None = None,
    ) -> Task:
        """Fenced failure outside a worker stream."""
        req = pb.FailTaskRequest(
            task=self._ref(task_id, fencing_token, scheduled_at), error=error, retryable=retryable
        )
        resp = await self._rpc(self._worker.FailTask, req)
        return conv.task_from_proto(resp.task)

    async def history(self, task_id: uuid.UUID | str) -> builtins.list[Transition]:
        """Every state change of one task, oldest first (NotFound for another tenant's).
        ``epoch`` is None where the store does not record it (SQLite)."""
        resp = await self._rpc(
            self._sched.GetTaskHistory, pb.GetTaskHistoryRequest(task_id=str(task_id))
        )
        return [
            Transition(
                from_state=conv.state_from_proto(t.from_state),
                to_state=conv.state_from_proto(t.to_state),
                fencing_token=t.fencing_token,
                actor=t.actor,
                at=conv.from_timestamp(t.at),
                epoch=t.shard_epoch or None,
                reason=t.reason,
                due_at=conv.from_timestamp(t.due_at) if t.HasField("due_at") else None,
            )
            for t in resp.transitions
        ]

    async def plan_bulk(
        self,
        action: str,
        *,
        states: Iterable[TaskState] = (),
        type: str | None = None,
        pools: Iterable[Pool] = (),
        scheduled_from: datetime | None = None,
        scheduled_to: datetime | None = None,
    ) -> BulkPlan:
        """Count what a bulk ``action`` (``cancel`` or ``redrive``) would act on now and
        get a plan token for exactly that (PlanBulkAction; docs/observability.md)."""
        actions = {"cancel": pb.BULK_ACTION_CANCEL, "redrive": pb.BULK_ACTION_REDRIVE}
        if action not in actions:
            raise ValueError(f"action must be 'cancel' or 'redrive', not {action!r}")
        flt = pb.TaskFilter(
            states=[conv.state_to_proto(s) for s in states],
            type=type or "",
            pools=[conv.pool_to_proto(p) for p in pools],
        )
        if scheduled_from is not None:
            flt.scheduled_from.CopyFrom(conv.to_timestamp(scheduled_from))
        if scheduled_to is not None:
            flt.scheduled_to.CopyFrom(conv.to_timestamp(scheduled_to))
        resp = await self._rpc(
            self._sched.PlanBulkAction, pb.PlanBulkActionRequest(action=actions[action], filter=flt)
        )
        f = resp.filter
        return BulkPlan(
            action=action,
            count=resp.count,
            plan_token=resp.plan_token,
            states=tuple(conv.state_from_proto(s) for s in f.states),
            type=f.type or None,
            pools=tuple(conv.pool_from_proto(p) for p in f.pools),
            scheduled_from=conv.from_timestamp(f.scheduled_from)
            if f.HasField("scheduled_from")
            else None,
            scheduled_to=(
                conv.from_timestamp(f.scheduled_to) if f.HasField("scheduled_to") else None
            ),
            planned_at=conv.from_timestamp(resp.planned_at),
            expires_at=conv.from_timestamp(resp.expires_at),
        )

    async def run_bulk(self, plan_token: str, *, timeout_s: float = 600.0) -> BulkResult:
        """Run a planned bulk action (RunBulkAction): acts on the plan's tasks that still
        apply, never on more. A run of many tasks takes a while: ``timeout_s``."""
        resp = await self._rpc(
            self._sched.RunBulkAction,
            pb.RunBulkActionRequest(plan_token=plan_token),
            deadline_s=timeout_s,
        )
        action = "cancel" if resp.action == pb.BULK_ACTION_CANCEL else "redrive"
        return BulkResult(action=action, matched=resp.matched, changed=resp.changed)

    @staticmethod
    def _ref(task_id: uuid.UUID | str, token: int, scheduled_at: datetime | None) -> pb.TaskRef:
        ref = pb.TaskRef(task_id=str(task_id), fencing_token=token)
        if scheduled_at is not None:
            ref.scheduled_at.CopyFrom(conv.to_timestamp(scheduled_at))
        return ref
