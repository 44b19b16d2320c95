"""Health: whether the loops that hold the node's promise are making progress.

Owns one :class:`Beat` per watched loop (the dispatcher, the pre-loader, and the store
writes of the completer), the verdict drawn from them every few hundred milliseconds,
and what the verdict changes: the node's serving status (a callback the composition
root points at the gRPC health service), and, in a cluster, whether the node keeps
renewing its etcd lease (``ShardMembership.yield_shards``). Also the rule the reaper
follows after a store outage (:meth:`Health.reaping_allowed`). A leaf but for the
membership it is handed; called by the dispatcher, the pre-loader, the batchers and
the reaper (their beats), and the facade (start, stop, the verdict for metrics).

A loop is *stalled* when it has had work and made no progress for
``EngineConfig.stall_after_s``: one round still running (an await that never returns),
or every attempt since the last success failing (a store that refuses). A loop that
sleeps because it has nothing to do is never stalled. A loop that dies is restarted
by :func:`scheduler._aio.supervised`; one that stops making progress is what this
catches (docs/cluster.md, "What a stalled node does").
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
from collections.abc import Awaitable, Callable

from scheduler.engine._config import EngineConfig

log = logging.getLogger("tickwheel.engine.health")

WATCHED = ("dispatcher", "preloader", "store")
"""The beats the verdict reads: the dispatch loop, the pre-load loop (claim, reap,
reconcile) and the store writes of the completer (acks, heartbeats, completions)."""


class Beat:
    """One loop's progress: when its current round began, since when its attempts have
    failed, and its last error."""

    __slots__ = ("busy_since", "failing_since", "last_error", "name", "recovered_at")

    def __init__(self, name: str) -> None:
        self.name = name
        self.busy_since: float | None = None
        """``time.monotonic()`` when the round in progress began (None: idle)."""
        self.failing_since: float | None = None
        """When the first of the failures since the last success happened."""
        self.last_error: str | None = None
        self.recovered_at = float("-inf")
        """When a success last ended a run of failures (-inf: never failed)."""

    def begin(self) -> None:
        """A round starts (a round already in progress keeps its start)."""
        if self.busy_since is None:
            self.busy_since = time.monotonic()

    def ok(self) -> None:
        """The round ended with progress (or with nothing to do)."""
        self.busy_since = None
        if self.failing_since is not None:
            self.failing_since = None
            self.last_error = None
            self.recovered_at = time.monotonic()

    def failed(self, exc: BaseException) -> None:
        """The round (or call) failed: the loop goes on, but made no progress since
        the failing round began (a round that hung until its deadline counts whole)."""
        began, self.busy_since = self.busy_since, None
        if self.failing_since is None:
            self.failing_since = time.monotonic() if began is None else began
        self.last_error = f"{type(exc).__name__}: {exc}"[:300]

    @property
    def failing(self) -> bool:
        """Whether the last attempt failed."""
        return self.failing_since is not None

    def stalled_for(self, mono: float) -> float:
        """Seconds without progress while there was work (0: making progress or idle)."""
        worst = 0.0
        if self.busy_since is not None:
            worst = mono - self.busy_since
        if self.failing_since is not None:
            worst = max(worst, mono - self.failing_since)
        return worst


class Health:
    """The beats, the verdict, and what it changes (see the module docstring)."""

    def __init__(
        self,
        config: EngineConfig,
        yield_shards: Callable[[bool], None],
    ) -> None:
        self._config = config
        self._yield_shards = yield_shards
        self.beats = {name: Beat(name) for name in WATCHED}
        self.serving = True
        """The verdict's last word: False while a watched loop is stalled."""
        self.yielding = False
        """Whether the node has stopped renewing its claim on its shards."""
        self.on_serving: Callable[[bool], Awaitable[None]] | None = None
        """Told each change of :attr:`serving` (the node sets the gRPC health status)."""
        self.stalls = 0
        """Times the verdict went from serving to stalled."""
        self.loop_stalls: collections.Counter[str] = collections.Counter()
        """Times each watched loop became stalled (``tickwheel_engine_loop_stalls_total``):
        one per stall, counted when it crosses ``stall_after_s``, even if another loop
        was stalled already."""
        self._stalled_now: frozenset[str] = frozenset()
        self.pending_writes: Callable[[], bool] = lambda: False
        """Whether writes that waited through an outage are still queued (the completer)."""
        self._grace_s = (
            config.lease_ttl_s if config.outage_grace_s is None else config.outage_grace_s
        )
        self._stop = False

    @property
    def dispatcher(self) -> Beat:
        """The dispatch loop's beat."""
        return self.beats["dispatcher"]

    @property
    def preloader(self) -> Beat:
        """The pre-load loop's beat."""
        return self.beats["preloader"]

    @property
    def store(self) -> Beat:
        """The store writes' beat: failed on every call that found no store, ok on the
        next that committed."""
        return self.beats["store"]

    def stalled(self, mono: float | None = None) -> dict[str, float]:
        """Each watched loop's seconds without progress (0 for a healthy one)."""
        now = time.monotonic() if mono is None else mono
        return {name: beat.stalled_for(now) for name, beat in self.beats.items()}

    def reaping_allowed(self, mono: float | None = None) -> bool:
        """Whether the reaper may take back expired leases now: not while the store is
        failing, not while writes that waited through the outage are still queued,
        and not until the store has answered for the grace period since the outage
        ended (time for every live worker to heartbeat again)."""
        now = time.monotonic() if mono is None else mono
        store = self.store
        if store.failing or self.pending_writes():
            return False
        return now - store.recovered_at >= self._grace_s

    async def run(self) -> None:
        """Check the beats a few times a second until cancelled."""
        every = min(0.5, self._config.stall_after_s / 4)
        while True:
            await self.check()
            await asyncio.sleep(every)

    async def check(self, mono: float | None = None) -> None:
        """Draw the verdict now and act on a change."""
        now = time.monotonic() if mono is None else mono
        cfg = self._config
        stalled = {n: s for n, s in self.stalled(now).items() if s >= cfg.stall_after_s}
        for name in sorted(stalled.keys() - self._stalled_now):
            # Each loop that stalls is named once per stall, with what it last failed on.
            self.loop_stalls[name] += 1
            log.error(
                "engine: the %s loop has made no progress for %.1f s (%s)%s",
                name,
                stalled[name],
                self.beats[name].last_error or "a round still running",
                "; reporting NOT_SERVING" if self.serving else "",
            )
        for name in sorted(self._stalled_now - stalled.keys()):
            log.warning("engine: the %s loop makes progress again", name)
        self._stalled_now = frozenset(stalled)
        serving = not stalled
        if serving != self.serving:
            self.serving = serving
            if serving:
                log.warning("engine: every loop makes progress again; serving")
            else:
                self.stalls += 1
            if self.on_serving is not None:
                await self.on_serving(serving)
        worst = max(stalled.values(), default=0.0)
        yielding = cfg.stall_yield_s > 0 and worst >= cfg.stall_yield_s
        if yielding != self.yielding:
            self.yielding = yielding
            if yielding:
                log.error(
                    "engine: stalled for %.1f s; no longer renewing the claim on its shards, "
                    "so other nodes take them",
                    worst,
                )
            else:
                log.warning("engine: stall over; claiming shards again")
            self._yield_shards(yielding)
