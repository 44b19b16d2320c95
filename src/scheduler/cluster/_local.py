"""Membership of a node that is alone (single node, embedded mode): it owns every shard."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from scheduler.cluster._protocol import ShardListener

_log = logging.getLogger("tickwheel.cluster")


class LocalMembership:
    """Owns all ``shard_count`` shards between :meth:`start` and :meth:`stop`."""

    def __init__(
        self,
        shard_count: int = 256,
        *,
        node_id: str = "local",
        listener: ShardListener | None = None,
    ) -> None:
        if shard_count <= 0:
            raise ValueError("shard_count must be positive")
        self._node_id = node_id
        self._shard_count = shard_count
        self._listener = listener
        self._all = frozenset(range(shard_count))
        self._owned: frozenset[int] = frozenset()
        self._started = False
        self._stopped = False

    @property
    def exclusive(self) -> bool:
        """Alone: nobody else serves these shards."""
        return True

    @property
    def node_id(self) -> str:
        """This node's id."""
        return self._node_id

    @property
    def shard_count(self) -> int:
        """The cluster's fixed shard count."""
        return self._shard_count

    def set_listener(self, listener: ShardListener | None) -> None:
        """Where gains and losses go; set it before :meth:`start`."""
        self._listener = listener

    async def start(self) -> None:
        """Take every shard (the listener's ``on_gain`` runs first, claim revision 1)."""
        if self._started or self._stopped:
            return
        self._started = True
        if self._listener is not None:
            await self._listener.on_gain(dict.fromkeys(self._all, 1))
        self._owned = self._all

    async def stop(self) -> None:
        """Give every shard up; safe before start and twice."""
        if self._stopped:
            return
        self._stopped = True
        lost, self._owned = self._owned, frozenset()
        if lost and self._listener is not None:
            try:
                await self._listener.on_loss(lost)
            except Exception:
                _log.exception("cluster: on_loss failed during stop")

    def owned(self) -> frozenset[int]:
        """Every shard while started, else none."""
        return self._owned

    def owns(self, shard: int) -> bool:
        """Whether ``shard`` is owned right now."""
        return shard in self._owned

    def members(self) -> tuple[int, Mapping[str, str]]:
        """This node alone, with no address of its own (the server fills in its own)."""
        return (1, {self._node_id: ""})

    def yield_shards(self, on: bool) -> None:
        """Nothing to yield to: a single node is the only one that serves its store."""
