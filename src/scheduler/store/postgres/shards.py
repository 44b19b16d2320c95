"""Shard epochs on PostgreSQL (:class:`~scheduler.store.protocol.ShardStore`).

Owns :class:`Shards`: ``claim_shards`` (one statement; history in the append-only
``shard_claims``) and ``shard_claims``. Calls :class:`~scheduler.store.postgres._db.Db`;
inherited by :class:`~scheduler.store.postgres.PostgresStore`.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from scheduler.store import _validate
from scheduler.store.postgres._db import SYSTEM, Part
from scheduler.store.protocol.shards import ShardStore
from scheduler.types import ShardClaim


class Shards(Part, ShardStore):
    """Epoch claims and their history."""

    async def claim_shards(
        self, shards: Sequence[int], owner: str, now: datetime
    ) -> dict[int, int]:
        """Raise each shard's epoch by one for ``owner`` (one statement)."""
        _validate.aware("now", now)
        if not shards:
            return {}
        async with self._db.conn(SYSTEM) as conn:
            found = await conn.fetch(self._q["claim_shards"], sorted(set(shards)), owner, now)
        return {int(r["shard_id"]): int(r["epoch"]) for r in found}

    async def shard_claims(self) -> list[ShardClaim]:
        """The whole ownership history."""
        async with self._db.conn(SYSTEM) as conn:
            found = await conn.fetch(self._q["shard_claims"])
        return [
            ShardClaim(int(r["shard_id"]), int(r["epoch"]), r["owner"], r["claimed_at"])
            for r in found
        ]
