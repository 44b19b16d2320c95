"""SchedulerService: clients submit and manage the tasks of their own tenant.

The task RPCs are here; the service's other RPCs are mixins, one module per concern,
each calling its engine door: workflows ``_workflows.py`` (``engine.workflows``),
schedules ``_schedules.py`` and expectations ``_expectations.py``
(``engine.schedules``), the audit (a task's history, activity) ``_history.py``
(``engine.history``), the dashboard's reads (counts, forecast, workers) ``_insight.py``
(``engine.watch``), the bulk actions ``_bulk.py``.

Tracing: SubmitTask(s) runs in a SERVER span ``tickwheel.submit``, a child of the
caller's W3C context (the request's ``trace_context`` field, else the ``traceparent``
and ``tracestate`` metadata). The task keeps the caller's context; every dispatch and
worker span of the task joins that trace (see ``_worker.py``). opentelemetry-api only:
a no-op unless the process configured an SDK ``TracerProvider``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from typing import Any, ClassVar

import grpc
from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from scheduler._aio import slices
from scheduler._errors import InvalidArgument, ResourceExhausted
from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from scheduler._proto.tickwheel.v1 import tickwheel_pb2_grpc as pbg
from scheduler.engine import SETTLED, Engine
from scheduler.limits import MAX_SUBMIT_BATCH
from scheduler.server import _convert as conv
from scheduler.server._auth import Gatekeeper, tenant_of
from scheduler.server._bulk import BulkRpcs
from scheduler.server._config import ServerConfig
from scheduler.server._decode import decode
from scheduler.server._expectations import ExpectationRpcs
from scheduler.server._flow import FlowRpcs
from scheduler.server._history import HistoryRpcs
from scheduler.server._insight import InsightRpcs
from scheduler.server._schedules import ScheduleRpcs
from scheduler.server._status import unary
from scheduler.server._submit_wire import encode_submit_response, read_submit
from scheduler.server._workflows import WorkflowRpcs
from scheduler.types import JSON, InsertResult, Scope

Context = grpc.aio.ServicerContext[Any, Any]

_tracer = trace.get_tracer("tickwheel.server")
_W3C = TraceContextTextMapPropagator()


@contextlib.contextmanager
def _submit_span(name: str, caller: JSON | None, tenant: Any) -> Iterator[Span]:
    """The SERVER span of a submission, parented on the caller's trace context."""
    parent = _W3C.extract({k: v for k, v in (caller or {}).items() if v}) if caller else None
    with _tracer.start_as_current_span(
        name,
        context=parent,
        kind=SpanKind.SERVER,
        attributes={"rpc.system": "grpc", "tickwheel.tenant_id": str(tenant)},
    ) as span:
        yield span


def _submit_response(
    result: InsertResult, spec: pb.TaskSpec, json_bytes: bool
) -> pb.SubmitTaskResponse:
    # A task just created holds the payload it was sent: answer with those bytes or that
    # Struct instead of converting the stored JSON back (an existing task's may differ).
    payload = (spec.payload_json or spec.payload) if result.created else None
    return pb.SubmitTaskResponse(
        task=conv.task_to_proto(result.task, payload, json_bytes=json_bytes),
        created=result.created,
        debounced=result.debounced,
        throttled=result.throttled,
    )


class SchedulerService(
    WorkflowRpcs,
    ScheduleRpcs,
    ExpectationRpcs,
    HistoryRpcs,
    InsightRpcs,
    BulkRpcs,
    FlowRpcs,
    pbg.SchedulerServiceServicer,
):
    """gRPC adapter over :class:`Engine` for tasks, workflows, schedules and expectations."""

    REQUEST_DECODERS: ClassVar[Mapping[str, Callable[[bytes], bytes]]] = {
        "SubmitTasks": bytes  # its bytes as they came (an exact bytes object is returned as is)
    }
    """``SubmitTasks`` reads its own request (``scheduler.server._decode.add_service``)."""

    def __init__(
        self, engine: Engine, config: ServerConfig, gate: Gatekeeper | None = None
    ) -> None:
        self._engine = engine
        self._config = config
        self._gate = gate or Gatekeeper(engine, config)

    @unary
    async def SubmitTask(
        self, request: pb.SubmitTaskRequest, context: Context
    ) -> pb.SubmitTaskResponse:
        """Submit one task."""
        tenant = await tenant_of(self._gate, context, Scope.SUBMIT)
        if not request.HasField("task"):
            raise InvalidArgument("task", "required")
        spec = conv.spec_from_proto(
            request.task,
            "task",
            max_payload_bytes=self._config.max_payload_bytes,
            default_trace=conv.trace_from_metadata(context.invocation_metadata()),
        )
        with _submit_span(f"tickwheel.submit {spec.type}", spec.trace_context, tenant) as span:
            (result,) = await self._engine.submit(tenant, [spec])
            span.set_attribute("tickwheel.task_id", str(result.task.id))
            span.set_attribute("tickwheel.created", result.created)
        json_bytes = conv.wants_json_bytes(context.invocation_metadata())
        return _submit_response(result, request.task, json_bytes)

    @unary
    async def SubmitTasks(self, request: bytes, context: Context) -> bytes:
        """Submit many tasks in one batched write."""
        # The request comes as its bytes (REQUEST_DECODERS): read natively when it is
        # plainly valid (server/_submit_wire.py), else decoded and checked the general
        # way, which names the field of any refusal.
        metadata = context.invocation_metadata()
        trace = conv.trace_from_metadata(metadata)
        json_bytes = conv.wants_json_bytes(metadata)
        limit = self._config.max_payload_bytes
        read = read_submit(request, limit, trace)
        given = None if read is not None else decode(pb.SubmitTasksRequest, request).tasks
        tenant = await tenant_of(self._gate, context, Scope.SUBMIT)
        if read is not None:
            specs, sent = read
        else:
            assert given is not None
            if not given:
                raise InvalidArgument("tasks", "at least one task is required")
            if len(given) > MAX_SUBMIT_BATCH:
                raise ResourceExhausted("tasks", f"at most {MAX_SUBMIT_BATCH} tasks per call")
            specs = []
            async for part in slices(len(given)):  # decoding 10,000 takes tens of ms
                specs.extend(
                    conv.spec_from_proto(
                        given[i], f"tasks[{i}]", max_payload_bytes=limit, default_trace=trace
                    )
                    for i in part
                )
            sent = [t.payload_json or t.payload for t in given]
        with _submit_span("tickwheel.submit_many", trace, tenant) as span:
            results = await self._engine.submit(tenant, specs)
            span.set_attribute("tickwheel.tasks", len(results))
        # The answer's bytes, written directly (server/_submit_wire.py): the generated
        # classes cost about 7 µs a task here.
        answer: list[bytes] = []
        async for part in slices(len(results)):
            answer.append(
                encode_submit_response(
                    results[part.start : part.stop], sent[part.start : part.stop], json_bytes
                )
            )
        return b"".join(answer)

    @unary
    async def GetTask(self, request: pb.GetTaskRequest, context: Context) -> pb.GetTaskResponse:
        """Read one task of the caller's tenant."""
        tenant = await tenant_of(self._gate, context, Scope.READ)
        task_id = conv.parse_uuid(request.task_id, "task_id")
        rec = await self._engine.store.get_task(tenant, task_id)
        json_bytes = conv.wants_json_bytes(context.invocation_metadata())
        return pb.GetTaskResponse(task=conv.task_to_proto(rec, json_bytes=json_bytes))

    @unary
    async def CancelTask(
        self, request: pb.CancelTaskRequest, context: Context
    ) -> pb.CancelTaskResponse:
        """Cancel a task in any non-terminal state."""
        tenant = await tenant_of(self._gate, context, Scope.SUBMIT)
        task_id = conv.parse_uuid(request.task_id, "task_id")
        rec = await self._engine.cancel(tenant, task_id)
        json_bytes = conv.wants_json_bytes(context.invocation_metadata())
        return pb.CancelTaskResponse(task=conv.task_to_proto(rec, json_bytes=json_bytes))

    @unary
    async def ListTasks(
        self, request: pb.ListTasksRequest, context: Context
    ) -> pb.ListTasksResponse:
        """One page of the caller's tasks."""
        tenant = await tenant_of(self._gate, context, Scope.READ)
        flt, page_size = conv.filter_from_proto(request)
        position = conv.page_token_in(tenant, flt, request.page_token)
        page = await self._engine.list_tasks(tenant, flt, page_size, position)
        json_bytes = conv.wants_json_bytes(context.invocation_metadata())
        return pb.ListTasksResponse(
            tasks=[conv.task_to_proto(t, json_bytes=json_bytes) for t in page.tasks],
            next_page_token=conv.page_token_out(tenant, flt, page.next_page_token),
        )

    @unary
    async def RedriveTask(
        self, request: pb.RedriveTaskRequest, context: Context
    ) -> pb.RedriveTaskResponse:
        """Move a DEAD_LETTER task back to SCHEDULED."""
        tenant = await tenant_of(self._gate, context, Scope.SUBMIT)
        task_id = conv.parse_uuid(request.task_id, "task_id")
        when = (
            conv.to_datetime(request.scheduled_at, "scheduled_at")
            if request.HasField("scheduled_at")
            else None
        )
        rec = await self._engine.redrive(tenant, task_id, when)
        json_bytes = conv.wants_json_bytes(context.invocation_metadata())
        return pb.RedriveTaskResponse(task=conv.task_to_proto(rec, json_bytes=json_bytes))

    @unary
    async def WaitTask(self, request: pb.WaitTaskRequest, context: Context) -> pb.WaitTaskResponse:
        """Long poll: the task once it settles, or as it is after ``timeout_s``."""
        tenant = await tenant_of(self._gate, context, Scope.READ)
        task_id = conv.parse_uuid(request.task_id, "task_id")
        rec = await self._engine.wait_task(tenant, task_id, request.timeout_s)
        json_bytes = conv.wants_json_bytes(context.invocation_metadata())
        return pb.WaitTaskResponse(
            task=conv.task_to_proto(rec, json_bytes=json_bytes), done=rec.status in SETTLED
        )
