"""The metrics endpoint's reads on PostgreSQL (:class:`~scheduler.store.protocol.
MetricsStore`).

Owns :class:`Metrics`: ``queue_depth`` (one grouped scan of the open rows, SYSTEM scope:
row-level security would otherwise hide every tenant's rows) and ``replication_lag``
(``pg_stat_replication``). SQL in ``sql/postgres/metrics.sql``. Calls
:class:`~scheduler.store.postgres._db.Db`; inherited by the store.
"""

from __future__ import annotations

import functools
from datetime import datetime

from scheduler._errors import StoreError
from scheduler.store import _validate
from scheduler.store._sql import parse_sections, read_text
from scheduler.store.postgres._db import SYSTEM, Part
from scheduler.store.protocol.metrics import DepthRow, MetricsStore, ReplicationLag


@functools.cache
def _queries() -> dict[str, str]:
    return parse_sections(read_text("postgres", "metrics.sql"))


class Metrics(Part, MetricsStore):
    """Queue depth and replication lag."""

    async def queue_depth(self, now: datetime) -> list[DepthRow]:
        """Open tasks per (pool, state, horizon)."""
        _validate.aware("now", now)
        async with self._db.conn(SYSTEM) as conn:
            found = await conn.fetch(_queries()["queue_depth"], now)
        return [
            DepthRow(r["pool"], r["status"], r["horizon"], int(r["n"]), r["oldest"]) for r in found
        ]

    async def replication_lag(self) -> ReplicationLag | None:
        """The largest standby replay lag; None when the role may not read it."""
        try:
            async with self._db.conn(SYSTEM) as conn:
                row = await conn.fetchrow(_queries()["replication_lag"])
        except StoreError:
            return None
        if row is None:
            return None
        return ReplicationLag(
            standbys=int(row["standbys"]),
            lag_s=float(row["lag_s"]),
            lag_bytes=float(row["lag_bytes"]),
        )
