"""The schedule protocol: cron schedules, dead man's switch expectations and canaries.

Owns :class:`ScheduleStore` (part of :class:`~scheduler.store.Store`). Imports only value
types; implemented by ``scheduler.store.postgres.schedules`` and
``scheduler.store.sqlite.schedules``; called by the engine's scheduler loop, the watchdog
set-up and the canary.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from scheduler.store._facts import JobFacts
from scheduler.types import (
    Expectation,
    Schedule,
)


class ScheduleStore(Protocol):
    """Schedules, expectations and canary records."""

    async def create_schedule(self, schedule: Schedule) -> Schedule:
        """Insert; AlreadyExists when the tenant has a schedule of that name."""
        ...

    async def get_schedule(self, tenant_id: uuid.UUID | None, schedule_id: uuid.UUID) -> Schedule:
        """NotFound for other tenants."""
        ...

    async def list_schedules(self, tenant_id: uuid.UUID) -> list[Schedule]:
        """The tenant's schedules by name."""
        ...

    async def set_schedule_enabled(
        self,
        tenant_id: uuid.UUID | None,
        schedule_id: uuid.UUID,
        enabled: bool,
        next_fire_at: datetime | None,
        now: datetime,
    ) -> Schedule:
        """Pause (False) or resume (True, from ``next_fire_at``)."""
        ...

    async def delete_schedule(self, tenant_id: uuid.UUID | None, schedule_id: uuid.UUID) -> None:
        """Delete; its tasks stay (they keep ``schedule_id``)."""
        ...

    async def due_schedules(self, now: datetime, limit: int) -> list[Schedule]:
        """Enabled schedules with ``next_fire_at <= now`` or a buffered occurrence."""
        ...

    async def advance_schedule(
        self,
        schedule_id: uuid.UUID,
        expected_next: datetime | None,
        next_fire_at: datetime | None,
        last_fired_at: datetime | None,
        buffered_at: datetime | None,
        now: datetime,
    ) -> bool:
        """Compare-and-set: move ``next_fire_at`` only if it still is ``expected_next``
        (another node did not advance it first)."""
        ...

    async def active_schedule_tasks(
        self, schedule_ids: Sequence[uuid.UUID]
    ) -> dict[uuid.UUID, int]:
        """Non-terminal (and not dead-lettered) tasks per schedule."""
        ...

    async def register_expectation(self, expectation: Expectation) -> Expectation:
        """Insert or replace the tenant's expectation for ``job_id``."""
        ...

    async def list_expectations(self, tenant_id: uuid.UUID | None) -> list[Expectation]:
        """A tenant's expectations (None: all tenants)."""
        ...

    async def delete_expectation(self, tenant_id: uuid.UUID, job_id: str) -> bool:
        """Delete the tenant's expectation for ``job_id``; whether there was one."""
        ...

    async def expectation_facts(self, tenant_id: uuid.UUID | None) -> list[JobFacts]:
        """What the watchdog reads about a tenant's expectations (None: all), for the
        status ListExpectations shows (judged by the watchdog's own rule)."""
        ...

    async def record_canary(
        self,
        canary_id: uuid.UUID,
        scheduled_at: datetime,
        *,
        dispatched_at: datetime | None = None,
        completed_at: datetime | None = None,
    ) -> bool:
        """Create the canary row (idempotent) and record its dispatch / completion times.
        Returns True when the row was created by this call."""
        ...
