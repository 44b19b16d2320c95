"""The client's workflow calls: submit a DAG, read, list and cancel workflows."""

from __future__ import annotations

import builtins
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from scheduler.client import _convert as conv
from scheduler.client._base import _Base
from scheduler.client._types import TaskSpec, WorkflowInfo
from scheduler.types import UpstreamPolicy


class WorkflowCalls(_Base):
    """SchedulerService's workflow RPCs."""

    _sched: Any
    """The SchedulerService stub (set by :class:`~scheduler.client._client.Client`)."""

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
        resp = await self._rpc(self._sched.SubmitWorkflow, req, trace=True)
        return conv.workflow_from_proto(resp.workflow, resp.nodes, edge_list, created=resp.created)

    async def get_workflow(self, workflow_id: uuid.UUID | str) -> WorkflowInfo:
        """A workflow with every node's task (and state) and its edges."""
        resp = await self._rpc(
            self._sched.GetWorkflow, pb.GetWorkflowRequest(workflow_id=str(workflow_id))
        )
        return conv.workflow_from_proto(
            resp.workflow, resp.nodes, ((e.parent, e.child) for e in resp.edges)
        )

    async def list_workflows(self, *, limit: int = 100) -> builtins.list[WorkflowInfo]:
        """The tenant's workflows, newest first; headers only (``nodes`` is empty: use
        :meth:`get_workflow` for one workflow's tasks)."""
        resp = await self._rpc(self._sched.ListWorkflows, pb.ListWorkflowsRequest(limit=limit))
        return [conv.workflow_from_proto(w, (), ()) for w in resp.workflows]

    async def cancel_workflow(self, workflow_id: uuid.UUID | str) -> tuple[WorkflowInfo, int]:
        """Cancel every unfinished node; the workflow after it and how many nodes this
        call cancelled (running ones finish CANCELLED when their worker stops)."""
        resp = await self._rpc(
            self._sched.CancelWorkflow, pb.CancelWorkflowRequest(workflow_id=str(workflow_id))
        )
        wf = resp.workflow
        info = conv.workflow_from_proto(
            wf.workflow, wf.nodes, ((e.parent, e.child) for e in wf.edges)
        )
        return info, resp.cancelled
