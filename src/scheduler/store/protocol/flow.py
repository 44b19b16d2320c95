"""The flow control protocol (issue 43): rate limits per (tenant, key), dispatch pauses.

Owns :class:`FlowStore` (part of :class:`~scheduler.store.Store`). Imports only value
types; implemented by ``scheduler.store.postgres.flow`` and
``scheduler.store.sqlite.flow``; called by the engine's flow rules (``engine/_flow.py``),
which every node re-reads every ``flow_refresh_s``.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Protocol

from scheduler.types import DispatchPause, Pool, RateLimitRule


class FlowStore(Protocol):
    """Rate limit rules and dispatch pauses: small tables, read whole by every node."""

    async def set_rate_limit(
        self, tenant_id: uuid.UUID, key: str, rate: float, burst: int, now: datetime
    ) -> RateLimitRule:
        """Create or replace the limit of ``key`` for ``tenant_id``."""
        ...

    async def delete_rate_limit(self, tenant_id: uuid.UUID, key: str) -> bool:
        """Remove it; whether there was one."""
        ...

    async def list_rate_limits(self, tenant_id: uuid.UUID | None = None) -> list[RateLimitRule]:
        """The limits of ``tenant_id`` (None: of every tenant), by tenant and key."""
        ...

    async def pause_dispatch(
        self, tenant_id: uuid.UUID, task_type: str, pool: Pool | None, now: datetime
    ) -> DispatchPause:
        """Add a pause (``ALL_TENANTS`` for every tenant); an existing one is kept as it
        was (its ``paused_at`` too)."""
        ...

    async def resume_dispatch(
        self, tenant_id: uuid.UUID, task_type: str, pool: Pool | None
    ) -> bool:
        """Remove the pause of exactly these fields; whether there was one."""
        ...

    async def list_dispatch_pauses(self, tenant_id: uuid.UUID | None = None) -> list[DispatchPause]:
        """The pauses that apply to ``tenant_id`` (its own and the all-tenants ones);
        None: every pause."""
        ...
