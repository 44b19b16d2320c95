"""Membership of a node alone on its database, guarded by the database lease.

:class:`LeasedMembership` owns every shard while it holds its :class:`NodeLease`
(``_lease.py``) and none while it does not. When the lease is lost (the lock
connection died or stopped answering) it empties :meth:`owned` at once, tells the
listener (``on_loss``), logs a WARNING and reports through ``on_change`` (the node sets
its gRPC health to NOT_SERVING); then it tries to take the lease back every
``retry_interval_s`` (the first time after one interval) and, once it has it, gains
every shard again (``on_gain``: the epochs rise, so anything dispatched under the old
epochs is refused) and reports serving. Without the lease it never claims a shard.

Calls the lease and the listener (the engine); built by the composition root
(``scheduler.node``) for ``serve`` without ``--etcd`` and handed to the engine as its
membership. Satisfies :class:`~scheduler.cluster.ShardMembership`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping

from scheduler._aio import cancel_and_wait
from scheduler.cluster._lease import LeaseHeld, NodeLease
from scheduler.cluster._protocol import ShardListener

_log = logging.getLogger("tickwheel.cluster")

LeaseCallback = Callable[[bool], Awaitable[None]]
"""Told ``False`` when the node lost its lease and its shards, ``True`` when it has them
back."""


class LeasedMembership:
    """Every shard while the lease is held; none without it."""

    def __init__(
        self,
        lease: NodeLease,
        shard_count: int = 256,
        *,
        node_id: str = "local",
        retry_interval_s: float = 1.0,
        on_change: LeaseCallback | None = None,
    ) -> None:
        if shard_count <= 0:
            raise ValueError("shard_count must be positive")
        if retry_interval_s <= 0:
            raise ValueError("retry_interval_s must be positive")
        self._lease = lease
        self._node_id = node_id
        self._shard_count = shard_count
        self._retry_s = retry_interval_s
        self._on_change = on_change
        self._listener: ShardListener | None = None
        self._all = frozenset(range(shard_count))
        self._owned: frozenset[int] = frozenset()
        self._watch: asyncio.Task[None] | None = None
        self._started = False
        self._stopped = False
        self.losses = 0
        """How many times the lease was lost (a probe for operators and tests)."""
        self.regains = 0
        """How many times it was taken back after a loss."""

    @property
    def exclusive(self) -> bool:
        """The database lease keeps every other node out."""
        return True

    @property
    def node_id(self) -> str:
        """This node's id."""
        return self._node_id

    @property
    def shard_count(self) -> int:
        """The cluster's fixed shard count."""
        return self._shard_count

    @property
    def lease(self) -> NodeLease:
        """The lease that guards the shards."""
        return self._lease

    def set_listener(self, listener: ShardListener | None) -> None:
        """Where gains and losses go; set it before :meth:`start`."""
        self._listener = listener

    def set_on_change(self, on_change: LeaseCallback | None) -> None:
        """Who hears of a lost or regained lease (the node's health status)."""
        self._on_change = on_change

    async def start(self) -> None:
        """Take the lease (raising :class:`LeaseHeld` when another node has it), gain
        every shard and watch the lease."""
        if self._started or self._stopped:
            return
        await self._lease.acquire()
        self._started = True
        await self._gain()
        self._watch = asyncio.create_task(self._watch_lease(), name="tickwheel-node-lease")

    async def stop(self) -> None:
        """Give every shard up and release the lease; safe before start and twice."""
        if self._stopped:
            return
        self._stopped = True
        watch, self._watch = self._watch, None
        await cancel_and_wait([watch])
        try:
            await self._lose()
        except Exception:
            _log.exception("cluster: on_loss failed during stop")
        await self._lease.release()

    def owned(self) -> frozenset[int]:
        """Every shard while the lease is held, else none."""
        return self._owned

    def owns(self, shard: int) -> bool:
        """Whether ``shard`` is owned right now."""
        return shard in self._owned

    def members(self) -> tuple[int, Mapping[str, str]]:
        """This node alone (the only one the lease lets serve), address filled in by
        the server."""
        return (1, {self._node_id: ""})

    def yield_shards(self, on: bool) -> None:
        """Nothing to yield to: the database lease lets no second node serve the store
        while this one runs (a node cut off from the store loses the lease with its
        connection)."""

    async def _gain(self) -> None:
        if self._listener is not None:
            await self._listener.on_gain(dict.fromkeys(self._all, 1))
        self._owned = self._all

    async def _lose(self) -> None:
        lost, self._owned = self._owned, frozenset()
        await self._tell_loss(lost)

    async def _tell_loss(self, lost: frozenset[int]) -> None:
        if lost and self._listener is not None:
            await self._listener.on_loss(lost)

    async def _tell(self, serving: bool) -> None:
        if self._on_change is None:
            return
        try:
            await self._on_change(serving)
        except Exception:
            _log.exception("cluster: lease change callback failed")

    async def _watch_lease(self) -> None:
        while True:
            await self._lease.wait_lost()
            self.losses += 1
            lost, self._owned = self._owned, frozenset()  # stop dispatching first
            _log.warning(
                "lost the database lease: gave up all %d shards; dispatching nothing "
                "until the lease is back",
                self._shard_count,
            )
            try:
                await self._tell_loss(lost)
            except Exception:
                _log.exception("cluster: on_loss failed after losing the lease")
            await self._tell(False)
            await self._regain()

    async def _regain(self) -> None:
        told_held = False
        while True:
            # Not at once: whatever cut the connection (a restart, a failover, an
            # operator) gets a moment to finish.
            await asyncio.sleep(self._retry_s)
            try:
                await self._lease.acquire()
                await self._gain()
            except LeaseHeld as exc:
                if not told_held:
                    _log.warning("cannot take the database lease back: %s", exc.holder)
                    told_held = True
            except Exception as exc:
                await self._lease.release()
                _log.info("taking the database lease back failed (%r); retrying", exc)
            else:
                self.regains += 1
                _log.warning("took the database lease back: serving all %d shards", len(self._all))
                await self._tell(True)
                return
