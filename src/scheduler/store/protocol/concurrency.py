"""The concurrency-key protocol: the limit of each (tenant, type)'s keys (issue 43).

Owns :class:`ConcurrencyStore` (part of :class:`~scheduler.store.Store`). Imports only
value types; implemented by ``scheduler.store.postgres.concurrency`` and
``scheduler.store.sqlite.concurrency``; called by the admin service and the CLI. The
limit itself is enforced by ``DispatchStore.mark_dispatched`` (docs/flow-control.md).
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Protocol

from scheduler.types import ConcurrencyLimit


class ConcurrencyStore(Protocol):
    """At most ``limit`` tasks of one concurrency key of a (tenant, type) run at once;
    a type without a limit set runs one task per key at a time."""

    async def set_concurrency_limit(
        self, tenant_id: uuid.UUID, type: str, limit: int | None, now: datetime
    ) -> None:
        """Set the limit of every key of ``type`` for ``tenant_id`` (1..
        ``limits.MAX_CONCURRENCY_LIMIT``; None: back to the default, 1). Takes effect at
        the next dispatch; running tasks are never stopped. NotFound for an unknown
        tenant; InvalidArgument (``limit``, ``type``) for bad input."""
        ...

    async def concurrency_limits(self, tenant_id: uuid.UUID | None) -> list[ConcurrencyLimit]:
        """The limits set (None: every tenant's), by tenant and type."""
        ...
