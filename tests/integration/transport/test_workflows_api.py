"""SubmitWorkflow / GetWorkflow over gRPC: the client, validation of every field,
tenant isolation, the CLI, and one run over PostgreSQL."""

# ruff: noqa: E501  (the case table reads best one case per line)

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import grpc
import pytest
from click.testing import CliRunner

from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from scheduler._proto.tickwheel.v1 import tickwheel_pb2_grpc as pbg
from scheduler.cli import main
from scheduler.client import (
    Client,
    InvalidArgument,
    NotFound,
    TaskSpec,
    TaskState,
    UpstreamPolicy,
    WorkflowInfo,
)
from scheduler.types import UPSTREAM_FAILED
from scheduler.worker import ApplicationError, TaskContext, Worker
from tests.integration.transport.conftest import Stack, eventually

DIAMOND_EDGES = [("a", "b"), ("a", "c"), ("b", "d"), ("c", "d")]


def _diamond(task_type: str = "step") -> dict[str, TaskSpec]:
    return {n: TaskSpec(type=task_type, payload={"node": n}) for n in "abcd"}


@contextlib.asynccontextmanager
async def _worker(stack: Stack, key: str | None = None) -> AsyncIterator[list[str]]:
    """A worker for types ``step`` (completes, recording the node) and ``bad`` (fails for good)."""
    order: list[str] = []

    async def step(ctx: TaskContext) -> dict[str, Any]:
        order.append(str(ctx.payload.get("node")))
        return {"ok": True}

    async def bad(ctx: TaskContext) -> None:
        raise ApplicationError("boom", non_retryable=True)

    worker = Worker(stack.target, api_key=key or stack.key_a, handlers={"step": step, "bad": bad})
    run = asyncio.create_task(worker.run(), name="test-workflow-worker")
    try:
        yield order
    finally:
        await worker.shutdown(grace_s=2)
        await asyncio.wait_for(run, 15)


def _settled(wf: WorkflowInfo) -> bool:
    live = {
        TaskState.SCHEDULED,
        TaskState.PRELOADED,
        TaskState.DISPATCHED,
        TaskState.RUNNING,
        TaskState.RETRYING,
    }
    return not any(t.state in live for t in wf.nodes.values())


async def test_diamond_runs_in_dependency_order(stack: Stack, client: Client) -> None:
    async with _worker(stack) as order:
        wf = await client.submit_workflow(_diamond(), DIAMOND_EDGES, name="diamond")
        assert wf.created
        assert wf.node_count == 4
        assert wf.name == "diamond"
        assert list(wf.nodes) == ["a", "b", "c", "d"]
        assert wf.nodes["d"].state is TaskState.SCHEDULED  # waits for b and c
        assert wf.on_upstream_failure is UpstreamPolicy.CANCEL
        done = await eventually(lambda: client.get_workflow(wf.id), _settled)
    assert {n: t.state for n, t in done.nodes.items()} == dict.fromkeys("abcd", TaskState.COMPLETED)
    assert sorted(done.edges) == sorted(DIAMOND_EDGES)
    assert order[0] == "a"
    assert order[-1] == "d"
    assert done.state_counts() == {TaskState.COMPLETED: 4}
    # The node tasks are ordinary tasks of the tenant, linked to their workflow.
    node = await client.get(done.nodes["d"].id)
    assert node.result == {"ok": True}
    assert node.workflow_id == wf.id
    assert node.schedule_id is None


async def test_failed_parent_cancels_descendants(stack: Stack, client: Client) -> None:
    nodes = {
        "a": TaskSpec(type="step"),
        "b": TaskSpec(type="bad"),
        "c": TaskSpec(type="step"),
        "d": TaskSpec(type="step"),
    }
    async with _worker(stack):
        wf = await client.submit_workflow(nodes, [("a", "b"), ("b", "c"), ("a", "d")])
        done = await eventually(lambda: client.get_workflow(wf.id), _settled)
    states = {n: t.state for n, t in done.nodes.items()}
    assert states == {
        "a": TaskState.COMPLETED,
        "b": TaskState.DEAD_LETTER,
        "c": TaskState.CANCELLED,
        "d": TaskState.COMPLETED,
    }
    assert done.nodes["c"].last_error == UPSTREAM_FAILED


async def test_continue_policy_runs_children_of_a_failed_parent(
    stack: Stack, client: Client
) -> None:
    nodes = {"a": TaskSpec(type="bad"), "b": TaskSpec(type="step")}
    async with _worker(stack):
        wf = await client.submit_workflow(
            nodes, [("a", "b")], on_upstream_failure=UpstreamPolicy.CONTINUE
        )
        done = await eventually(lambda: client.get_workflow(wf.id), _settled)
    assert done.on_upstream_failure is UpstreamPolicy.CONTINUE
    assert done.nodes["a"].state is TaskState.DEAD_LETTER
    assert done.nodes["b"].state is TaskState.COMPLETED


async def test_idempotent_resubmit_returns_the_same_workflow(client: Client) -> None:
    first = await client.submit_workflow(_diamond(), DIAMOND_EDGES, idempotency_key="nightly-1")
    again = await client.submit_workflow(_diamond(), DIAMOND_EDGES, idempotency_key="nightly-1")
    assert again.id == first.id
    assert not again.created
    assert {n: t.id for n, t in again.nodes.items()} == {n: t.id for n, t in first.nodes.items()}
    assert first.idempotency_key == "nightly-1"


async def test_client_sees_validation_errors_typed(client: Client) -> None:
    with pytest.raises(InvalidArgument) as info:
        await client.submit_workflow(_diamond(), [*DIAMOND_EDGES, ("d", "a")])
    assert info.value.field == "edges"
    assert "cycle" in info.value.problem
    with pytest.raises(NotFound):
        await client.get_workflow("0190d6c4-0000-7000-8000-000000000000")


async def test_tenants_never_see_each_others_workflows(stack: Stack, client: Client) -> None:
    wf = await client.submit_workflow(_diamond(), DIAMOND_EDGES, idempotency_key="shared-key")
    other = await stack.client(stack.key_b)
    try:
        with pytest.raises(NotFound):
            await other.get_workflow(wf.id)
        # Neither the node tasks.
        with pytest.raises(NotFound):
            await other.get(wf.nodes["a"].id)
        # The same idempotency key in another tenant is another workflow.
        theirs = await other.submit_workflow(
            _diamond(), DIAMOND_EDGES, idempotency_key="shared-key"
        )
        assert theirs.created
        assert theirs.id != wf.id
        assert str(theirs.tenant_id) == stack.tenant_b
        with pytest.raises(NotFound):
            await client.get_workflow(theirs.id)
    finally:
        await other.close()
    assert (await client.get_workflow(wf.id)).node_count == 4


# -- every field: bad input is INVALID_ARGUMENT naming it -----------------------------

GOOD_ID = "0190d6c4-0000-7000-8000-000000000000"


def _n(node_id: str, **task: Any) -> pb.WorkflowNodeSpec:
    return pb.WorkflowNodeSpec(id=node_id, task=pb.TaskSpec(**{"type": "step", **task}))


def _e(parent: str, child: str) -> pb.WorkflowEdge:
    return pb.WorkflowEdge(parent=parent, child=child)


def _wf(**kw: Any) -> pb.SubmitWorkflowRequest:
    return pb.SubmitWorkflowRequest(**{"nodes": [_n("a"), _n("b")], "edges": [_e("a", "b")], **kw})


def _big_payload() -> Any:
    from google.protobuf import struct_pb2

    s = struct_pb2.Struct()
    s.update({"blob": "x" * (1 << 20)})
    return s


CASES: list[tuple[str, Callable[[], Any], str]] = [
    ("SubmitWorkflow", lambda: pb.SubmitWorkflowRequest(), "nodes"),
    ("SubmitWorkflow", lambda: _wf(nodes=[_n(f"n{i}") for i in range(20_001)], edges=[]), "nodes"),
    ("SubmitWorkflow", lambda: _wf(edges=[_e("a", "b")] * 100_001), "edges"),
    ("SubmitWorkflow", lambda: _wf(nodes=[_n("a"), pb.WorkflowNodeSpec(id="b")]), "nodes[1].task"),
    ("SubmitWorkflow", lambda: _wf(nodes=[_n("a"), _n("")]), "nodes[1].id"),
    ("SubmitWorkflow", lambda: _wf(nodes=[_n("a"), _n("x" * 65)]), "nodes[1].id"),
    ("SubmitWorkflow", lambda: _wf(nodes=[_n("a"), _n("a")]), "nodes[1].id"),
    ("SubmitWorkflow", lambda: _wf(nodes=[_n("a"), _n("b", type="")]), "nodes[1].task.type"),
    ("SubmitWorkflow", lambda: _wf(nodes=[_n("a"), _n("b", type="a b")]), "nodes[1].task.type"),
    ("SubmitWorkflow", lambda: _wf(nodes=[_n("a"), _n("b", pool=42)]), "nodes[1].task.pool"),
    ("SubmitWorkflow", lambda: _wf(nodes=[_n("a"), _n("b", jitter_mode=42)]), "nodes[1].task.jitter_mode"),
    ("SubmitWorkflow", lambda: _wf(nodes=[_n("a"), _n("b", max_retries=100_000)]), "nodes[1].task.max_retries"),
    ("SubmitWorkflow", lambda: _wf(nodes=[_n("a"), _n("b", timeout_s=float("nan"))]), "nodes[1].task.timeout_s"),
    ("SubmitWorkflow", lambda: _wf(nodes=[_n("a"), _n("b", payload=_big_payload())]), "nodes[1].task.payload"),
    ("SubmitWorkflow", lambda: _wf(nodes=[_n("a"), _n("b", idempotency_key="k")]), "nodes[1].task.idempotency_key"),
    ("SubmitWorkflow", lambda: _wf(nodes=[_n("a"), _n("b", trace_context=pb.TraceContext(traceparent="x"))]), "nodes[1].task.trace_context.traceparent"),
    ("SubmitWorkflow", lambda: _wf(edges=[_e("", "b")]), "edges[0].parent"),
    ("SubmitWorkflow", lambda: _wf(edges=[_e("a", "")]), "edges[0].child"),
    ("SubmitWorkflow", lambda: _wf(edges=[_e("a", "b"), _e("zz", "b")]), "edges[1].parent"),
    ("SubmitWorkflow", lambda: _wf(edges=[_e("a", "zz")]), "edges[0].child"),
    ("SubmitWorkflow", lambda: _wf(edges=[_e("a", "a")]), "edges[0]"),
    ("SubmitWorkflow", lambda: _wf(edges=[_e("a", "b"), _e("b", "a")]), "edges"),
    ("SubmitWorkflow", lambda: _wf(name="n" * 129), "name"),
    ("SubmitWorkflow", lambda: _wf(idempotency_key="k" * 129), "idempotency_key"),
    ("SubmitWorkflow", lambda: _wf(on_upstream_failure=9), "on_upstream_failure"),
    ("GetWorkflow", lambda: pb.GetWorkflowRequest(), "workflow_id"),
    ("GetWorkflow", lambda: pb.GetWorkflowRequest(workflow_id="not-a-uuid"), "workflow_id"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("method", "make", "field"), CASES, ids=[f"{c[0]}-{c[2]}-{i}" for i, c in enumerate(CASES)]
)
async def test_bad_field_is_invalid_argument(
    stack: Stack, method: str, make: Callable[[], Any], field: str
) -> None:
    async with grpc.aio.insecure_channel(
        stack.target, options=[("grpc.max_send_message_length", 64 << 20)]
    ) as channel:
        stub: Any = pbg.SchedulerServiceStub(channel)  # type: ignore[no-untyped-call]
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await getattr(stub, method)(make(), metadata=(("x-api-key", stack.key_a),), timeout=30)
    assert info.value.code() is grpc.StatusCode.INVALID_ARGUMENT, info.value.details()
    assert (info.value.details() or "").startswith(f"{field}:"), info.value.details()


async def test_cycle_error_names_the_nodes(stack: Stack, client: Client) -> None:
    nodes = {n: TaskSpec(type="step") for n in ("root", "x", "y", "z")}
    with pytest.raises(InvalidArgument) as info:
        await client.submit_workflow(nodes, [("root", "x"), ("x", "y"), ("y", "z"), ("z", "x")])
    assert info.value.field == "edges"
    assert "'x'" in info.value.problem
    assert "'z'" in info.value.problem
    assert "'root'" not in info.value.problem


# -- CLI ------------------------------------------------------------------------------


async def _cli(*args: str) -> Any:
    result = await asyncio.to_thread(CliRunner().invoke, main, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


async def test_cli_submit_and_get(stack: Stack, tmp_path: Path) -> None:
    doc = {
        "name": "etl",
        "idempotency_key": "etl-1",
        "nodes": [
            {"id": "extract", "type": "step", "payload": {"n": 1}},
            {"id": "transform", "type": "step", "depends_on": ["extract"], "pool": "critical"},
            {"id": "load", "type": "step", "max_retries": 0},
        ],
        "edges": [{"parent": "transform", "child": "load"}],
    }
    path = tmp_path / "wf.json"
    path.write_text(json.dumps(doc))
    auth = ("--target", stack.target, "--api-key", stack.key_a)
    out = await _cli("workflows", "submit", str(path), *auth, "--json")
    assert out["created"] is True
    assert out["name"] == "etl"
    assert sorted(out["nodes"]) == ["extract", "load", "transform"]
    assert out["nodes"]["transform"]["pool"] == "critical"
    assert out["nodes"]["load"]["max_retries"] == 0
    got = await _cli("workflows", "get", out["id"], *auth, "--json")
    assert sorted(map(tuple, got["edges"])) == [("extract", "transform"), ("transform", "load")]
    assert got["nodes"]["load"]["state"] == "SCHEDULED"
    # The human form prints too.
    table = await asyncio.to_thread(
        CliRunner().invoke, main, ["workflows", "get", out["id"], *auth]
    )
    assert table.exit_code == 0
    assert "transform" in table.output


async def test_cli_rejects_a_bad_file(stack: Stack, tmp_path: Path) -> None:
    path = tmp_path / "wf.json"
    path.write_text(json.dumps({"nodes": [{"id": "a", "type": "step", "pool": "gold"}]}))
    auth = ("--target", stack.target, "--api-key", stack.key_a)
    result = await asyncio.to_thread(
        CliRunner().invoke, main, ["workflows", "submit", str(path), *auth]
    )
    assert result.exit_code == 2
    assert "nodes[0].pool" in result.output
    path.write_text(json.dumps({"nodes": [{"id": "a", "type": "step"}], "edges": [["a", "a"]]}))
    result = await asyncio.to_thread(
        CliRunner().invoke, main, ["workflows", "submit", str(path), *auth]
    )
    assert result.exit_code == 1  # the server's INVALID_ARGUMENT
    assert "edges[0]" in result.output


# -- PostgreSQL -----------------------------------------------------------------------


async def test_workflow_api_over_postgres(pg_stack: Stack) -> None:
    client = await pg_stack.client()
    other = await pg_stack.client(pg_stack.key_b)
    try:
        async with _worker(pg_stack):
            wf = await client.submit_workflow(_diamond(), DIAMOND_EDGES, idempotency_key="pg")
            done = await eventually(lambda: client.get_workflow(wf.id), _settled)
        assert {t.state for t in done.nodes.values()} == {TaskState.COMPLETED}
        assert sorted(done.edges) == sorted(DIAMOND_EDGES)
        assert not (
            await client.submit_workflow(_diamond(), DIAMOND_EDGES, idempotency_key="pg")
        ).created
        with pytest.raises(NotFound):
            await other.get_workflow(wf.id)
        with pytest.raises(InvalidArgument) as info:
            await client.submit_workflow(_diamond(), [("a", "zz")])
        assert info.value.field == "edges[0].child"
    finally:
        await client.close()
        await other.close()
