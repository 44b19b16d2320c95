"""Proto <-> engine/client conversion for workflows, schedules and expectations, and the
CLI's workflow file format."""

from __future__ import annotations

import math
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from scheduler._errors import InvalidArgument
from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from scheduler.cli._orchestration import WorkflowFileError, parse_workflow_file
from scheduler.client import _convert as cconv
from scheduler.client._types import TaskSpec
from scheduler.jitter import JitterMode
from scheduler.server import _convert_orchestration as oconv
from scheduler.states import TaskState
from scheduler.types import (
    Expectation,
    OverlapPolicy,
    Pool,
    Schedule,
    TaskRecord,
    UpstreamPolicy,
    Workflow,
    WorkflowView,
)
from tests.support.records import task_record

NOW = datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)
TENANT = uuid.UUID("0190d6c4-0000-7000-8000-00000000000a")


# -- workflows -----------------------------------------------------------------------


def _wf_req(**kw: Any) -> pb.SubmitWorkflowRequest:
    nodes = [
        pb.WorkflowNodeSpec(id="a", task=pb.TaskSpec(type="t")),
        pb.WorkflowNodeSpec(id="b", task=pb.TaskSpec(type="t", pool=pb.POOL_BULK)),
    ]
    return pb.SubmitWorkflowRequest(
        **{"nodes": nodes, "edges": [pb.WorkflowEdge(parent="a", child="b")], **kw}
    )


def _parse_wf(req: pb.SubmitWorkflowRequest, **kw: Any) -> Any:
    args = {"max_payload_bytes": 1024, "max_nodes": 10, "max_edges": 10, **kw}
    return oconv.workflow_spec_from_proto(req, **args)


def test_workflow_spec_defaults_and_fields() -> None:
    spec = _parse_wf(_wf_req())
    assert [n.node_id for n in spec.nodes] == ["a", "b"]
    assert spec.nodes[1].task.pool is Pool.BULK
    assert list(spec.edges) == [("a", "b")]
    assert spec.name == ""
    assert spec.idempotency_key is None
    assert spec.on_upstream_failure is UpstreamPolicy.CANCEL
    full = _parse_wf(
        _wf_req(name="n", idempotency_key="k", on_upstream_failure=pb.UPSTREAM_POLICY_CONTINUE),
        default_trace={"traceparent": "00-" + "1" * 32 + "-" + "2" * 16 + "-01"},
    )
    assert (full.name, full.idempotency_key) == ("n", "k")
    assert full.on_upstream_failure is UpstreamPolicy.CONTINUE
    assert full.nodes[0].task.trace_context is not None


@pytest.mark.parametrize(
    ("kw", "limits", "field"),
    [
        ({"nodes": []}, {}, "nodes"),
        ({}, {"max_nodes": 1}, "nodes"),
        ({}, {"max_edges": 0}, "edges"),
        ({"nodes": [pb.WorkflowNodeSpec(id="a")]}, {}, "nodes[0].task"),
        ({"nodes": [pb.WorkflowNodeSpec(id="a", task=pb.TaskSpec())]}, {}, "nodes[0].task.type"),
        ({"edges": [pb.WorkflowEdge(child="b")]}, {}, "edges[0].parent"),
        ({"edges": [pb.WorkflowEdge(parent="a")]}, {}, "edges[0].child"),
        ({"on_upstream_failure": 7}, {}, "on_upstream_failure"),
    ],
)
def test_workflow_spec_errors(kw: dict[str, Any], limits: dict[str, int], field: str) -> None:
    with pytest.raises(InvalidArgument) as info:
        _parse_wf(_wf_req(**kw), **limits)
    assert info.value.field == field


def _task(node: str, wf: uuid.UUID, state: TaskState = TaskState.SCHEDULED) -> TaskRecord:
    return task_record(
        tenant_id=TENANT,
        type="t",
        status=state,
        payload={"node": node},
        scheduled_at=NOW,
        due_at=NOW,
        idempotency_key=f"wf:{wf}:{node}",
        shard_id=0,
        strict_timing=True,
        jitter_mode=JitterMode.NONE,
        last_error=None,
        worker_id=None,
        workflow_id=wf,
        created_at=NOW,
        updated_at=NOW,
    )


def test_workflow_view_round_trip_names_edges_by_node() -> None:
    wf = Workflow(
        id=uuid.uuid4(),
        tenant_id=TENANT,
        name="etl",
        idempotency_key="k",
        on_upstream_failure=UpstreamPolicy.CONTINUE,
        node_count=2,
        created_at=NOW,
    )
    a, b = _task("a", wf.id, TaskState.COMPLETED), _task("b", wf.id)
    msg = oconv.view_to_proto(WorkflowView(wf, (a, b), ((a.id, b.id),)))
    assert [(n.id, n.task.state) for n in msg.nodes] == [
        ("a", pb.TASK_STATE_COMPLETED),
        ("b", pb.TASK_STATE_SCHEDULED),
    ]
    info = cconv.workflow_from_proto(
        msg.workflow, msg.nodes, [(e.parent, e.child) for e in msg.edges]
    )
    assert (info.id, info.name, info.node_count) == (wf.id, "etl", 2)
    assert info.on_upstream_failure is UpstreamPolicy.CONTINUE
    assert info.edges == (("a", "b"),)
    assert info.nodes["a"].id == a.id
    assert info.state_counts() == {TaskState.COMPLETED: 1, TaskState.SCHEDULED: 1}
    assert info.created_at == NOW


def test_nodes_keep_submission_order() -> None:
    wf = uuid.uuid4()
    tasks = {n: _task(n, wf) for n in ("z", "a", "m")}
    assert [n.id for n in oconv.nodes_to_proto(tasks, ["m", "z", "a"])] == ["m", "z", "a"]
    assert [n.id for n in oconv.nodes_to_proto(tasks, ["a"])] == ["a", "z", "m"]


def test_client_workflow_request() -> None:
    req = cconv.workflow_request(
        {"a": TaskSpec(type="x"), "b": TaskSpec(type="y", max_retries=0)},
        [("a", "b")],
        name="n",
        idempotency_key=None,
        on_upstream_failure=UpstreamPolicy.CONTINUE,
    )
    assert [(n.id, n.task.type) for n in req.nodes] == [("a", "x"), ("b", "y")]
    assert req.nodes[1].task.no_retries
    assert [(e.parent, e.child) for e in req.edges] == [("a", "b")]
    assert req.idempotency_key == ""
    assert req.on_upstream_failure == pb.UPSTREAM_POLICY_CONTINUE
    # The server reads back what the client wrote.
    spec = _parse_wf(req)
    assert spec.on_upstream_failure is UpstreamPolicy.CONTINUE
    assert spec.nodes[1].task.max_retries == 0


# -- schedules -----------------------------------------------------------------------


def _sched(**kw: Any) -> pb.ScheduleSpec:
    return pb.ScheduleSpec(**{"name": "n", "task_type": "t", "cron": "*/5 * * * *", **kw})


def _parse_sched(msg: pb.ScheduleSpec) -> Any:
    return oconv.schedule_spec_from_proto(msg, "schedule", max_payload_bytes=1024)


def test_schedule_spec_defaults() -> None:
    spec = _parse_sched(_sched())
    assert (spec.name, spec.task_type, spec.cron, spec.interval_s) == ("n", "t", "*/5 * * * *", 0)
    assert spec.timezone == "UTC"
    assert spec.pool is Pool.STANDARD
    assert spec.max_retries == 3
    assert spec.overlap_policy is OverlapPolicy.SKIP
    assert spec.catchup_window_s == 60
    assert spec.jitter_s is None  # unset: the engine picks a tenth of the period
    assert not spec.paused


def test_schedule_spec_full() -> None:
    msg = _sched(
        cron="",
        interval_s=90,
        timezone="Asia/Tokyo",
        pool=pb.POOL_CRITICAL,
        no_retries=True,
        timeout_s=5,
        overlap_policy=pb.OVERLAP_POLICY_BUFFER_ONE,
        catchup_window_s=0,
        jitter_s=2.5,
        paused=True,
    )
    msg.payload.update({"n": 1})
    spec = _parse_sched(msg)
    assert (spec.interval_s, spec.timezone, spec.pool) == (90, "Asia/Tokyo", Pool.CRITICAL)
    assert (spec.max_retries, spec.timeout_s) == (0, 5)
    assert spec.overlap_policy is OverlapPolicy.BUFFER_ONE
    assert spec.catchup_window_s == 0  # set to 0 is not "unset"
    assert (spec.jitter_s, spec.paused, spec.payload) == (2.5, True, {"n": 1})


@pytest.mark.parametrize(
    ("kw", "field"),
    [
        ({"name": ""}, "schedule.name"),
        ({"task_type": ""}, "schedule.task_type"),
        ({"task_type": "a b"}, "schedule.task_type"),
        ({"pool": 9}, "schedule.pool"),
        ({"max_retries": 5000}, "schedule.max_retries"),
        ({"timeout_s": -1}, "schedule.timeout_s"),
        ({"interval_s": -1}, "schedule.interval_s"),
        ({"interval_s": math.nan}, "schedule.interval_s"),
        ({"interval_s": 0.5}, "schedule.interval_s"),
        ({"cron": "* " * 70}, "schedule.cron"),
        ({"timezone": "x" * 65}, "schedule.timezone"),
        ({"overlap_policy": 9}, "schedule.overlap_policy"),
        ({"catchup_window_s": math.inf}, "schedule.catchup_window_s"),
        ({"catchup_window_s": -0.1}, "schedule.catchup_window_s"),
        ({"jitter_s": 3600.5}, "schedule.jitter_s"),
        ({"jitter_s": math.nan}, "schedule.jitter_s"),
    ],
)
def test_schedule_spec_errors(kw: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidArgument) as info:
        _parse_sched(_sched(**kw))
    assert info.value.field == field


def test_schedule_payload_limit() -> None:
    msg = _sched()
    msg.payload.update({"blob": "x" * 2000})
    with pytest.raises(InvalidArgument) as info:
        _parse_sched(msg)
    assert info.value.field == "schedule.payload"


def _schedule(**kw: Any) -> Schedule:
    base: dict[str, Any] = {
        "id": uuid.uuid4(),
        "tenant_id": TENANT,
        "name": "n",
        "cron_expr": "0 * * * *",
        "interval_s": 0.0,
        "timezone": "Europe/Paris",
        "task_type": "t",
        "payload": {"a": [1, 2]},
        "pool": Pool.BULK,
        "max_retries": 4,
        "timeout_s": 1.5,
        "overlap_policy": OverlapPolicy.ALLOW,
        "catchup_window_s": 30.0,
        "jitter_s": 3.0,
        "enabled": False,
        "next_fire_at": NOW,
        "created_at": NOW - timedelta(days=1),
        "updated_at": NOW,
    }
    return Schedule(**{**base, **kw})


def test_schedule_round_trip() -> None:
    s = _schedule()
    info = cconv.schedule_from_proto(oconv.schedule_to_proto(s))
    assert (info.id, info.tenant_id, info.name) == (s.id, TENANT, "n")
    assert (info.cron, info.interval_s, info.timezone) == ("0 * * * *", None, "Europe/Paris")
    assert (info.task_type, info.payload, info.pool) == ("t", {"a": [1, 2]}, Pool.BULK)
    assert (info.max_retries, info.timeout_s) == (4, 1.5)
    assert info.overlap_policy is OverlapPolicy.ALLOW
    assert (info.catchup_window_s, info.jitter_s, info.paused) == (30, 3, True)
    assert (info.next_fire_at, info.last_fired_at, info.buffered_at) == (NOW, None, None)
    assert info.created_at == NOW - timedelta(days=1)
    interval = cconv.schedule_from_proto(
        oconv.schedule_to_proto(_schedule(cron_expr="", interval_s=15.0, enabled=True))
    )
    assert (interval.cron, interval.interval_s, interval.paused) == (None, 15, False)


@pytest.mark.parametrize("policy", list(OverlapPolicy))
def test_overlap_policies_round_trip(policy: OverlapPolicy) -> None:
    wire = cconv.overlap_to_proto(policy)
    assert oconv.overlap_from_proto(wire, "f") is policy


@pytest.mark.parametrize("policy", list(UpstreamPolicy))
def test_upstream_policies_round_trip(policy: UpstreamPolicy) -> None:
    assert oconv.upstream_from_proto(cconv.upstream_to_proto(policy), "f") is policy


# -- expectations --------------------------------------------------------------------


def test_expectation_spec_and_round_trip() -> None:
    sid = uuid.uuid4()
    spec = oconv.expectation_spec_from_proto(
        pb.RegisterExpectationRequest(schedule_id=str(sid), interval_s=60, tolerance_s=5)
    )
    assert (spec.job_id, spec.schedule_id, spec.max_runtime_s) == ("", sid, None)
    spec = oconv.expectation_spec_from_proto(
        pb.RegisterExpectationRequest(job_id="j", interval_s=60, max_runtime_s=9)
    )
    assert (spec.job_id, spec.schedule_id, spec.max_runtime_s) == ("j", None, 9)
    e = Expectation(
        id=uuid.uuid4(),
        tenant_id=TENANT,
        job_id="j",
        interval_s=60,
        tolerance_s=5,
        schedule_id=sid,
        max_runtime_s=None,
        created_at=NOW,
    )
    info = cconv.expectation_from_proto(oconv.expectation_to_proto(e))
    assert (info.id, info.job_id, info.schedule_id) == (e.id, "j", sid)
    assert (info.interval_s, info.tolerance_s, info.max_runtime_s) == (60, 5, None)
    assert info.created_at == NOW


@pytest.mark.parametrize(
    ("req", "field"),
    [
        (pb.RegisterExpectationRequest(schedule_id="nope", interval_s=1), "schedule_id"),
        (pb.RegisterExpectationRequest(job_id=" ", interval_s=1), "job_id"),
    ],
)
def test_expectation_spec_errors(req: pb.RegisterExpectationRequest, field: str) -> None:
    with pytest.raises(InvalidArgument) as info:
        oconv.expectation_spec_from_proto(req)
    assert info.value.field == field


# -- the CLI's workflow file ---------------------------------------------------------


def test_workflow_file() -> None:
    args = parse_workflow_file(
        {
            "name": "etl",
            "on_upstream_failure": "CONTINUE",
            "nodes": [
                {
                    "id": "a",
                    "type": "x",
                    "payload": {"n": 1},
                    "scheduled_at": "2030-01-02T03:04:05",
                },
                {"id": "b", "type": "y", "depends_on": ["a"], "pool": "bulk", "max_retries": 0},
                {"id": "c", "type": "z", "jitter_mode": "late_only", "timeout_s": 2},
            ],
            "edges": [["b", "c"], {"parent": "a", "child": "c"}],
        }
    )
    assert list(args["nodes"]) == ["a", "b", "c"]
    assert args["nodes"]["a"].scheduled_at == datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert args["nodes"]["b"].pool is Pool.BULK
    assert args["nodes"]["b"].max_retries == 0
    assert args["nodes"]["c"].jitter_mode is JitterMode.LATE_ONLY
    assert args["edges"] == [("a", "b"), ("b", "c"), ("a", "c")]
    assert args["on_upstream_failure"] is UpstreamPolicy.CONTINUE
    assert args["idempotency_key"] is None


@pytest.mark.parametrize(
    ("doc", "where"),
    [
        ([], "JSON object"),
        ({"nodes": []}, "nodes"),
        ({"nodes": [{"id": "a", "type": "x"}], "extra": 1}, "unknown keys extra"),
        ({"nodes": [{"type": "x"}]}, "nodes[0].id"),
        ({"nodes": [{"id": "a"}]}, "nodes[0].type"),
        ({"nodes": [{"id": "a", "type": "x", "colour": 1}]}, "nodes[0]: unknown keys colour"),
        ({"nodes": [{"id": "a", "type": "x", "pool": "gold"}]}, "nodes[0].pool"),
        ({"nodes": [{"id": "a", "type": "x", "payload": [1]}]}, "nodes[0].payload"),
        ({"nodes": [{"id": "a", "type": "x", "scheduled_at": "soon"}]}, "nodes[0].scheduled_at"),
        ({"nodes": [{"id": "a", "type": "x", "max_retries": "3"}]}, "nodes[0].max_retries"),
        ({"nodes": [{"id": "a", "type": "x", "max_retries": -1}]}, "nodes[0]:"),
        ({"nodes": [{"id": "a", "type": "x", "depends_on": "b"}]}, "nodes[0].depends_on"),
        ({"nodes": [{"id": "a", "type": "x"}, {"id": "a", "type": "x"}]}, "nodes[1].id"),
        ({"nodes": [{"id": "a", "type": "x"}], "edges": [["a"]]}, "edges[0]"),
        ({"nodes": [{"id": "a", "type": "x"}], "edges": {}}, "edges"),
        ({"nodes": [{"id": "a", "type": "x"}], "on_upstream_failure": "x"}, "on_upstream_failure"),
        ({"nodes": [{"id": "a", "type": "x"}], "name": 5}, "name"),
    ],
)
def test_workflow_file_errors(doc: Any, where: str) -> None:
    with pytest.raises(WorkflowFileError) as info:
        parse_workflow_file(doc)
    assert where in str(info.value)


@pytest.mark.parametrize(("key", "value"), [("pool", "gold"), ("jitter_mode", "wobbly")])
def test_a_bad_node_enum_names_its_path_once(key: str, value: str) -> None:
    with pytest.raises(WorkflowFileError) as info:
        parse_workflow_file({"nodes": [{"id": "a", "type": "x", key: value}]})
    assert str(info.value).startswith(f"nodes[0].{key}: {value!r} is not one of ")
    assert str(info.value).count("nodes[0]") == 1
