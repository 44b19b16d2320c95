"""The metrics endpoint's reads on SQLite (:class:`~scheduler.store.protocol.
MetricsStore`).

Owns :class:`Metrics`: ``queue_depth`` (one grouped scan of the open rows) and
``replication_lag`` (always None: SQLite has no standby). SQL in
``sql/sqlite/metrics.sql``. Calls :class:`~scheduler.store.sqlite._db.Db` and
:mod:`.rows`; inherited by the store.
"""

from __future__ import annotations

import functools
import sqlite3
from datetime import datetime

from scheduler.store import _validate
from scheduler.store._sql import parse_sections, read_text
from scheduler.store.protocol.metrics import DepthRow, MetricsStore, ReplicationLag
from scheduler.store.sqlite import rows
from scheduler.store.sqlite._db import Part


@functools.cache
def _queries() -> dict[str, str]:
    return parse_sections(read_text("sqlite", "metrics.sql"))


class Metrics(Part, MetricsStore):
    """Queue depth (and no replication)."""

    async def queue_depth(self, now: datetime) -> list[DepthRow]:
        """Open tasks per (pool, state, horizon)."""
        n = rows.us(_validate.aware("now", now))
        sql = _queries()["queue_depth"]

        def fn(c: sqlite3.Connection) -> list[DepthRow]:
            return [
                DepthRow(
                    r["pool"],
                    r["status"],
                    r["horizon"],
                    int(r["n"]),
                    None if r["oldest"] is None else rows.dt(r["oldest"]),
                )
                for r in c.execute(sql, (n,)).fetchall()
            ]

        return await self._db.tx(fn)

    async def replication_lag(self) -> ReplicationLag | None:
        """SQLite has no standby: None."""
        return None
