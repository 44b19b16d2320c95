"""Partition upkeep on SQLite (:class:`~scheduler.store.protocol.PartitionStore`): none.

Owns :class:`Partitions`, whose ``maintain`` checks its argument and does nothing: the
embedded store keeps ``tasks`` in one table (``scheduled_at`` is kept for the protocol's
keys). Inherited by :class:`~scheduler.store.sqlite.SqliteStore`.
"""

from __future__ import annotations

from datetime import datetime

from scheduler.store import _validate
from scheduler.store.protocol.partitions import PartitionStore
from scheduler.store.sqlite._db import Part
from scheduler.types import MaintenanceResult


class Partitions(Part, PartitionStore):
    """No partitions."""

    async def maintain(self, now: datetime) -> MaintenanceResult:
        """Nothing to do: SQLite has no partitions."""
        _validate.aware("now", now)
        return MaintenanceResult()
