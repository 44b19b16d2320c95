"""DAG workflows end to end over the engine and a real store (SQLite and PostgreSQL)."""

from __future__ import annotations

import time
import uuid

import pytest

from scheduler import InvalidArgument
from scheduler.engine import Engine, SubmitSpec
from scheduler.engine._workflows import WorkflowNode, WorkflowSpec, node_id_of
from scheduler.states import TaskState
from scheduler.types import UPSTREAM_FAILED, UpstreamPolicy
from tests.integration.workflows.conftest import Completer
from tests.support.waiting import eventually


def node(name: str, type_: str = "step") -> WorkflowNode:
    return WorkflowNode(name, SubmitSpec(type=type_, payload={"node": name}))


async def states(engine: Engine, tenant: uuid.UUID, wf: uuid.UUID) -> dict[str, TaskState]:
    view = await engine.workflows.get(tenant, wf)
    return {node_id_of(t): t.status for t in view.tasks}


def all_in(state: TaskState):  # type: ignore[no-untyped-def]
    return lambda got: bool(got) and all(s is state for s in got.values())


async def test_diamond_runs_in_topological_order(
    engine: Engine, tenant: uuid.UUID, completer: Completer
) -> None:
    spec = WorkflowSpec(
        nodes=[node("D"), node("C"), node("B"), node("A")],
        edges=[("A", "B"), ("A", "C"), ("B", "D"), ("C", "D")],
        name="diamond",
    )
    res = await engine.workflows.submit(tenant, spec)
    assert res.created
    ids = {n: t.id for n, t in res.tasks.items()}
    assert res.tasks["D"].unresolved_dependencies == 2
    assert res.tasks["D"].status is TaskState.SCHEDULED
    await eventually(
        lambda: states(engine, tenant, res.workflow.id),
        until=all_in(TaskState.COMPLETED),
        what="diamond completes",
    )
    order = await eventually(
        lambda: _done(completer), until=lambda got: len(got) >= 4, what="4 completions"
    )
    assert order.index(ids["A"]) < order.index(ids["B"]) < order.index(ids["D"])
    assert order.index(ids["A"]) < order.index(ids["C"]) < order.index(ids["D"])
    view = await engine.workflows.get(tenant, res.workflow.id)
    assert len(view.edges) == 4
    assert all(t.unresolved_dependencies == 0 for t in view.tasks)


async def test_resubmit_with_key_creates_nothing_twice(engine: Engine, tenant: uuid.UUID) -> None:
    spec = WorkflowSpec(nodes=[node("A"), node("B")], edges=[("A", "B")], idempotency_key="k1")
    first = await engine.workflows.submit(tenant, spec)
    again = await engine.workflows.submit(tenant, spec)
    assert not again.created
    assert again.workflow.id == first.workflow.id
    assert {n: t.id for n, t in again.tasks.items()} == {n: t.id for n, t in first.tasks.items()}
    view = await engine.workflows.get(tenant, first.workflow.id)
    assert len(view.tasks) == 2
    assert len(view.edges) == 1


@pytest.mark.parametrize(
    ("spec", "field", "text"),
    [
        (WorkflowSpec(nodes=[]), "nodes", "at least one"),
        (WorkflowSpec(nodes=[node("A"), node("A")]), "nodes[1].id", "duplicate"),
        (WorkflowSpec(nodes=[node("A")], edges=[("A", "Z")]), "edges[0].child", "unknown"),
        (WorkflowSpec(nodes=[node("A")], edges=[("Y", "A")]), "edges[0].parent", "unknown"),
        (WorkflowSpec(nodes=[node("A")], edges=[("A", "A")]), "edges[0]", "cycle"),
        (
            WorkflowSpec(
                nodes=[node("A"), node("B"), node("C"), node("E")],
                edges=[("E", "A"), ("A", "B"), ("B", "C"), ("C", "A")],
            ),
            "edges",
            "cycle among nodes 'A', 'B', 'C'",
        ),
        (WorkflowSpec(nodes=[node(f"n{i}") for i in range(20_001)]), "nodes", "at most"),
    ],
)
async def test_invalid_graphs_are_refused_naming_the_problem(
    engine: Engine, tenant: uuid.UUID, spec: WorkflowSpec, field: str, text: str
) -> None:
    with pytest.raises(InvalidArgument) as err:
        await engine.workflows.submit(tenant, spec)
    assert err.value.field == field
    assert text in str(err.value)


async def test_fan_out_of_10000(
    engine: Engine, tenant: uuid.UUID, completer: Completer, capsys: pytest.CaptureFixture[str]
) -> None:
    n = 10_000
    spec = WorkflowSpec(
        nodes=[node("root"), *(node(f"c{i}") for i in range(n))],
        edges=[("root", f"c{i}") for i in range(n)],
    )
    t0 = time.perf_counter()
    res = await engine.workflows.submit(tenant, spec)
    t_submit = time.perf_counter() - t0
    await eventually(lambda: _len(completer), until=lambda k: k >= n + 1, timeout_s=120)
    t_all = time.perf_counter() - t0
    assert len(set(completer.done)) == n + 1
    assert completer.done[0] == res.tasks["root"].id
    with capsys.disabled():
        print(f"\n[fan-out {n}] submit {t_submit:.2f}s, all completed {t_all:.2f}s")


async def test_fan_in_of_10000(
    engine: Engine, tenant: uuid.UUID, completer: Completer, capsys: pytest.CaptureFixture[str]
) -> None:
    n = 10_000
    spec = WorkflowSpec(
        nodes=[*(node(f"p{i}") for i in range(n)), node("sink")],
        edges=[(f"p{i}", "sink") for i in range(n)],
    )
    t0 = time.perf_counter()
    res = await engine.workflows.submit(tenant, spec)
    assert res.tasks["sink"].unresolved_dependencies == n
    await eventually(lambda: _len(completer), until=lambda k: k >= n + 1, timeout_s=120)
    t_all = time.perf_counter() - t0
    assert completer.done[-1] == res.tasks["sink"].id
    assert len(set(completer.done)) == n + 1
    with capsys.disabled():
        print(f"\n[fan-in {n}] all completed {t_all:.2f}s")


async def test_chain_of_1000(
    engine: Engine, tenant: uuid.UUID, completer: Completer, capsys: pytest.CaptureFixture[str]
) -> None:
    n = 1000
    spec = WorkflowSpec(
        nodes=[node(f"s{i}") for i in range(n)],
        edges=[(f"s{i}", f"s{i + 1}") for i in range(n - 1)],
    )
    t0 = time.perf_counter()
    res = await engine.workflows.submit(tenant, spec)
    await eventually(lambda: _len(completer), until=lambda k: k >= n, timeout_s=120)
    t_all = time.perf_counter() - t0
    assert completer.done == [res.tasks[f"s{i}"].id for i in range(n)]
    with capsys.disabled():
        print(f"\n[chain {n}] all completed {t_all:.2f}s ({t_all / n * 1000:.1f} ms/step)")


async def _len(c: Completer) -> int:
    return len(c.done)


async def _done(c: Completer) -> list[uuid.UUID]:
    return list(c.done)


async def test_dead_letter_cancels_descendants_upstream_failed(
    engine: Engine, tenant: uuid.UUID, completer: Completer
) -> None:
    spec = WorkflowSpec(
        nodes=[node("A", "bad"), node("B"), node("C"), node("X")],
        edges=[("A", "B"), ("B", "C")],
    )
    res = await engine.workflows.submit(tenant, spec)
    got = await eventually(
        lambda: states(engine, tenant, res.workflow.id),
        until=lambda s: s["C"] is TaskState.CANCELLED and s["X"] is TaskState.COMPLETED,
        what="descendants cancelled",
    )
    assert got["A"] is TaskState.DEAD_LETTER
    assert got["B"] is TaskState.CANCELLED
    view = await engine.workflows.get(tenant, res.workflow.id)
    reasons = {node_id_of(t): t.last_error for t in view.tasks}
    assert reasons["B"] == reasons["C"] == UPSTREAM_FAILED


async def test_continue_policy_runs_children_of_a_dead_letter(
    engine: Engine, tenant: uuid.UUID, completer: Completer
) -> None:
    spec = WorkflowSpec(
        nodes=[node("A", "bad"), node("B")],
        edges=[("A", "B")],
        on_upstream_failure=UpstreamPolicy.CONTINUE,
    )
    res = await engine.workflows.submit(tenant, spec)
    got = await eventually(
        lambda: states(engine, tenant, res.workflow.id),
        until=lambda s: s["B"] is TaskState.COMPLETED,
        what="child runs",
    )
    assert got["A"] is TaskState.DEAD_LETTER


async def test_cancelling_a_parent_cancels_its_descendants(
    engine: Engine, tenant: uuid.UUID
) -> None:
    later = engine.now().replace(year=engine.now().year + 1)
    spec = WorkflowSpec(
        nodes=[
            WorkflowNode("A", SubmitSpec(type="step", scheduled_at=later)),
            node("B"),
            node("C"),
        ],
        edges=[("A", "B"), ("A", "C"), ("B", "C")],
    )
    res = await engine.workflows.submit(tenant, spec)
    await engine.cancel(tenant, res.tasks["A"].id)
    got = await states(engine, tenant, res.workflow.id)
    assert got == {
        "A": TaskState.CANCELLED,
        "B": TaskState.CANCELLED,
        "C": TaskState.CANCELLED,
    }
