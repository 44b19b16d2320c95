"""What the metrics endpoint reads from the store: queue depth and replication lag.

Owns :class:`MetricsStore` and its value types :class:`DepthRow` and
:class:`ReplicationLag`. System-wide reads (every tenant), run every
``MetricsConfig.depth_interval_s`` by ``scheduler.metrics``, never on the hot path.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import Protocol

HORIZONS: tuple[str, ...] = ("due", "minute", "hour", "later")
"""When an open task is due, relative to now: due now (or past), within the next
minute, within the next hour, later."""


@dataclasses.dataclass(frozen=True, slots=True)
class DepthRow:
    """Open tasks of one (pool, state, horizon)."""

    pool: str
    state: str
    """A non-terminal state: SCHEDULED, PRELOADED, DISPATCHED, RUNNING or RETRYING."""
    horizon: str
    """One of :data:`HORIZONS`, from the row's ``due_at``."""
    count: int
    oldest_due: datetime | None
    """The earliest ``due_at`` among them that has no unresolved dependency (None when
    every one waits on a parent)."""


@dataclasses.dataclass(frozen=True, slots=True)
class ReplicationLag:
    """What a PostgreSQL primary knows of its standbys (``pg_stat_replication``)."""

    standbys: int
    lag_s: float
    """The largest ``replay_lag`` in seconds: the time between the primary writing WAL
    and a standby reporting it replayed, as last measured. PostgreSQL shows NULL (here
    0) once a standby has caught up and no WAL is written; while replay is stuck it
    keeps the last measurement until replay moves on."""
    lag_bytes: float = 0.0
    """The largest ``pg_wal_lsn_diff(pg_current_wal_lsn(), replay_lsn)``: bytes of WAL
    written on the primary that the slowest standby has not replayed yet (0 caught
    up). Unlike ``lag_s`` it grows at once while replay is behind."""


class MetricsStore(Protocol):
    """System-wide reads for ``/metrics``."""

    async def queue_depth(self, now: datetime) -> list[DepthRow]:
        """Open tasks per (pool, state, horizon): one grouped scan of the open rows."""
        ...

    async def replication_lag(self) -> ReplicationLag | None:
        """The primary's view of its standbys; None where there is no replication
        (SQLite, or a PostgreSQL role that may not read ``pg_stat_replication``)."""
        ...
