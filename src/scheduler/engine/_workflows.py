"""DAG workflows: validation, submission as one batch, and the upstream-failure policy.

A workflow is a set of named nodes (each a :class:`SubmitSpec`) and edges parent ->
child. It is stored as ordinary tasks carrying ``workflow_id``, plus one
``task_dependencies`` row per edge and an ``unresolved_dependencies`` counter per child
(the in-degree). Children wait in SCHEDULED with a count above zero, which the
pre-loader never claims. A parent's completion decrements its children in the
completing transaction (``Store.complete``), and a child that reaches zero comes back
PRELOADED and goes into the wheel at its own ``due_at``: no graph scan, no polling.

A parent that dead-letters or is cancelled has the workflow's :class:`UpstreamPolicy`
applied by the store in the same transaction as that move (cancel every waiting
descendant with reason ``upstream_failed``, or count the parent as resolved: the
children at zero stay SCHEDULED and the pre-loader claims them; the engine wakes it).
"""

from __future__ import annotations

import builtins
import collections
import contextlib
import dataclasses
import uuid
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime

from scheduler._errors import InvalidArgument, InvalidTransition
from scheduler.engine._admission import Admission
from scheduler.engine._config import EngineConfig
from scheduler.engine._timeline import Timeline
from scheduler.engine._types import SubmitSpec
from scheduler.ids import uuid7
from scheduler.limits import MAX_PAGE_SIZE
from scheduler.states import TERMINAL, TaskState
from scheduler.store import Store
from scheduler.types import (
    InsertResult,
    NewTask,
    TaskRecord,
    UpstreamPolicy,
    Workflow,
    WorkflowView,
)

MAX_NODE_ID_LEN = 64
_KEY_PREFIX = "wf:"


@dataclasses.dataclass(frozen=True, slots=True)
class WorkflowNode:
    """One node: a client-chosen id (unique in the workflow) and the task to run."""

    node_id: str
    task: SubmitSpec


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class WorkflowSpec:
    """A client's DAG: nodes and parent -> child edges by node id."""

    nodes: Sequence[WorkflowNode]
    edges: Sequence[tuple[str, str]] = ()
    name: str = ""
    idempotency_key: str | None = None
    """Dedupes the whole workflow per tenant; None: the workflow id (no dedupe)."""
    on_upstream_failure: UpstreamPolicy = UpstreamPolicy.CANCEL


@dataclasses.dataclass(frozen=True, slots=True)
class WorkflowResult:
    """A submitted (or deduplicated) workflow and each node's task."""

    workflow: Workflow
    created: bool
    tasks: dict[str, TaskRecord]
    """Node id -> task."""


def node_key(workflow_id: uuid.UUID, node_id: str) -> str:
    """The idempotency key of a node's task: makes a resubmission insert nothing twice."""
    return f"{_KEY_PREFIX}{workflow_id}:{node_id}"


def node_id_of(task: TaskRecord) -> str:
    """The node id of a workflow task (from its idempotency key)."""
    prefix = f"{_KEY_PREFIX}{task.workflow_id}:"
    key = task.idempotency_key
    return key[len(prefix) :] if key.startswith(prefix) else str(task.id)


def validate_dag(spec: WorkflowSpec, max_nodes: int, max_edges: int) -> list[int]:
    """Check the graph; return node indexes in a topological order (parents first).

    InvalidArgument names the problem: empty, too big, duplicate or unknown ids, a
    cycle (with the nodes on it).
    """
    nodes = spec.nodes
    if not nodes:
        raise InvalidArgument("nodes", "at least one node is required")
    if len(nodes) > max_nodes:
        raise InvalidArgument("nodes", f"at most {max_nodes} nodes per workflow")
    if len(spec.edges) > max_edges:
        raise InvalidArgument("edges", f"at most {max_edges} edges per workflow")
    if len(spec.name) > 128:
        raise InvalidArgument("name", "longer than 128 characters")
    index: dict[str, int] = {}
    for i, node in enumerate(nodes):
        if not node.node_id or len(node.node_id) > MAX_NODE_ID_LEN:
            raise InvalidArgument(f"nodes[{i}].id", f"must be 1..{MAX_NODE_ID_LEN} characters")
        if node.node_id in index:
            raise InvalidArgument(f"nodes[{i}].id", f"duplicate node id {node.node_id!r}")
        if node.task.idempotency_key is not None:
            raise InvalidArgument(
                f"nodes[{i}].task.idempotency_key",
                "not allowed in a workflow (the workflow's idempotency_key dedupes it)",
            )
        index[node.node_id] = i
    children: list[list[int]] = [[] for _ in nodes]
    indegree = [0] * len(nodes)
    seen: set[tuple[int, int]] = set()
    for j, (parent, child) in enumerate(spec.edges):
        if parent not in index:
            raise InvalidArgument(f"edges[{j}].parent", f"unknown node id {parent!r}")
        if child not in index:
            raise InvalidArgument(f"edges[{j}].child", f"unknown node id {child!r}")
        p, c = index[parent], index[child]
        if p == c:
            raise InvalidArgument(f"edges[{j}]", f"cycle: node {parent!r} depends on itself")
        if (p, c) in seen:
            continue
        seen.add((p, c))
        children[p].append(c)
        indegree[c] += 1
    # Kahn's algorithm: what is left over lies on (or behind) a cycle.
    queue = collections.deque(i for i, d in enumerate(indegree) if d == 0)
    order: list[int] = []
    remaining = list(indegree)
    while queue:
        i = queue.popleft()
        order.append(i)
        for c in children[i]:
            remaining[c] -= 1
            if remaining[c] == 0:
                queue.append(c)
    if len(order) < len(nodes):
        stuck = sorted(nodes[i].node_id for i, d in enumerate(remaining) if d > 0)
        shown = ", ".join(repr(s) for s in stuck[:10])
        more = f" and {len(stuck) - 10} more" if len(stuck) > 10 else ""
        raise InvalidArgument("edges", f"cycle among nodes {shown}{more}")
    return order


class Workflows:
    """The engine's workflow door: submit, read, list and cancel. ``cancel_task`` is
    ``Engine.cancel`` (a node is cancelled as any task is: its worker is told)."""

    def __init__(
        self,
        store: Store,
        config: EngineConfig,
        now: Callable[[], datetime],
        admission: Admission,
        timeline: Timeline,
        cancel_task: Callable[[uuid.UUID, uuid.UUID], Awaitable[TaskRecord]],
    ) -> None:
        self._store = store
        self._config = config
        self._now = now
        self._admission = admission
        self._timeline = timeline
        self._cancel_task = cancel_task

    async def submit(self, tenant_id: uuid.UUID, spec: WorkflowSpec) -> WorkflowResult:
        """Validate the DAG and insert it in one batch (parents before children)."""
        cfg = self._config
        order = validate_dag(spec, cfg.max_workflow_nodes, cfg.max_workflow_edges)
        for i, node in enumerate(spec.nodes):
            self._admission.validate(node.task, f"nodes[{i}].task")
        if spec.idempotency_key is not None and not 0 < len(spec.idempotency_key) <= 128:
            raise InvalidArgument("idempotency_key", "must be 1..128 characters")
        now = self._now()
        wf_id = uuid7()
        workflow, created = await self._store.create_workflow(
            Workflow(
                id=wf_id,
                tenant_id=tenant_id,
                name=spec.name,
                idempotency_key=spec.idempotency_key or str(wf_id),
                on_upstream_failure=spec.on_upstream_failure,
                node_count=len(spec.nodes),
                created_at=now,
            )
        )
        existing: dict[str, TaskRecord] = {}
        if not created:
            # A resubmission (or a retry after a crash mid-insert): reuse what exists.
            view = await self._store.get_workflow(tenant_id, workflow.id)
            existing = {node_id_of(t): t for t in view.tasks}
        parents: dict[int, list[int]] = collections.defaultdict(list)
        index = {n.node_id: i for i, n in enumerate(spec.nodes)}
        for parent, child in dict.fromkeys(spec.edges):
            parents[index[child]].append(index[parent])
        ids: dict[int, uuid.UUID] = {}
        new: list[NewTask] = []
        for i in order:
            node = spec.nodes[i]
            if node.node_id in existing:
                ids[i] = existing[node.node_id].id
                continue
            task_spec = node.task
            if task_spec.scheduled_at is None:
                # "Now" inside a DAG means "as soon as the parents are done": no jitter.
                task_spec = dataclasses.replace(task_spec, strict_timing=True)
            deps = tuple(
                ids[p]
                for p in parents.get(i, ())
                if spec.nodes[p].node_id not in existing
                or existing[spec.nodes[p].node_id].status is not TaskState.COMPLETED
            )
            # A root due soon goes straight into the wheel, but only when its shard is
            # this node's (admission decides): another node's shard waits SCHEDULED for
            # its owner, who hears of it at commit (Store.listen_work).
            task = self._admission.new_task(
                tenant_id,
                task_spec,
                now,
                idempotency_key=node_key(workflow.id, node.node_id),
                workflow_id=workflow.id,
                depends_on=deps,
            )
            ids[i] = task.id
            new.append(task)
        results: list[InsertResult] = await self._store.insert_tasks(new, now) if new else []
        self._timeline.admit(results)
        tasks = dict(existing)
        for r in results:
            tasks[node_id_of(r.task)] = r.task
        return WorkflowResult(workflow, created, tasks)

    async def get(self, tenant_id: uuid.UUID, workflow_id: uuid.UUID) -> WorkflowView:
        """The workflow with every node's task and the edges."""
        return await self._store.get_workflow(tenant_id, workflow_id)

    async def list(self, tenant_id: uuid.UUID, limit: int) -> builtins.list[Workflow]:
        """``tenant_id``'s workflows, newest first."""
        if not 1 <= limit <= MAX_PAGE_SIZE:
            raise InvalidArgument("limit", f"must be 1..{MAX_PAGE_SIZE}")
        return await self._store.list_workflows(tenant_id, limit)

    async def cancel(
        self, tenant_id: uuid.UUID, workflow_id: uuid.UUID
    ) -> tuple[WorkflowView, int]:
        """Cancel every unfinished node (as ``Engine.cancel`` does); the workflow after
        it and how many nodes this call cancelled or asked to stop."""
        before = await self._store.get_workflow(tenant_id, workflow_id)
        open_ids = {
            t.id for t in before.tasks if t.status not in TERMINAL and not t.cancel_requested
        }
        for task in before.tasks:
            if task.id in open_ids:
                # A node finished meanwhile, or cancelled by its parent's upstream policy.
                with contextlib.suppress(InvalidTransition):
                    await self._cancel_task(tenant_id, task.id)
        after = await self._store.get_workflow(tenant_id, workflow_id)
        stopped = sum(
            1
            for t in after.tasks
            if t.id in open_ids and (t.status is TaskState.CANCELLED or t.cancel_requested)
        )
        return after, stopped
