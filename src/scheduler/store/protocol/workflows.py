"""The workflow protocol: DAG workflows (issue 8).

Owns :class:`WorkflowStore` (part of :class:`~scheduler.store.Store`). Imports only value
types; implemented by ``scheduler.store.postgres.workflows`` and
``scheduler.store.sqlite.workflows``; called by the engine's workflow submission. What
happens to children when a parent fails is the backends' ``upstream`` module, applied by
the task writes.
"""

from __future__ import annotations

import uuid
from typing import Protocol

from scheduler.types import (
    Workflow,
    WorkflowView,
)


class WorkflowStore(Protocol):
    """Workflow records and their views (tasks and edges)."""

    async def create_workflow(self, workflow: Workflow) -> tuple[Workflow, bool]:
        """Insert, or return the tenant's workflow with the same idempotency key
        (``created`` False)."""
        ...

    async def get_workflow(
        self, tenant_id: uuid.UUID | None, workflow_id: uuid.UUID
    ) -> WorkflowView:
        """The workflow with all its tasks and edges; NotFound for other tenants."""
        ...

    async def list_workflows(self, tenant_id: uuid.UUID, limit: int) -> list[Workflow]:
        """The tenant's workflows, newest first (at most ``limit``)."""
        ...
