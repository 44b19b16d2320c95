"""PostgreSQL day partitions of ``tasks`` (:class:`~scheduler.store.protocol.PartitionStore`):
the known days, creation ahead, retention.

Owns :class:`Partitions`: the cached set of attached days (an insert creates any missing
day on demand: ``ensure_days``, called on the store by the ``tasks`` part), ``maintain``
(create ahead; detach expired partitions holding only terminal tasks, renamed
``tasks_detached_pDAY``, never deleting a task row) and ``partitions`` (the list, for
tests and operators). Calls :class:`~scheduler.store.postgres._db.Db`; inherited by
:class:`~scheduler.store.postgres.PostgresStore`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, date, datetime, timedelta

from scheduler.store import _validate
from scheduler.store._config import StoreConfig
from scheduler.store.postgres._db import SYSTEM, Db, Part
from scheduler.store.protocol.partitions import PartitionStore
from scheduler.types import MaintenanceResult

PARTITION_NAME = re.compile(r"^tasks_p(\d{8})$")


def partition_day(name: str) -> date | None:
    """The day of a ``tasks_pYYYYMMDD`` partition (None for any other name)."""
    m = PARTITION_NAME.match(name)
    return datetime.strptime(m.group(1), "%Y%m%d").date() if m else None


def utc_day(t: datetime) -> date:
    """``t``'s UTC day: the partition it lands in."""
    return t.astimezone(UTC).date()


class Partitions(Part, PartitionStore):
    """The day partitions this store knows exist."""

    def __init__(self, db: Db, q: Mapping[str, str], config: StoreConfig) -> None:
        super().__init__(db, q, config)
        self._days: set[date] = set()

    async def load_partitions(self) -> None:
        """Re-read which day partitions are attached."""
        async with self._db.conn(SYSTEM) as conn:
            found = await conn.fetch(self._q["list_partitions"])
        self._days = {d for r in found if (d := partition_day(r[0])) is not None}

    async def ensure_days(self, days: set[date]) -> list[str]:
        """Create the partitions of ``days`` that are not known yet; returns the new ones."""
        created: list[str] = []
        missing = sorted(days - self._days)
        if not missing:
            return created
        async with self._db.conn(SYSTEM) as conn:
            for day in missing:
                if await conn.fetchval(self._q["ensure_partition"], day):
                    created.append(f"tasks_p{day:%Y%m%d}")
                self._days.add(day)
        return created

    async def create_ahead(self, now: datetime) -> list[str]:
        """Today and ``partition_days_ahead`` days after it."""
        today = utc_day(now)
        ahead = self.config.partition_days_ahead
        return await self.ensure_days({today + timedelta(days=i) for i in range(ahead + 1)})

    async def partitions(self) -> list[str]:
        """Names of the attached day partitions, oldest first."""
        async with self._db.conn(SYSTEM) as conn:
            found = await conn.fetch(self._q["list_partitions"])
        return sorted(r[0] for r in found)

    async def maintain(self, now: datetime) -> MaintenanceResult:
        """Create partitions ahead; detach expired ones that hold only terminal tasks.

        Detaching never deletes task rows: the table is renamed ``tasks_detached_pDAY``
        for the operator to archive or drop. The idempotency keys of its tasks go.
        """
        _validate.aware("now", now)
        await self.load_partitions()
        created = await self.create_ahead(now)
        detached: list[str] = []
        if self.config.retention_days is not None:
            cutoff = utc_day(now) - timedelta(days=self.config.retention_days)
            for day in sorted(self._days):
                if day + timedelta(days=1) > cutoff:
                    continue
                if await self._detach_partition(day):
                    detached.append(f"tasks_p{day:%Y%m%d}")
        return MaintenanceResult(tuple(created), tuple(detached))

    async def _detach_partition(self, day: date) -> bool:
        name = f"tasks_p{day:%Y%m%d}"
        lo = datetime(day.year, day.month, day.day, tzinfo=UTC)
        async with self._db.conn(SYSTEM, tx=True) as conn:
            await conn.execute(f"LOCK TABLE {name} IN SHARE ROW EXCLUSIVE MODE")
            live = await conn.fetchval(self._q["partition_live_count"], lo, lo + timedelta(days=1))
            if live:
                return False
            await conn.execute(f"DELETE FROM task_keys WHERE task_id IN (SELECT id FROM {name})")
            await conn.execute(f"ALTER TABLE tasks DETACH PARTITION {name}")
            await conn.execute(f"ALTER TABLE {name} RENAME TO tasks_detached_p{day:%Y%m%d}")
        self._days.discard(day)
        return True
