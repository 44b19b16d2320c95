"""Workflow records on SQLite (:class:`~scheduler.store.protocol.WorkflowStore`).

Owns :class:`Workflows`: ``create_workflow`` (idempotent per tenant and key) and
``get_workflow`` (the workflow, its tasks and edges). The upstream policy is
:mod:`.upstream`, applied by the task writes. Calls
:class:`~scheduler.store.sqlite._db.Db` and :mod:`.rows`;
inherited by :class:`~scheduler.store.sqlite.SqliteStore`.
"""

from __future__ import annotations

import sqlite3
import uuid

from scheduler._errors import NotFound
from scheduler.store.protocol.workflows import WorkflowStore
from scheduler.store.sqlite import rows
from scheduler.store.sqlite._db import Part
from scheduler.types import Workflow, WorkflowView


class Workflows(Part, WorkflowStore):
    """Workflow inserts and views."""

    async def create_workflow(self, workflow: Workflow) -> tuple[Workflow, bool]:
        """Insert, or return the existing workflow of the same idempotency key."""
        w = workflow
        q = self._q

        def fn(c: sqlite3.Connection) -> tuple[Workflow, bool]:
            row = c.execute(
                q["insert_workflow"],
                (
                    str(w.id),
                    str(w.tenant_id),
                    w.name,
                    w.idempotency_key,
                    w.on_upstream_failure.value,
                    w.node_count,
                    rows.us(w.created_at),
                ),
            ).fetchone()
            if row is not None:
                return rows.workflow(row), True
            row = c.execute(q["workflow_by_key"], (str(w.tenant_id), w.idempotency_key)).fetchone()
            if row is None:
                raise NotFound("workflow", w.idempotency_key)
            return rows.workflow(row), False

        return await self._db.tx(fn)

    async def get_workflow(
        self, tenant_id: uuid.UUID | None, workflow_id: uuid.UUID
    ) -> WorkflowView:
        """The workflow, its tasks and edges."""
        q = self._q

        def fn(c: sqlite3.Connection) -> WorkflowView:
            row = c.execute(q["get_workflow"], (str(workflow_id),)).fetchone()
            if row is None or (tenant_id is not None and row["tenant_id"] != str(tenant_id)):
                raise NotFound("workflow", str(workflow_id))
            tasks = c.execute(q["workflow_tasks"], (str(workflow_id),)).fetchall()
            edges = c.execute(q["workflow_edges"], (str(workflow_id),)).fetchall()
            return WorkflowView(
                rows.workflow(row),
                tuple(rows.task(t) for t in tasks),
                tuple((uuid.UUID(e[0]), uuid.UUID(e[1])) for e in edges),
            )

        return await self._db.tx(fn)

    async def list_workflows(self, tenant_id: uuid.UUID, limit: int) -> list[Workflow]:
        """The tenant's workflows, newest first."""
        q = self._q
        return await self._db.tx(
            lambda c: [
                rows.workflow(r)
                for r in c.execute(q["list_workflows"], (str(tenant_id), limit)).fetchall()
            ]
        )
