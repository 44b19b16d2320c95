"""What the engine needs from cluster membership: which shards this node may serve.

Contract (every implementation):

- :meth:`ShardMembership.owned` is the truth at the instant it is called. A shard is in
  it only while this node holds it AND trusts its lease (etcd: until ``lease_ttl_s -
  safety_margin_s`` after the last keep-alive that succeeded, measured from when that
  keep-alive was SENT). The engine checks it before dispatching from a shard.
- The :class:`ShardListener` is told of changes. ``on_gain`` is awaited BEFORE the
  shards appear in ``owned()``: that is where the engine bumps the shard epoch in
  PostgreSQL and loads the shard's PRELOADED tasks. ``on_loss`` is called AFTER the
  shards left ``owned()`` (a lapsed lease leaves it by the clock, the callback follows
  within one round), and before the ownership key is released to another node.
- ``start``/``stop`` follow the service contract: ``stop`` is safe before ``start`` and
  twice; a stopped membership reports nothing owned.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol


class ShardListener(Protocol):
    """Told when this node gains or loses shards (one call per batch of shards)."""

    async def on_gain(self, shards: Mapping[int, int]) -> None:
        """This node now holds ``shards`` (shard -> claim revision, which increases with
        every new claim of a shard while etcd keeps its data). Raising releases them
        again; they are claimed and offered once more in a later round."""
        ...

    async def on_loss(self, shards: frozenset[int]) -> None:
        """This node no longer serves ``shards``: drop them from memory."""
        ...


class ShardMembership(Protocol):
    """A node's view of the cluster: its id and the shards it may dispatch from."""

    @property
    def node_id(self) -> str:
        """This node's id."""
        ...

    @property
    def shard_count(self) -> int:
        """The cluster's fixed shard count."""
        ...

    def set_listener(self, listener: ShardListener | None) -> None:
        """Where gains and losses go; set it before :meth:`start`."""
        ...

    async def start(self) -> None:
        """Join the cluster (returns at once; shards arrive through the listener)."""
        ...

    async def stop(self) -> None:
        """Leave: stop trusting, tell the listener, release the shards. Safe twice."""
        ...

    def owned(self) -> frozenset[int]:
        """The shards this node may dispatch from right now."""
        ...

    @property
    def exclusive(self) -> bool:
        """True when no other node can serve this store's shards while this one runs
        (a single node, or one holding the database lease): nobody else writes work for
        its shards, so it needs neither reconcile passes nor work notices."""
        ...

    def owns(self, shard: int) -> bool:
        """Whether ``shard`` is in :meth:`owned` right now (cheaper for one shard)."""
        ...

    def members(self) -> tuple[int, Mapping[str, str]]:
        """(revision, node id -> address workers dial) of the live nodes; an empty
        address means "this server's own listen address" (filled in by the server)."""
        ...

    def yield_shards(self, on: bool) -> None:
        """``on``: stop renewing this node's claim, so the other nodes take its shards
        (the engine stalled: docs/cluster.md, "What a stalled node does"); ``off``:
        renew and claim again. A no-op where no other node could take them."""
        ...
