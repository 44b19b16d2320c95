"""Shard epochs on SQLite (:class:`~scheduler.store.protocol.ShardStore`).

Owns :class:`Shards`. Calls :class:`~scheduler.store.sqlite._db.Db` and :mod:`.rows`;
inherited by :class:`~scheduler.store.sqlite.SqliteStore`.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from datetime import datetime

from scheduler.store import _validate
from scheduler.store.protocol.shards import ShardStore
from scheduler.store.sqlite import rows
from scheduler.store.sqlite._db import Part
from scheduler.types import ShardClaim


class Shards(Part, ShardStore):
    """Epoch claims and their history."""

    async def claim_shards(
        self, shards: Sequence[int], owner: str, now: datetime
    ) -> dict[int, int]:
        """Raise each shard's epoch by one for ``owner``."""
        n = rows.us(_validate.aware("now", now))
        q = self._q

        def fn(c: sqlite3.Connection) -> dict[int, int]:
            out: dict[int, int] = {}
            for shard in sorted(set(shards)):
                row = c.execute(q["claim_shard"], (shard, owner, n)).fetchone()
                out[int(row["shard_id"])] = int(row["epoch"])
                c.execute(q["record_claim"], (shard, row["epoch"], owner, n))
            return out

        return await self._db.tx(fn)

    async def shard_claims(self) -> list[ShardClaim]:
        """The whole ownership history."""
        q = self._q

        def fn(c: sqlite3.Connection) -> list[ShardClaim]:
            return [
                ShardClaim(
                    int(r["shard_id"]), int(r["epoch"]), r["owner"], rows.dt(r["claimed_at"])
                )
                for r in c.execute(q["shard_claims"]).fetchall()
            ]

        return await self._db.tx(fn)
