"""The async client: submit and manage tasks of one tenant, and administer tenants."""

from __future__ import annotations

import asyncio
import builtins
import uuid
from collections.abc import AsyncIterator, Awaitable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, TypeVar, cast

import grpc
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from scheduler import wire
from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from scheduler._proto.tickwheel.v1 import tickwheel_pb2_grpc as pbg
from scheduler._wellknown import dict_to_struct
from scheduler.client import _convert as conv
from scheduler.client._channel import (
    check_reachable,
    connect_failover,
    open_channel,
    region_targets,
)
from scheduler.client._errors import from_rpc_error
from scheduler.client._submit_wire import decode_submit_answer, encode_tasks
from scheduler.client._tls import TLSConfig
from scheduler.client._types import (
    JSON,
    ApiKeyInfo,
    ApiKeySecret,
    BulkPlan,
    BulkResult,
    ExpectationInfo,
    RotatedApiKey,
    ScheduleInfo,
    Task,
    TaskPage,
    TaskSpec,
    TenantInfo,
    WorkflowInfo,
)
from scheduler.jitter import JitterMode
from scheduler.limits import MAX_SUBMIT_BATCH
from scheduler.regions import RegionDirectory
from scheduler.states import TaskState
from scheduler.types import (
    OverlapPolicy,
    Pool,
    RetryPolicy,
    Scope,
    TaskOrder,
    Transition,
    UpstreamPolicy,
)

API_KEY_HEADER = "x-api-key"
ADMIN_TOKEN_HEADER = "x-admin-token"


def check_header_value(what: str, value: str | None) -> None:
    """ValueError for a key or token a gRPC header cannot carry (printable ASCII only):
    gRPC fails such a call with an internal error, not a message."""
    for ch in value or "":
        if not " " <= ch <= "~":
            raise ValueError(
                f"the {what} holds {ch!r} (U+{ord(ch):04X}), which a gRPC header cannot"
                " carry: keys and tokens are printable ASCII"
            )


REGION_HEADER = "x-tickwheel-region"
"""With the admin token: the region its calls are for (docs/regions.md)."""

WAIT_SLICE_S = 60.0
"""The longest one WaitTask call asks the server to wait (the server's own bound)."""

_T = TypeVar("_T")
_W3C = TraceContextTextMapPropagator()


def _with_trace(metadata: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
    """The call metadata plus the caller's active W3C trace context, if any, so a task
    submitted inside a span joins that span's trace (opentelemetry-api: no-op without
    an SDK)."""
    carrier: dict[str, str] = {}
    _W3C.inject(carrier)
    return metadata + tuple(carrier.items()) if carrier else metadata


_ORDER_TO_PROTO = {
    TaskOrder.SCHEDULED_ASC: pb.TASK_ORDER_SCHEDULED_ASC,
    TaskOrder.SCHEDULED_DESC: pb.TASK_ORDER_SCHEDULED_DESC,
    TaskOrder.CREATED_ASC: pb.TASK_ORDER_CREATED_ASC,
    TaskOrder.CREATED_DESC: pb.TASK_ORDER_CREATED_DESC,
}


class _Base:
    def __init__(
        self, channel: grpc.aio.Channel, metadata: tuple[tuple[str, str], ...], rpc_timeout_s: float
    ) -> None:
        self._channel = channel
        self._metadata = metadata
        self._timeout_s = rpc_timeout_s
        self._closed = False

    async def _call(self, call: Awaitable[_T]) -> _T:
        try:
            return await call
        except grpc.aio.AioRpcError as exc:
            raise from_rpc_error(exc) from None

    async def close(self) -> None:
        """Close the channel; safe to call twice."""
        if not self._closed:
            self._closed = True
            await self._channel.close(None)

    async def __aenter__(self: _Self) -> _Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


_Self = TypeVar("_Self", bound=_Base)


class Client(_Base):
    """A tenant's connection to Tickwheel. Create with :meth:`connect`.

    Every call has a deadline (``rpc_timeout_s``) and raises the same
    :class:`~scheduler._errors.TickwheelError` subclass the server raised
    (:class:`RPCError` for transport failures).
    """

    def __init__(
        self, channel: grpc.aio.Channel, *, api_key: str, rpc_timeout_s: float = 30.0
    ) -> None:
        # Answers carry JSON values as bytes (orjson reads them; no Struct walk).
        metadata = ((API_KEY_HEADER, api_key), (wire.JSON_HEADER, "bytes"))
        super().__init__(channel, metadata, rpc_timeout_s)
        self._sched = pbg.SchedulerServiceStub(channel)  # type: ignore[no-untyped-call]
        self._worker = pbg.WorkerServiceStub(channel)  # type: ignore[no-untyped-call]
        # SubmitTasks with the request's bytes written by _submit_wire (no message
        # built), and its answer's bytes read there.
        self._submit_bytes = channel.unary_unary(
            "/tickwheel.v1.SchedulerService/SubmitTasks",
            request_serializer=None,
            response_deserializer=None,
        )

    @classmethod
    async def connect(
        cls,
        target: str | None = None,
        *,
        api_key: str,
        tls: TLSConfig | None = None,
        rpc_timeout_s: float = 30.0,
        connect_timeout_s: float = 10.0,
        regions: RegionDirectory | None = None,
    ) -> Client:
        """Open a channel to ``target`` (host:port) and check the server answers.

        With ``regions`` (the region directory) the client goes straight to the
        endpoints of the region its API key names, in directory order, and a call that
        finds one unreachable is made on the next (docs/regions.md); ``target`` is then
        needed only for a key that names no listed region."""
        if not api_key:
            raise ValueError("api_key is required")
        check_header_value("API key", api_key)
        if regions is not None:
            targets = region_targets(target, api_key, regions)
            failover = await connect_failover(targets, tls, connect_timeout_s)
            return cls(cast(Any, failover), api_key=api_key, rpc_timeout_s=rpc_timeout_s)
        if not target:
            raise ValueError("target is required (or regions)")
        channel = open_channel(target, tls)
        try:
            await check_reachable(channel, target, connect_timeout_s)
        except BaseException:
            await channel.close(None)
            raise
        return cls(channel, api_key=api_key, rpc_timeout_s=rpc_timeout_s)

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
        )
        resp = await self._call(
            self._sched.SubmitTask(
                pb.SubmitTaskRequest(task=conv.spec_to_proto(spec)),
                metadata=_with_trace(self._metadata),
                timeout=self._timeout_s,
            )
        )
        return conv.task_from_proto(resp.task, created=resp.created)

    async def submit_many(self, specs: Iterable[TaskSpec]) -> builtins.list[Task]:
        """Submit many tasks, in batched calls of up to 10,000; results in order."""
        items = builtins.list(specs)
        out: builtins.list[Task] = []
        for start in range(0, len(items), MAX_SUBMIT_BATCH):
            request = encode_tasks(items[start : start + MAX_SUBMIT_BATCH])
            answer: bytes = await self._call(
                self._submit_bytes(
                    request,
                    metadata=_with_trace(self._metadata),
                    timeout=self._timeout_s,
                )
            )
            out.extend(decode_submit_answer(answer))
        return out

    async def get(self, task_id: uuid.UUID | str) -> Task:
        """Read one task."""
        resp = await self._call(
            self._sched.GetTask(
                pb.GetTaskRequest(task_id=str(task_id)),
                metadata=self._metadata,
                timeout=self._timeout_s,
            )
        )
        return conv.task_from_proto(resp.task)

    async def cancel(self, task_id: uuid.UUID | str) -> Task:
        """Cancel a task (CANCELLED, or ``cancel_requested`` while its worker stops)."""
        resp = await self._call(
            self._sched.CancelTask(
                pb.CancelTaskRequest(task_id=str(task_id)),
                metadata=self._metadata,
                timeout=self._timeout_s,
            )
        )
        return conv.task_from_proto(resp.task)

    async def redrive(
        self, task_id: uuid.UUID | str, *, scheduled_at: datetime | None = None
    ) -> Task:
        """Move a DEAD_LETTER task back to SCHEDULED (now, or at ``scheduled_at``)."""
        req = pb.RedriveTaskRequest(task_id=str(task_id))
        if scheduled_at is not None:
            req.scheduled_at.CopyFrom(conv.to_timestamp(scheduled_at))
        resp = await self._call(
            self._sched.RedriveTask(req, metadata=self._metadata, timeout=self._timeout_s)
        )
        return conv.task_from_proto(resp.task)

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
        resp = await self._call(
            self._sched.PlanBulkAction(
                pb.PlanBulkActionRequest(action=actions[action], filter=flt),
                metadata=self._metadata,
                timeout=self._timeout_s,
            )
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
        resp = await self._call(
            self._sched.RunBulkAction(
                pb.RunBulkActionRequest(plan_token=plan_token),
                metadata=self._metadata,
                timeout=timeout_s,
            )
        )
        action = "cancel" if resp.action == pb.BULK_ACTION_CANCEL else "redrive"
        return BulkResult(action=action, matched=resp.matched, changed=resp.changed)

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
            resp = await self._call(
                self._sched.WaitTask(
                    pb.WaitTaskRequest(task_id=str(task_id), timeout_s=max(left, 0.0)),
                    metadata=self._metadata,
                    timeout=max(left, 0.0) + self._timeout_s,
                )
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
        resp = await self._call(
            self._sched.ListTasks(req, metadata=self._metadata, timeout=self._timeout_s)
        )
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
        resp = await self._call(
            self._worker.CompleteTask(req, metadata=self._metadata, timeout=self._timeout_s)
        )
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
        resp = await self._call(
            self._worker.FailTask(req, metadata=self._metadata, timeout=self._timeout_s)
        )
        return conv.task_from_proto(resp.task)

    # -- workflows ---------------------------------------------------------------------
    async def submit_workflow(
        self,
        nodes: Mapping[str, TaskSpec],
        edges: Iterable[tuple[str, str]] = (),
        *,
        name: str = "",
        idempotency_key: str | None = None,
        on_upstream_failure: UpstreamPolicy = UpstreamPolicy.CANCEL,
    ) -> WorkflowInfo:
        """Submit a DAG: ``nodes`` maps node id -> task, ``edges`` are (parent, child).

        A child runs when every parent completed; a node without ``scheduled_at`` runs
        as soon as it may, without jitter. The server rejects a cycle, an unknown node
        id or too many nodes (:class:`InvalidArgument` naming the field). With an
        ``idempotency_key`` a resubmit returns the existing workflow, ``created=False``.
        """
        edge_list = builtins.list(dict.fromkeys(edges))
        req = conv.workflow_request(
            nodes,
            edge_list,
            name=name,
            idempotency_key=idempotency_key,
            on_upstream_failure=on_upstream_failure,
        )
        resp = await self._call(
            self._sched.SubmitWorkflow(
                req, metadata=_with_trace(self._metadata), timeout=self._timeout_s
            )
        )
        return conv.workflow_from_proto(resp.workflow, resp.nodes, edge_list, created=resp.created)

    async def get_workflow(self, workflow_id: uuid.UUID | str) -> WorkflowInfo:
        """A workflow with every node's task (and state) and its edges."""
        resp = await self._call(
            self._sched.GetWorkflow(
                pb.GetWorkflowRequest(workflow_id=str(workflow_id)),
                metadata=self._metadata,
                timeout=self._timeout_s,
            )
        )
        return conv.workflow_from_proto(
            resp.workflow, resp.nodes, ((e.parent, e.child) for e in resp.edges)
        )

    # -- schedules ---------------------------------------------------------------------
    async def create_schedule(
        self,
        name: str,
        task_type: str,
        payload: JSON | None = None,
        *,
        cron: str | None = None,
        interval_s: float | None = None,
        timezone: str = "UTC",
        pool: Pool = Pool.STANDARD,
        max_retries: int | None = None,
        timeout_s: float = 0.0,
        overlap_policy: OverlapPolicy = OverlapPolicy.SKIP,
        catchup_window_s: float | None = None,
        jitter_s: float | None = None,
        paused: bool = False,
    ) -> ScheduleInfo:
        """Create a schedule: exactly one of ``cron`` (5 fields, or 6 with seconds
        first, in the IANA ``timezone``) and ``interval_s``. Each occurrence becomes a
        task of ``task_type``. ``max_retries`` None means 3; ``catchup_window_s`` None
        means 60 s; ``jitter_s`` is late-only, None means a tenth of the period (at most the
        server's jitter window, 120 s). AlreadyExists for a name the tenant uses.
        """
        spec = pb.ScheduleSpec(
            name=name,
            task_type=task_type,
            payload=dict_to_struct(payload),
            cron=cron or "",
            interval_s=interval_s or 0.0,
            timezone=timezone,
            pool=conv.pool_to_proto(pool),
            timeout_s=timeout_s,
            overlap_policy=conv.overlap_to_proto(overlap_policy),
            paused=paused,
        )
        if jitter_s is not None:
            spec.jitter_s = jitter_s
        if max_retries == 0:
            spec.no_retries = True
        elif max_retries is not None:
            spec.max_retries = max_retries
        if catchup_window_s is not None:
            spec.catchup_window_s = catchup_window_s
        resp = await self._call(
            self._sched.CreateSchedule(
                pb.CreateScheduleRequest(schedule=spec),
                metadata=self._metadata,
                timeout=self._timeout_s,
            )
        )
        return conv.schedule_from_proto(resp.schedule)

    async def get_schedule(self, schedule_id: uuid.UUID | str) -> ScheduleInfo:
        """Read one schedule."""
        resp = await self._call(
            self._sched.GetSchedule(
                pb.GetScheduleRequest(schedule_id=str(schedule_id)),
                metadata=self._metadata,
                timeout=self._timeout_s,
            )
        )
        return conv.schedule_from_proto(resp.schedule)

    async def list_schedules(self) -> builtins.list[ScheduleInfo]:
        """Every schedule of the tenant, by name."""
        resp = await self._call(
            self._sched.ListSchedules(
                pb.ListSchedulesRequest(), metadata=self._metadata, timeout=self._timeout_s
            )
        )
        return [conv.schedule_from_proto(s) for s in resp.schedules]

    async def pause_schedule(self, schedule_id: uuid.UUID | str) -> ScheduleInfo:
        """Stop creating occurrences."""
        resp = await self._call(
            self._sched.PauseSchedule(
                pb.PauseScheduleRequest(schedule_id=str(schedule_id)),
                metadata=self._metadata,
                timeout=self._timeout_s,
            )
        )
        return conv.schedule_from_proto(resp.schedule)

    async def resume_schedule(self, schedule_id: uuid.UUID | str) -> ScheduleInfo:
        """Create occurrences again, from the first one after now."""
        resp = await self._call(
            self._sched.ResumeSchedule(
                pb.ResumeScheduleRequest(schedule_id=str(schedule_id)),
                metadata=self._metadata,
                timeout=self._timeout_s,
            )
        )
        return conv.schedule_from_proto(resp.schedule)

    async def delete_schedule(self, schedule_id: uuid.UUID | str) -> None:
        """Delete a schedule; the tasks it created stay."""
        await self._call(
            self._sched.DeleteSchedule(
                pb.DeleteScheduleRequest(schedule_id=str(schedule_id)),
                metadata=self._metadata,
                timeout=self._timeout_s,
            )
        )

    # -- expectations ------------------------------------------------------------------
    async def register_expectation(
        self,
        job_id: str | None = None,
        *,
        schedule_id: uuid.UUID | str | None = None,
        interval_s: int,
        tolerance_s: int,
        max_runtime_s: int | None = None,
    ) -> ExpectationInfo:
        """Expect ``job_id`` (a task type or schedule name) or the schedule
        ``schedule_id`` to complete every ``interval_s``, give or take ``tolerance_s``;
        ``tickwheel watchdog`` alerts otherwise. Registering a job id again replaces it.
        """
        req = pb.RegisterExpectationRequest(
            job_id=job_id or "",
            schedule_id=str(schedule_id) if schedule_id is not None else "",
            interval_s=interval_s,
            tolerance_s=tolerance_s,
            max_runtime_s=max_runtime_s or 0,
        )
        resp = await self._call(
            self._sched.RegisterExpectation(req, metadata=self._metadata, timeout=self._timeout_s)
        )
        return conv.expectation_from_proto(resp.expectation)

    async def list_expectations(self) -> builtins.list[ExpectationInfo]:
        """Every expectation of the tenant, by job id."""
        resp = await self._call(
            self._sched.ListExpectations(
                pb.ListExpectationsRequest(), metadata=self._metadata, timeout=self._timeout_s
            )
        )
        return [conv.expectation_from_proto(e) for e in resp.expectations]

    # -- history, workflows list/cancel, expectations delete (issue 19) ----------------
    async def history(self, task_id: uuid.UUID | str) -> builtins.list[Transition]:
        """Every state change of one task, oldest first (NotFound for another tenant's).
        ``epoch`` is None where the store does not record it (SQLite)."""
        resp = await self._call(
            self._sched.GetTaskHistory(
                pb.GetTaskHistoryRequest(task_id=str(task_id)),
                metadata=self._metadata,
                timeout=self._timeout_s,
            )
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

    async def list_workflows(self, *, limit: int = 100) -> builtins.list[WorkflowInfo]:
        """The tenant's workflows, newest first; headers only (``nodes`` is empty: use
        :meth:`get_workflow` for one workflow's tasks)."""
        resp = await self._call(
            self._sched.ListWorkflows(
                pb.ListWorkflowsRequest(limit=limit),
                metadata=self._metadata,
                timeout=self._timeout_s,
            )
        )
        return [conv.workflow_from_proto(w, (), ()) for w in resp.workflows]

    async def cancel_workflow(self, workflow_id: uuid.UUID | str) -> tuple[WorkflowInfo, int]:
        """Cancel every unfinished node; the workflow after it and how many nodes this
        call cancelled (running ones finish CANCELLED when their worker stops)."""
        resp = await self._call(
            self._sched.CancelWorkflow(
                pb.CancelWorkflowRequest(workflow_id=str(workflow_id)),
                metadata=self._metadata,
                timeout=self._timeout_s,
            )
        )
        wf = resp.workflow
        info = conv.workflow_from_proto(
            wf.workflow, wf.nodes, ((e.parent, e.child) for e in wf.edges)
        )
        return info, resp.cancelled

    async def delete_expectation(self, job_id: str) -> None:
        """Delete the tenant's expectation for ``job_id`` (NotFound when none)."""
        await self._call(
            self._sched.DeleteExpectation(
                pb.DeleteExpectationRequest(job_id=job_id),
                metadata=self._metadata,
                timeout=self._timeout_s,
            )
        )

    @staticmethod
    def _ref(task_id: uuid.UUID | str, token: int, scheduled_at: datetime | None) -> pb.TaskRef:
        ref = pb.TaskRef(task_id=str(task_id), fencing_token=token)
        if scheduled_at is not None:
            ref.scheduled_at.CopyFrom(conv.to_timestamp(scheduled_at))
        return ref


class AdminClient(_Base):
    """An operator's connection for tenants and API keys. Create with :meth:`connect`.

    With ``admin_token`` (the platform admin token) it may manage every tenant; with
    ``api_key`` instead (a key with the ``admin`` scope) only that key's tenant's keys
    (docs/keys.md)."""

    def __init__(
        self,
        channel: grpc.aio.Channel,
        *,
        admin_token: str | None = None,
        api_key: str | None = None,
        rpc_timeout_s: float = 30.0,
        region: str | None = None,
    ) -> None:
        metadata: tuple[tuple[str, str], ...] = (
            ((API_KEY_HEADER, api_key),)
            if api_key is not None and admin_token is None
            else ((ADMIN_TOKEN_HEADER, admin_token or ""),)
        )
        if region:
            # The admin token's calls go to this region (docs/regions.md).
            metadata = (*metadata, (REGION_HEADER, region))
        super().__init__(channel, metadata, rpc_timeout_s)
        self._admin = pbg.AdminServiceStub(channel)  # type: ignore[no-untyped-call]

    @classmethod
    async def connect(
        cls,
        target: str,
        *,
        admin_token: str | None = None,
        api_key: str | None = None,
        tls: TLSConfig | None = None,
        rpc_timeout_s: float = 30.0,
        connect_timeout_s: float = 10.0,
        region: str | None = None,
    ) -> AdminClient:
        """Open a channel to ``target`` and check the server answers. ``region``: with
        the admin token, the region the calls are for (``x-tickwheel-region``; the node
        forwards them there; default: the node's own)."""
        check_header_value("admin token", admin_token)
        check_header_value("API key", api_key)
        channel = open_channel(target, tls)
        try:
            await check_reachable(channel, target, connect_timeout_s)
        except BaseException:
            await channel.close(None)
            raise
        return cls(
            channel,
            admin_token=admin_token,
            api_key=api_key,
            rpc_timeout_s=rpc_timeout_s,
            region=region,
        )

    async def create_tenant(
        self,
        name: str,
        *,
        tier: str = "STANDARD",
        rate_limit_rps: int = 0,
        max_concurrent_workers: int = 0,
        home_region: str = "",
    ) -> TenantInfo:
        """Create a tenant (zero quotas mean the server defaults)."""
        req = pb.CreateTenantRequest(
            tenant=pb.Tenant(
                name=name,
                tier=tier,
                rate_limit_rps=rate_limit_rps,
                max_concurrent_workers=max_concurrent_workers,
                home_region=home_region,
            )
        )
        resp = await self._call(
            self._admin.CreateTenant(req, metadata=self._metadata, timeout=self._timeout_s)
        )
        return conv.tenant_from_proto(resp.tenant)

    async def get_tenant(self, tenant_id: uuid.UUID | str) -> TenantInfo:
        """Read a tenant."""
        resp = await self._call(
            self._admin.GetTenant(
                pb.GetTenantRequest(tenant_id=str(tenant_id)),
                metadata=self._metadata,
                timeout=self._timeout_s,
            )
        )
        return conv.tenant_from_proto(resp.tenant)

    async def update_tenant(
        self,
        tenant_id: uuid.UUID | str,
        *,
        tier: str | None = None,
        rate_limit_rps: int | None = None,
        max_concurrent_workers: int | None = None,
    ) -> TenantInfo:
        """Change a tenant's tier or quotas (None: unchanged)."""
        req = pb.UpdateTenantRequest(
            tenant_id=str(tenant_id),
            tier=tier or "",
            rate_limit_rps=rate_limit_rps or 0,
            max_concurrent_workers=max_concurrent_workers or 0,
        )
        resp = await self._call(
            self._admin.UpdateTenant(req, metadata=self._metadata, timeout=self._timeout_s)
        )
        return conv.tenant_from_proto(resp.tenant)

    # -- API keys and tenants (issue 15, issue 19) ----------------------------------------
    async def create_api_key(
        self,
        tenant_id: uuid.UUID | str,
        name: str,
        *,
        scopes: Iterable[Scope | str] | None = None,
        expires_at: datetime | None = None,
    ) -> ApiKeySecret:
        """Create an API key for a tenant; the secret is returned only now.

        ``scopes`` None: submit, read and work (everything but admin). ``expires_at``
        None: the key never expires."""
        req = pb.CreateApiKeyRequest(
            tenant_id=str(tenant_id), name=name, scopes=[str(s) for s in scopes or ()]
        )
        if expires_at is not None:
            req.expires_at.CopyFrom(conv.to_timestamp(expires_at))
        resp = await self._call(
            self._admin.CreateApiKey(req, metadata=self._metadata, timeout=self._timeout_s)
        )
        return ApiKeySecret(key_id=uuid.UUID(resp.key_id), secret=resp.secret)

    async def list_api_keys(self, tenant_id: uuid.UUID | str) -> list[ApiKeyInfo]:
        """Every key of a tenant, revoked and expired ones too (never a secret)."""
        resp = await self._call(
            self._admin.ListApiKeys(
                pb.ListApiKeysRequest(tenant_id=str(tenant_id)),
                metadata=self._metadata,
                timeout=self._timeout_s,
            )
        )
        return [conv.api_key_from_proto(k) for k in resp.keys]

    async def revoke_api_key(self, key_id: uuid.UUID | str) -> ApiKeyInfo:
        """Revoke a key (new calls fail at once on that server, within seconds on the
        others; open worker streams end within the re-check bound)."""
        resp = await self._call(
            self._admin.RevokeApiKey(
                pb.RevokeApiKeyRequest(key_id=str(key_id)),
                metadata=self._metadata,
                timeout=self._timeout_s,
            )
        )
        return conv.api_key_from_proto(resp.key)

    async def rotate_api_key(
        self,
        key_id: uuid.UUID | str,
        *,
        grace_s: int = 0,
        expires_at: datetime | None = None,
    ) -> RotatedApiKey:
        """A new key with the old one's name and scopes; the old one keeps working for
        ``grace_s`` seconds (0: the server's default, an hour) and then expires."""
        req = pb.RotateApiKeyRequest(key_id=str(key_id), grace_s=grace_s)
        if expires_at is not None:
            req.expires_at.CopyFrom(conv.to_timestamp(expires_at))
        resp = await self._call(
            self._admin.RotateApiKey(req, metadata=self._metadata, timeout=self._timeout_s)
        )
        return RotatedApiKey(
            old=conv.api_key_from_proto(resp.old_key),
            new=conv.api_key_from_proto(resp.new_key),
            secret=resp.secret,
        )

    async def list_tenants(self, *, page_size: int = 0) -> AsyncIterator[TenantInfo]:
        """Every tenant, in id order (pages fetched as needed; platform admin only)."""
        token = ""
        while True:
            resp = await self._call(
                self._admin.ListTenants(
                    pb.ListTenantsRequest(page_size=page_size, page_token=token),
                    metadata=self._metadata,
                    timeout=self._timeout_s,
                )
            )
            for t in resp.tenants:
                yield conv.tenant_from_proto(t)
            token = resp.next_page_token
            if not token:
                return
