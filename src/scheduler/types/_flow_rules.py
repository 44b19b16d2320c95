"""Flow control rules (issue 43): a rate limit key's token bucket, a dispatch pause."""

from __future__ import annotations

import dataclasses
import uuid
from datetime import datetime

from scheduler.types._tasks import Pool

ALL_TENANTS = uuid.UUID(int=0)
"""The tenant id an all-tenants pause is stored under (the nil UUID)."""


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class RateLimitRule:
    """The token bucket of one (tenant, rate limit key): ``rate`` tokens a second, at
    most ``burst`` held."""

    tenant_id: uuid.UUID
    key: str
    rate: float
    burst: int
    updated_at: datetime


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class DispatchPause:
    """Tasks of ``tenant_id`` (:data:`ALL_TENANTS`: every tenant) whose type is
    ``task_type`` ('' : any) and pool is ``pool`` (None: any) are not dispatched."""

    tenant_id: uuid.UUID
    task_type: str = ""
    pool: Pool | None = None
    paused_at: datetime

    def covers(self, tenant_id: uuid.UUID, task_type: str, pool: Pool) -> bool:
        """Whether a task of this tenant, type and pool is held by the pause."""
        return (
            (self.tenant_id == ALL_TENANTS or self.tenant_id == tenant_id)
            and (not self.task_type or self.task_type == task_type)
            and (self.pool is None or self.pool is pool)
        )
