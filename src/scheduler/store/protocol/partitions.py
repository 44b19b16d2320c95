"""The partition protocol: the store's upkeep of its day partitions.

Owns :class:`PartitionStore` (part of :class:`~scheduler.store.Store`). Imports only
value types; implemented by ``scheduler.store.postgres.partitions`` (day partitions of
``tasks``) and ``scheduler.store.sqlite.partitions`` (none: nothing to do); called by the
engine's upkeep loop.
"""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from scheduler.types import MaintenanceResult


class PartitionStore(Protocol):
    """Upkeep of the partitions of ``tasks``."""

    async def maintain(self, now: datetime) -> MaintenanceResult:
        """Create partitions ahead and detach expired ones that hold only terminal tasks
        (PostgreSQL: never deleting a task row); a no-op where there are none (SQLite)."""
        ...
