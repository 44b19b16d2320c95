"""A worker that reaches every node of a cluster: one stream per member.

A node pushes only the tasks of the shards it owns, and only on the streams connected
to it, so a worker with one stream serves about 1/N of a cluster's shards.
:class:`ClusterWorker` learns the live nodes from one seed address
(``WorkerService.Members``, the same list ``Welcome`` carries) and runs one
:class:`~scheduler.worker.Worker` per member: today's stream, slots, runner and drain,
unchanged on the wire, each with its own reconnect backoff (0.1 s start, full jitter,
2 s cap). Adoption of held tasks after a reconnect and the fencing rule therefore stay
per stream and per node. It re-reads the list every ``members_interval_s`` and at once
when a member's stream broke, starts a stream for a node it did not know and drains
the stream of a node that left.

Slots: one pool for every member's stream (:mod:`scheduler.worker._shared_credit`).
Each stream asks its node for ``Backlog`` reports; each freed slot is granted as
credit to the stream whose node has the most waiting work not covered by its credit
(:mod:`scheduler.worker._credit_split`), every stream keeping one credit so every node
can reach the worker. A node that does not report backlogs (an older server) gets an
even share instead (docs/cluster.md, "How workers reach shards").

A single node keeps today's worker: while the list names one node (or none answers:
an older server, a load balancer that hides them), the worker streams to the seed
alone, as :class:`~scheduler.worker.Worker` does (its address as given, so TLS names
and region fail-over are unchanged), and offers that stream every slot at its
``Hello`` (no backlog reports asked for). Once a list names two or more nodes it keeps
one stream per member, for good: the seed's stream drains in the background, its
tasks still holding their slots of the shared pool.

Metrics: every member's runner counts into the one :attr:`ClusterWorker.stats`, so the
worker's ``/metrics`` (``scheduler.metrics.worker_endpoint``) reads a whole process
the way it reads a :class:`~scheduler.worker.Worker`.

May call: ``scheduler.client`` (channel, error mapping), the generated proto and
:class:`~scheduler.worker.Worker`. Called by: applications, through
``scheduler.worker``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import math
import time
from collections.abc import Iterable, Mapping
from typing import Any

import grpc

from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from scheduler._proto.tickwheel.v1 import tickwheel_pb2_grpc as pbg
from scheduler.client._channel import open_channel, region_targets
from scheduler.client._errors import from_rpc_error
from scheduler.client._tls import TLSConfig
from scheduler.regions import RegionDirectory
from scheduler.worker._batch import Batch
from scheduler.worker._drain import DrainReport
from scheduler.worker._invoke import Handler
from scheduler.worker._shared_credit import SharedCredit
from scheduler.worker._stats import WorkerStats
from scheduler.worker._worker import Worker, _default_worker_id

_log = logging.getLogger("tickwheel.worker")
_SEED = "seed"
"""The member name of the seed when no node answered Members (an old server)."""


async def fetch_members(
    target: str, *, api_key: str, tls: TLSConfig | None = None, timeout_s: float = 5.0
) -> dict[str, str]:
    """node id -> address of the live nodes, as the node at ``target`` sees them.

    Raises the mapped gRPC error (:class:`~scheduler.Unavailable` and so on)."""
    channel = open_channel(target, tls)
    try:
        stub = pbg.WorkerServiceStub(channel)  # type: ignore[no-untyped-call]
        try:
            reply = await stub.Members(
                pb.MembersRequest(), metadata=(("x-api-key", api_key),), timeout=timeout_s
            )
        except grpc.aio.AioRpcError as exc:
            raise from_rpc_error(exc) from None
    finally:
        await channel.close(None)
    return {m.node_id: m.address for m in reply.members.members if m.address}


def split_slots(slots: int, members: Iterable[str]) -> dict[str, int]:
    """Each member's share of ``slots``: an even split, at least one each, the
    remainder to the first members (in sorted order)."""
    names = sorted(members)
    if not names:
        return {}
    base, extra = divmod(slots, len(names))
    return {name: max(1, base + (1 if i < extra else 0)) for i, name in enumerate(names)}


@dataclasses.dataclass(frozen=True, slots=True)
class MemberChange:
    """What to do after a fresh member list: streams to start and to stop, by node id."""

    start: dict[str, str]
    stop: frozenset[str]


def diff_members(running: Mapping[str, str], live: Mapping[str, str]) -> MemberChange:
    """Compare the streams running (node id -> address) with the live list: start the
    new nodes (and a node whose address changed), stop those that left."""
    start = {n: a for n, a in live.items() if running.get(n) != a}
    stop = frozenset(n for n, a in running.items() if live.get(n) != a)
    return MemberChange(start=start, stop=stop)


class ClusterWorker:
    """Runs handlers for one tenant on every node of a cluster (see the module doc).

    >>> worker = ClusterWorker("seed:50051", api_key=key, handlers={"email": send})
    >>> await worker.run()          # until shutdown() is called

    Takes :class:`~scheduler.worker.Worker`'s keyword arguments (``slots`` is the
    total over every member, Kafka mode is not offered). With ``regions`` the seeds
    are the endpoints of the region the API key names (docs/regions.md)."""

    def __init__(
        self,
        seed: str | None,
        *,
        api_key: str,
        handlers: Mapping[str, Handler | Batch],
        slots: int = 10,
        worker_id: str | None = None,
        tls: TLSConfig | None = None,
        regions: RegionDirectory | None = None,
        members_interval_s: float = 5.0,
        **worker_kwargs: Any,
    ) -> None:
        if members_interval_s <= 0:
            raise ValueError("members_interval_s must be positive")
        if slots < 1:
            raise ValueError("ClusterWorker slots must be >= 1")
        if "kafka" in worker_kwargs:
            raise ValueError("ClusterWorker streams; use Worker for Kafka mode")
        # Regions choose the cluster (the endpoints of the key's home region, tried in
        # order); members choose the nodes of that cluster this worker streams to.
        self.seeds = region_targets(seed, api_key, regions)
        self._seed = seed
        self._regions = regions
        """Where the member list is read first (``seed``, or the key's region's
        endpoints with ``regions``)."""
        self._api_key = api_key
        self._handlers = dict(handlers)
        self.slots = slots
        self.worker_id = worker_id or _default_worker_id()
        """One identity on every member's stream (leases and audit name it)."""
        self._tls = tls
        self._interval_s = members_interval_s
        self._kwargs = worker_kwargs
        self.workers: dict[str, Worker] = {}
        """The running per-member workers, by node id."""
        self._addresses: dict[str, str] = {}
        self._runs: dict[str, asyncio.Task[None]] = {}
        self._reconnects: dict[str, int] = {}
        self._draining: set[asyncio.Task[None]] = set()
        self._closing = asyncio.Event()
        self._changed = asyncio.Event()
        self.credit = SharedCredit(slots)
        """The slots shared by every member's stream (by demand: ``Backlog``)."""
        self.refreshes = 0
        """Member lists read so far (for tests and metrics)."""
        self.stats = WorkerStats()
        """Attempts and handler durations of every member's stream (``/metrics``)."""
        self._retired_reconnects = 0

    @property
    def reconnects(self) -> int:
        """Times a member's stream broke and connected again (or tried to), over every
        member this worker streamed to."""
        return self._retired_reconnects + sum(w.reconnects for w in self.workers.values())

    @property
    def members(self) -> dict[str, str]:
        """node id -> address of the members streamed to now."""
        return dict(self._addresses)

    async def run(self) -> None:
        """Stream to every member until :meth:`shutdown`; raises the first fatal error
        of a member's worker (bad API key, rejected hello)."""
        last = -math.inf
        try:
            while not self._closing.is_set():
                if self._broke() or time.monotonic() - last >= self._interval_s:
                    last = time.monotonic()
                    await self._refresh()
                failed = [t for t in self._runs.values() if t.done() and not t.cancelled()]
                for task in failed:
                    exc = task.exception()
                    if exc is not None:
                        raise exc
                await self._wait_for_change()
        finally:
            if self._closing.is_set():
                # shutdown() drains them: wait for their runs to end.
                runs = [*self._runs.values(), *self._draining]
                await asyncio.gather(*runs, return_exceptions=True)
            else:
                await self._stop_all(grace_s=0)

    async def _wait_for_change(self) -> None:
        self._changed.clear()
        waits: list[asyncio.Future[Any]] = [
            asyncio.ensure_future(self._changed.wait()),
            asyncio.ensure_future(self._closing.wait()),
            *[asyncio.ensure_future(asyncio.shield(t)) for t in self._runs.values()],
        ]
        try:
            await asyncio.wait(waits, timeout=self._poll_s(), return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waits:
                w.cancel()
            await asyncio.gather(*waits, return_exceptions=True)

    def _broke(self) -> bool:
        # A member's stream breaking shows in its reconnect count: re-read the list
        # at once (the node may have left) rather than a whole interval later.
        return any(w.reconnects != self._reconnects.get(n, 0) for n, w in self.workers.items())

    def _poll_s(self) -> float:
        return min(self._interval_s, 0.2)

    async def _refresh(self) -> None:
        live, answered = await self._read_members()
        self.refreshes += 1
        for node, worker in self.workers.items():
            self._reconnects[node] = worker.reconnects
        if len(live) == 1 and set(self._addresses) <= {_SEED}:
            # One node, and never more seen: the seed alone, as a plain Worker does
            # (named by the seed that answered; kept while it runs, whoever answers).
            live = {_SEED: self._addresses.get(_SEED, answered)}
        change = diff_members(self._addresses, live)
        for node in change.stop:
            await self._stop_one(node, grace_s=30.0)
        for node, address in change.start.items():
            if node in self.workers:
                await self._stop_one(node, grace_s=30.0)
            self._start_one(node, address)

    async def _read_members(self) -> tuple[dict[str, str], str]:
        """The live list and the target that answered it (the first seed when none
        did)."""
        # Any member we stream to can answer; the seed first, then the others.
        candidates = [
            *self.seeds,
            *(a for a in self._addresses.values() if a not in self.seeds),
        ]
        for target in candidates:
            try:
                live = await fetch_members(target, api_key=self._api_key, tls=self._tls)
            except Exception as exc:  # a node down or an old server: try the next
                _log.info("worker: members from %s: %s", target, exc)
                continue
            if live:
                return live, target
        if self._addresses:
            return dict(self._addresses), self.seeds[0]  # nobody answered: keep what runs
        # An old server or a load balancer: the seed alone.
        return {_SEED: self.seeds[0]}, self.seeds[0]

    def _start_one(self, node: str, address: str) -> None:
        # The seed alone (no member list): today's worker, region fail-over included.
        alone = node == _SEED
        worker = Worker(
            self._seed if alone else address,
            regions=self._regions if alone else None,
            api_key=self._api_key,
            handlers=self._handlers,
            slots=self.slots,  # a bound only: the shared split grants the credit
            worker_id=self.worker_id,
            tls=self._tls,
            **self._kwargs,
        )
        # Alone, nothing to share with: every slot at the Hello, no backlog reports.
        worker._share_slots(self.credit, node, backlog=not alone)
        worker._share_stats(self.stats)
        self.workers[node] = worker
        self._addresses[node] = address
        self._reconnects[node] = 0
        self._runs[node] = asyncio.create_task(worker.run(), name=f"tickwheel-member-{node}")
        if alone:
            _log.info("worker: streaming to %s alone (one node)", address)
        else:
            _log.info(
                "worker: streaming to member %s at %s (slots shared by demand)", node, address
            )

    async def _stop_one(self, node: str, *, grace_s: float) -> None:
        """Stop streaming to ``node``: its drain runs in the background, so a node
        that died (its drain waits out the grace) holds up no other member."""
        worker = self.workers.pop(node, None)
        self._addresses.pop(node, None)
        run = self._runs.pop(node, None)
        if worker is None:
            return
        self._retired_reconnects += worker.reconnects
        self._reconnects.pop(node, None)
        if node == _SEED:
            _log.info("worker: a cluster; draining the seed's stream for one per member")
        else:
            _log.info("worker: member %s left; draining its stream", node)
        worker._unshare_slots()
        task = asyncio.create_task(
            self._drain_one(worker, run, grace_s), name=f"tickwheel-member-{node}-drain"
        )
        self._draining.add(task)
        task.add_done_callback(self._draining.discard)

    @staticmethod
    async def _drain_one(worker: Worker, run: asyncio.Task[None] | None, grace_s: float) -> None:
        await worker.shutdown(grace_s)
        if run is not None:
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await run

    async def _stop_all(self, *, grace_s: float) -> None:
        for node in list(self.workers):
            await self._stop_one(node, grace_s=grace_s)
        await asyncio.gather(*self._draining, return_exceptions=True)

    @property
    def running_tasks(self) -> int:
        """Tasks held right now, over every member's stream."""
        return sum(w.running_tasks for w in self.workers.values())

    @property
    def busy_handler_threads(self) -> int:
        """Sync handlers still executing in threads (see :class:`Worker`)."""
        return sum(w.busy_handler_threads for w in self.workers.values())

    @property
    def draining(self) -> bool:
        """Whether :meth:`shutdown` has begun."""
        return self._closing.is_set()

    async def shutdown(self, grace_s: float = 30.0) -> DrainReport:
        """Drain every member's stream (see :meth:`Worker.shutdown`) and stop; the
        reports added up. Safe to call twice (a shorter grace moves the deadline)."""
        self._closing.set()
        self._changed.set()
        reports = await asyncio.gather(*(w.shutdown(grace_s) for w in self.workers.values()))
        sums = {
            f.name: sum(getattr(r, f.name) for r in reports)
            for f in dataclasses.fields(DrainReport)
        }
        return DrainReport(**sums)
