"""Proto <-> engine types for workflows, schedules and expectations, with validation.

As in ``_convert``: every ``*_from_proto`` raises
:class:`~scheduler._errors.InvalidArgument` naming the offending field by its path in
the request (``nodes[3].task.type``, ``edges[7].child``, ``schedule.timezone``), so bad
input answers INVALID_ARGUMENT. Graph rules (cycles, unknown ids) and the cron and
time-zone checks live in the engine (``_workflows.validate_dag``,
``Schedules.validate``), which names fields the same way; this module checks what only
the wire can get wrong (enums, NaN, ranges of unsigned ints, sizes).
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta

from scheduler import wire
from scheduler._errors import InvalidArgument
from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from scheduler._wellknown import dict_to_struct
from scheduler.engine import ExpectationSpec, ScheduleSpec, WorkflowNode, WorkflowSpec
from scheduler.engine._schedules import MAX_JITTER_S, occurrences_after
from scheduler.engine._workflows import node_id_of
from scheduler.server import _convert as conv
from scheduler.store._facts import JobFacts
from scheduler.types import (
    JSON,
    Expectation,
    OverlapPolicy,
    Schedule,
    TaskRecord,
    UpstreamPolicy,
    Workflow,
    WorkflowView,
)
from scheduler.watchdog import Status, deadline_of, status_of

MAX_INTERVAL_S = 10 * 365 * 86400
"""Longest fixed schedule interval (the engine looks ten years ahead for the next one)."""
MAX_CATCHUP_WINDOW_S = 30 * 86400
DEFAULT_CATCHUP_WINDOW_S = 60.0
MAX_TIMEZONE_CHARS = 64

_UPSTREAM_TO_PROTO = wire.UPSTREAM_TO_PROTO
_UPSTREAM_FROM_PROTO: Mapping[int, UpstreamPolicy] = {
    **wire.UPSTREAM_FROM_PROTO,
    pb.UPSTREAM_POLICY_UNSPECIFIED: UpstreamPolicy.CANCEL,
}
_OVERLAP_TO_PROTO = wire.OVERLAP_TO_PROTO
_OVERLAP_FROM_PROTO: Mapping[int, OverlapPolicy] = {
    **wire.OVERLAP_FROM_PROTO,
    pb.OVERLAP_POLICY_UNSPECIFIED: OverlapPolicy.SKIP,
}


def _seconds(value: float, field: str, low: float, high: float) -> float:
    if not math.isfinite(value) or not low <= value <= high:
        raise InvalidArgument(field, f"must be a number of seconds in {low:g}..{high:g}")
    return value


# -- workflows -----------------------------------------------------------------------


def upstream_from_proto(value: int, field: str) -> UpstreamPolicy:
    """Upstream policy; unspecified means cancel."""
    try:
        return _UPSTREAM_FROM_PROTO[value]
    except KeyError:
        raise InvalidArgument(field, f"unknown upstream policy {value}") from None


def workflow_spec_from_proto(
    req: pb.SubmitWorkflowRequest,
    *,
    max_payload_bytes: int,
    max_nodes: int,
    max_edges: int,
    default_trace: JSON | None = None,
) -> WorkflowSpec:
    """A :class:`WorkflowSpec` with every node's task validated; the graph itself is
    checked by the engine. Sizes are checked first so a huge request costs little."""
    if not req.nodes:
        raise InvalidArgument("nodes", "at least one node is required")
    if len(req.nodes) > max_nodes:
        raise InvalidArgument("nodes", f"at most {max_nodes} nodes per workflow")
    if len(req.edges) > max_edges:
        raise InvalidArgument("edges", f"at most {max_edges} edges per workflow")
    nodes = []
    for i, node in enumerate(req.nodes):
        if not node.HasField("task"):
            raise InvalidArgument(f"nodes[{i}].task", "required")
        task = conv.spec_from_proto(
            node.task,
            f"nodes[{i}].task",
            max_payload_bytes=max_payload_bytes,
            default_trace=default_trace,
        )
        nodes.append(WorkflowNode(node.id, task))
    edges = []
    for j, edge in enumerate(req.edges):
        if not edge.parent:
            raise InvalidArgument(f"edges[{j}].parent", "required")
        if not edge.child:
            raise InvalidArgument(f"edges[{j}].child", "required")
        edges.append((edge.parent, edge.child))
    return WorkflowSpec(
        nodes=nodes,
        edges=edges,
        name=req.name,
        idempotency_key=req.idempotency_key or None,
        on_upstream_failure=upstream_from_proto(req.on_upstream_failure, "on_upstream_failure"),
    )


def workflow_to_proto(w: Workflow) -> pb.Workflow:
    """The proto header of a workflow."""
    return pb.Workflow(
        id=str(w.id),
        tenant_id=str(w.tenant_id),
        name=w.name,
        idempotency_key=w.idempotency_key,
        on_upstream_failure=_UPSTREAM_TO_PROTO[w.on_upstream_failure],
        node_count=w.node_count,
        created_at=conv.from_datetime(w.created_at),
    )


def nodes_to_proto(
    tasks: Mapping[str, TaskRecord], order: Sequence[str], *, json_bytes: bool = False
) -> list[pb.WorkflowNode]:
    """Nodes in ``order`` (node ids missing from ``tasks`` are left out), then any rest;
    ``json_bytes``: JSON values as bytes (``x-tickwheel-json: bytes``)."""
    seen = set(order)
    ids = [n for n in order if n in tasks] + [n for n in tasks if n not in seen]
    return [
        pb.WorkflowNode(id=n, task=conv.task_to_proto(tasks[n], json_bytes=json_bytes)) for n in ids
    ]


def view_to_proto(view: WorkflowView, *, json_bytes: bool = False) -> pb.GetWorkflowResponse:
    """GetWorkflow's answer: header, every node with its task, edges by node id."""
    names: dict[uuid.UUID, str] = {t.id: node_id_of(t) for t in view.tasks}
    tasks = {names[t.id]: t for t in view.tasks}
    return pb.GetWorkflowResponse(
        workflow=workflow_to_proto(view.workflow),
        nodes=nodes_to_proto(tasks, (), json_bytes=json_bytes),
        edges=[
            pb.WorkflowEdge(parent=names.get(p, str(p)), child=names.get(c, str(c)))
            for p, c in view.edges
        ],
    )


# -- schedules -----------------------------------------------------------------------


def overlap_from_proto(value: int, field: str) -> OverlapPolicy:
    """Overlap policy; unspecified means skip."""
    try:
        return _OVERLAP_FROM_PROTO[value]
    except KeyError:
        raise InvalidArgument(field, f"unknown overlap policy {value}") from None


def schedule_spec_from_proto(
    spec: pb.ScheduleSpec, field: str, *, max_payload_bytes: int
) -> ScheduleSpec:
    """A :class:`ScheduleSpec`; the cron expression and time zone are checked by the
    engine (``schedule.cron``, ``schedule.timezone``)."""
    name = conv.name_from_proto(spec.name, f"{field}.name")
    try:
        task = conv.spec_from_proto(
            pb.TaskSpec(
                type=spec.task_type,
                pool=spec.pool,
                max_retries=spec.max_retries,
                no_retries=spec.no_retries,
                timeout_s=spec.timeout_s,
            ),
            field,
            max_payload_bytes=max_payload_bytes,
        )
    except InvalidArgument as exc:
        if exc.field != f"{field}.type":
            raise
        raise InvalidArgument(f"{field}.task_type", exc.problem) from None
    if spec.payload.ByteSize() > max_payload_bytes:
        raise InvalidArgument(f"{field}.payload", f"larger than {max_payload_bytes} bytes")
    if spec.interval_s != 0:
        _seconds(spec.interval_s, f"{field}.interval_s", 1, MAX_INTERVAL_S)
    if len(spec.cron) > 128:
        raise InvalidArgument(f"{field}.cron", "longer than 128 characters")
    if len(spec.timezone) > MAX_TIMEZONE_CHARS:
        raise InvalidArgument(f"{field}.timezone", f"longer than {MAX_TIMEZONE_CHARS} characters")
    catchup = (
        _seconds(spec.catchup_window_s, f"{field}.catchup_window_s", 0, MAX_CATCHUP_WINDOW_S)
        if spec.HasField("catchup_window_s")
        else DEFAULT_CATCHUP_WINDOW_S
    )
    return ScheduleSpec(
        name=name,
        task_type=task.type,
        payload=conv.json_of(spec.payload, f"{field}.payload"),
        cron=spec.cron.strip(),
        interval_s=spec.interval_s,
        timezone=spec.timezone or "UTC",
        pool=task.pool,
        max_retries=task.max_retries,
        timeout_s=task.timeout_s,
        overlap_policy=overlap_from_proto(spec.overlap_policy, f"{field}.overlap_policy"),
        catchup_window_s=catchup,
        jitter_s=(
            _seconds(spec.jitter_s, f"{field}.jitter_s", 0, MAX_JITTER_S)
            if spec.HasField("jitter_s")
            else None
        ),
        paused=spec.paused,
    )


def schedule_to_proto(s: Schedule) -> pb.Schedule:
    """The proto view of a schedule."""
    msg = pb.Schedule(
        id=str(s.id),
        tenant_id=str(s.tenant_id),
        name=s.name,
        cron=s.cron_expr,
        interval_s=s.interval_s,
        timezone=s.timezone,
        task_type=s.task_type,
        payload=dict_to_struct(s.payload),
        pool=conv.pool_to_proto(s.pool),
        max_retries=s.max_retries,
        timeout_s=s.timeout_s,
        overlap_policy=_OVERLAP_TO_PROTO[s.overlap_policy],
        catchup_window_s=s.catchup_window_s,
        jitter_s=s.jitter_s,
        paused=not s.enabled,
    )
    for name in ("next_fire_at", "last_fired_at", "buffered_at", "created_at", "updated_at"):
        value = getattr(s, name)
        if value is not None:
            getattr(msg, name).CopyFrom(conv.from_datetime(value))
    for at in upcoming(s):
        msg.upcoming_fire_at.add().CopyFrom(conv.from_datetime(at))
    return msg


UPCOMING = 5
"""How many occurrences ``Schedule.upcoming_fire_at`` lists."""


def upcoming(s: Schedule) -> list[datetime]:
    """The next occurrences before jitter (the first is ``next_fire_at``), by the code
    that advances the schedule; none when paused."""
    if not s.enabled or s.next_fire_at is None:
        return []
    first = s.next_fire_at
    return [first, *occurrences_after(s, first, first + timedelta(days=3660), UPCOMING - 1)]


# -- expectations --------------------------------------------------------------------


def expectation_spec_from_proto(req: pb.RegisterExpectationRequest) -> ExpectationSpec:
    """An :class:`ExpectationSpec`; ranges are checked by the engine (same field names)."""
    schedule_id = conv.parse_uuid(req.schedule_id, "schedule_id") if req.schedule_id else None
    if req.job_id and not req.job_id.strip():
        raise InvalidArgument("job_id", "must not be blank")
    return ExpectationSpec(
        job_id=req.job_id,
        schedule_id=schedule_id,
        interval_s=req.interval_s,
        tolerance_s=req.tolerance_s,
        max_runtime_s=req.max_runtime_s or None,
    )


_STATUS_TO_PROTO = {
    Status.OK: pb.EXPECTATION_STATUS_OK,
    Status.LATE: pb.EXPECTATION_STATUS_LATE,
    Status.STUCK: pb.EXPECTATION_STATUS_STUCK,
}


def expectation_to_proto(
    e: Expectation, facts: JobFacts | None = None, now: datetime | None = None
) -> pb.Expectation:
    """The proto view of an expectation; with its watchdog facts, also its status
    (by the watchdog's own rule), last completion and deadline."""
    msg = pb.Expectation(
        id=str(e.id),
        tenant_id=str(e.tenant_id),
        job_id=e.job_id,
        schedule_id=str(e.schedule_id) if e.schedule_id else "",
        interval_s=e.interval_s,
        tolerance_s=e.tolerance_s,
        max_runtime_s=e.max_runtime_s or 0,
    )
    if e.created_at is not None:
        msg.created_at.CopyFrom(conv.from_datetime(e.created_at))
    if facts is not None and now is not None:
        msg.status = _STATUS_TO_PROTO[status_of(facts, now)]
        msg.deadline_at.CopyFrom(conv.from_datetime(deadline_of(facts)))
        if facts.last_completed is not None:
            msg.last_completed_at.CopyFrom(conv.from_datetime(facts.last_completed))
    return msg
