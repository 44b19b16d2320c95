"""Which shards this node serves, and its epoch for each (a leaf: imports no part).

Owned here and nowhere else: the membership's view (owned shards), the epochs the
store gave this node when it claimed them, and the shards being gained right now
(claimed, not yet reported as owned, so their load may pass). Written by the shard
handler (``_shards.py``); read by admission, the timeline, the pre-loader, the reaper
and the dispatcher.
"""

from __future__ import annotations

from collections.abc import Mapping

from scheduler.cluster import ShardMembership


class ShardState:
    """Shard ownership as this node sees it."""

    def __init__(self, membership: ShardMembership, *, clustered: bool) -> None:
        self.membership = membership
        self.clustered = clustered
        """False: a single node that serves every shard (no filters, no epoch checks)."""
        self.shared = clustered and not getattr(membership, "exclusive", False)
        """Other nodes serve other shards of this store and write work for ours: the
        pre-loader reconciles and hears their work notices. False for a node alone on
        its database (the lease keeps others out), even though it is clustered."""
        self._epochs: dict[int, int] = {}
        self._gaining: frozenset[int] = frozenset()

    def serves(self, shard: int) -> bool:
        """Whether a task of ``shard`` may go into this node's wheel now."""
        return not self.clustered or self.membership.owns(shard)

    def owned(self) -> frozenset[int]:
        """The shards the membership says this node owns."""
        return self.membership.owned()

    def owned_or_gaining(self) -> frozenset[int]:
        """Owned shards and the ones being gained (their epoch is ours already)."""
        return self.membership.owned() | self._gaining

    def scope(self) -> list[int] | None:
        """The shards to pre-load and reap: None for all (no cluster)."""
        return None if not self.clustered else sorted(self.membership.owned())

    def epoch(self, shard: int) -> int | None:
        """This node's epoch for ``shard`` (None: not claimed, or a single node)."""
        return self._epochs.get(shard)

    def claimed(self, epochs: Mapping[int, int]) -> None:
        """The store raised these shards' epochs for this node."""
        self._epochs.update(epochs)

    def gaining(self, shards: frozenset[int]) -> None:
        """``shards`` are being loaded after a gain (empty when the load is over)."""
        self._gaining = shards

    def released(self, shards: frozenset[int]) -> None:
        """This node no longer serves ``shards``: forget their epochs."""
        for shard in shards:
            self._epochs.pop(shard, None)
