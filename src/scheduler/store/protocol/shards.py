"""The shard protocol: shard epochs and the claim history (scale-out).

Owns :class:`ShardStore` (part of :class:`~scheduler.store.Store`). Imports only value
types; implemented by ``scheduler.store.postgres.shards`` and
``scheduler.store.sqlite.shards``; called by the engine's shard gains.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from scheduler.types import (
    ShardClaim,
)


class ShardStore(Protocol):
    """Shard epochs: a node that takes a shard raises its epoch."""

    async def claim_shards(
        self, shards: Sequence[int], owner: str, now: datetime
    ) -> dict[int, int]:
        """A node took these shards: each shard's epoch rises by one (recorded with its
        owner in the append-only ``shard_claims``). Returns shard -> new epoch."""
        ...

    async def shard_claims(self) -> list[ShardClaim]:
        """Every (shard, epoch, owner, when) claimed, for audits and tests."""
        ...
