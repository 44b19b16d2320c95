"""Workflow records on PostgreSQL (:class:`~scheduler.store.protocol.WorkflowStore`).

Owns :class:`Workflows`: ``create_workflow`` (idempotent per tenant and key) and
``get_workflow`` (the workflow, its tasks and edges). The upstream policy is
:mod:`.upstream`, applied by the task writes. Calls
:class:`~scheduler.store.postgres._db.Db` and :mod:`.rows`;
inherited by :class:`~scheduler.store.postgres.PostgresStore`.
"""

from __future__ import annotations

import uuid

from scheduler._errors import NotFound
from scheduler.store.postgres import rows
from scheduler.store.postgres._db import Part, scope_of
from scheduler.store.protocol.workflows import WorkflowStore
from scheduler.types import Workflow, WorkflowView


class Workflows(Part, WorkflowStore):
    """Workflow inserts and views."""

    # -- workflows ----------------------------------------------------------------------
    async def create_workflow(self, workflow: Workflow) -> tuple[Workflow, bool]:
        """Insert, or return the existing workflow of the same idempotency key."""
        async with self._db.conn(workflow.tenant_id) as conn:
            row = await conn.fetchrow(
                self._q["insert_workflow"],
                workflow.id,
                workflow.tenant_id,
                workflow.name,
                workflow.idempotency_key,
                workflow.on_upstream_failure.value,
                workflow.node_count,
                workflow.created_at,
            )
            if row is not None:
                return rows.workflow(row), True
            row = await conn.fetchrow(
                self._q["workflow_by_key"], workflow.tenant_id, workflow.idempotency_key
            )
        if row is None:
            raise NotFound("workflow", workflow.idempotency_key)
        return rows.workflow(row), False

    async def get_workflow(
        self, tenant_id: uuid.UUID | None, workflow_id: uuid.UUID
    ) -> WorkflowView:
        """The workflow, its tasks and edges."""
        async with self._db.conn(scope_of(tenant_id)) as conn:
            row = await conn.fetchrow(self._q["get_workflow"], workflow_id)
            if row is None or (tenant_id is not None and row["tenant_id"] != tenant_id):
                raise NotFound("workflow", str(workflow_id))
            tasks = await conn.fetch(self._q["workflow_tasks"], workflow_id)
            edges = await conn.fetch(self._q["workflow_edges"], workflow_id)
        return WorkflowView(
            rows.workflow(row),
            tuple(rows.task(t) for t in tasks),
            tuple((e[0], e[1]) for e in edges),
        )

    async def list_workflows(self, tenant_id: uuid.UUID, limit: int) -> list[Workflow]:
        """The tenant's workflows, newest first."""
        async with self._db.conn(tenant_id) as conn:
            found = await conn.fetch(self._q["list_workflows"], tenant_id, limit)
        return [rows.workflow(r) for r in found]
