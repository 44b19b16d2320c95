"""The pre-loader: brings PRELOADED work of this node's shards into the timeline.

Owns the one background loop that runs a claim pass (SCHEDULED due within the
look-ahead, RETRYING due within about one pass -> PRELOADED), the reaper, the index
round (an owned shard whose Redis index was lost is rebuilt from the store) and, in a
cluster, the reconcile (PRELOADED rows other nodes wrote for our shards), and the loop
that hears other nodes' work notices. Also loads whole shards (on a gain: from the
index when there is one, then reconciled
from the store) and reloads released tasks. Calls the store, the timeline, the index
mirror, the reaper and the shard state. Called by the facade (start, wake, reconcile),
the shard handler (load on a gain) and the completer (reload after a release).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta

from scheduler._aio import Background, wait_event
from scheduler._errors import NotFound
from scheduler.engine._config import EngineConfig
from scheduler.engine._health import Beat
from scheduler.engine._index_mirror import IndexMirror
from scheduler.engine._leases import Reaper
from scheduler.engine._shard_state import ShardState
from scheduler.engine._timeline import Timeline, preloaded
from scheduler.index import IndexUnavailable
from scheduler.states import TaskState
from scheduler.store import MoveCallback, Store, StoreUnavailable
from scheduler.types import Preloaded, Release, TaskKey

log = logging.getLogger("tickwheel.engine")

OUTAGE_RETRY_S = 0.25
"""While its cycles fail for want of the store, the pre-loader tries again this often
rather than once an interval: the first cycle after PostgreSQL answers again claims,
reaps and reconciles within this (a try that finds no server costs one refused
connect)."""
NOTICE_RETRY_S = 1.0
"""How soon the work-notice listener tries to listen again after it could not."""
RETRY_LEAD_S = 0.5
"""A RETRYING task waits out its backoff as RETRYING (brief §3: RETRYING -> PRELOADED
when the backoff has elapsed); a claim pass takes it into the wheel once its retry
time is within one pre-load interval plus this lead, so it is in the wheel before it
is due whatever the phase of the loop."""


class Preloader:
    """Claim, reap and reconcile; load shards; reload released tasks."""

    def __init__(
        self,
        store: Store,
        config: EngineConfig,
        now: Callable[[], datetime],
        shards: ShardState,
        timeline: Timeline,
        mirror: IndexMirror,
        background: Background,
        beat: Beat | None = None,
    ) -> None:
        self._store = store
        self._config = config
        self._now = now
        self._shards = shards
        self._timeline = timeline
        self._mirror = mirror
        self._background = background
        self._beat = beat or Beat("preloader")
        self._reaper: Reaper | None = None
        self._wake = asyncio.Event()
        self._reconcile_at = 0.0
        self._reconciled_from: datetime | None = None  # start of the last reconcile
        self._full_reconcile_at = 0.0
        self._index_check_at = 0.0
        self.stopping = False
        """Set while the engine stops: notices are no longer acted on."""
        self.on_move: MoveCallback | None = None
        """Set by the engine: a debounced task's due time moved (a move notice)."""

    def use_reaper(self, reaper: Reaper) -> None:
        """The reaper this loop runs (it needs the sessions, built after this)."""
        self._reaper = reaper

    def wake(self) -> None:
        """Run a pass now."""
        self._wake.set()

    def reconcile_soon(self) -> None:
        """Run a pass with a reconcile now (in a cluster)."""
        self._reconcile_at = 0.0
        self._wake.set()

    def _horizon(self) -> datetime:
        return self._now() + timedelta(seconds=self._config.lookahead_s)

    # -- the loop ------------------------------------------------------------------------
    async def run(self) -> None:
        """Claim, reap, reconcile; then wait for a wake or the interval."""
        while True:
            # Cleared before the pass, so a wake-up that arrives during it (a work
            # notice for rows the pass's claim did not see yet) runs another pass.
            self._wake.clear()
            self._beat.begin()
            wait_s = self._config.preload_interval_s
            try:
                await self._preload_once()
                if self._reaper is not None:
                    await self._reaper.reclaim_once()
                if self._shards.shared and time.monotonic() >= self._reconcile_at:
                    await self.reconcile()
                if self._mirror.enabled and time.monotonic() >= self._index_check_at:
                    await self.check_index()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if not isinstance(exc, StoreUnavailable):
                    log.exception("pre-load cycle failed; retrying next interval")
                else:
                    if not self._beat.failing:  # once per outage, without the traceback
                        log.warning("pre-load cycle failed (%s); retrying until it is back", exc)
                    wait_s = min(wait_s, OUTAGE_RETRY_S)
                self._beat.failed(exc)
            else:
                self._beat.ok()
            await wait_event(self._wake, wait_s)

    async def _preload_once(self) -> None:
        horizon = self._horizon()
        scope = self._shards.scope()
        if scope == []:
            return  # owns nothing (yet)
        while True:
            now = self._now()
            retry_horizon = now + timedelta(seconds=self._config.preload_interval_s + RETRY_LEAD_S)
            batch = await self._store.claim_preload(
                scope, horizon, self._config.preload_batch, now, min(retry_horizon, horizon)
            )
            self._timeline.add(batch)
            if len(batch) < self._config.preload_batch:
                return

    async def reconcile(self, *, full: bool = False) -> None:
        """PRELOADED rows written by other nodes for our shards (a release, a DAG child,
        a row an old owner wrote) reach our wheel here.

        Only rows changed since the previous reconcile began (less the clock skew
        allowance) are read; every ``full_reconcile_interval_s`` (or with ``full``) all
        of them are.
        """
        if full:
            self._full_reconcile_at = 0.0
        mono = time.monotonic()
        self._reconcile_at = mono + self._config.reconcile_interval_s
        started = self._now()
        since = self._reconciled_from
        if since is not None and mono < self._full_reconcile_at:
            since -= timedelta(seconds=self._config.reconcile_skew_s)
        else:
            since = None
            self._full_reconcile_at = mono + self._config.full_reconcile_interval_s
        shards = sorted(self._shards.owned())
        if shards:
            await self.load_from_store(shards, rebuild_index=False, changed_since=since)
        self._reconciled_from = started

    async def check_index(self) -> None:
        """The index round: rebuild from the store, in the background, every owned
        shard whose Redis index was lost (a FLUSHALL, a Redis restart), not only when
        another node takes it over. Meanwhile nothing spills into it and a spilled
        task's shard is reloaded into the wheel (the dispatcher's fallback)."""
        self._index_check_at = time.monotonic() + self._config.index_check_interval_s
        lost = await self._mirror.find_lost(sorted(self._shards.owned()))
        if lost:
            self._background.spawn(self._rebuild_lost(lost), "index-rebuild")

    async def _rebuild_lost(self, shards: Sequence[int]) -> None:
        try:
            await self.load_from_store(shards, rebuild_index=True)
        except Exception:
            self._mirror.rebuild_failed(shards)
            raise

    # -- work notices (a cluster) ----------------------------------------------------------
    async def hear_notices(self) -> None:
        """In a cluster: hear other nodes' writes that make work for our shards (a task
        submitted through them, a workflow child they released), so it reaches our wheel
        in milliseconds instead of at the next pre-load or reconcile. Those passes stay
        the safety net: a lost notice, or a lost connection, costs latency only."""
        while True:
            try:
                notices = await self._store.listen_work(self._on_work_notice, self._on_move)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("work notices unavailable (%s); retrying in %g s", exc, NOTICE_RETRY_S)
                await asyncio.sleep(NOTICE_RETRY_S)
                continue
            if notices is None:
                return  # the store has no channel: nothing to hear
            try:
                await notices.wait_closed()
            finally:
                await notices.close()
            log.warning("work notice connection lost; reconnecting")
            # Whatever was said meanwhile was not heard: look now.
            self._reconcile_at = 0.0
            self._wake.set()
            await asyncio.sleep(1.0)

    def _on_move(self, shard: int, task_id: uuid.UUID, due_us: int) -> None:
        if not self.stopping and self.on_move is not None:
            self.on_move(shard, task_id, due_us)

    def _on_work_notice(self, shards: frozenset[int], reconcile: bool) -> None:
        if self.stopping or not self._shards.owned() & shards:
            return
        if reconcile:
            self._reconcile_at = 0.0
        self._wake.set()

    # -- whole shards --------------------------------------------------------------------
    async def load_shards(self, shards: Sequence[int]) -> None:
        """Load the PRELOADED tasks of ``shards`` into the wheel (after a gain).

        From the Redis index when there is one (fast), then always reconciled from the
        store in the background: an old owner may have died between its commit and its
        index write. Without an index, or when it fails, from the store at once.
        """
        horizon = self._horizon()
        if self._mirror.enabled:
            try:
                loaded = await self._mirror.load(shards)
                for items in loaded:
                    self._timeline.add([p for p in items if p.due_at <= horizon])
            except IndexUnavailable as exc:
                log.warning("index unavailable (%s); loading shards from the store", exc)
            else:
                self._background.spawn(
                    self.load_from_store(shards, rebuild_index=False), "reconcile"
                )
                return
        await self.load_from_store(shards, rebuild_index=self._mirror.enabled)

    def reload_shard(self, shard: int) -> None:
        """The index lost ``shard``'s spilled tasks: load it from the store into the wheel
        (over its cap if need be), in the background. Latency, never a lost task."""
        self._background.spawn(
            self.load_from_store([shard], rebuild_index=False, spill=False), "index-fallback"
        )

    async def load_from_store(
        self,
        shards: Sequence[int],
        *,
        rebuild_index: bool,
        spill: bool = True,
        changed_since: datetime | None = None,
    ) -> None:
        """Load ``shards``' PRELOADED rows into the wheel; the index is rebuilt from
        them in the background (never on the gain path)."""
        horizon = self._horizon()
        every = len(shards) >= self._config.shard_count
        scope = None if not self._shards.clustered and every else list(shards)
        per_shard: dict[int, list[Preloaded]] = {s: [] for s in shards}
        # Packed pages go straight into the task table and the wheel, no object per task;
        # only a rebuild of the index or a spill over the cap needs the tasks unpacked.
        packed = self._timeline.can_add_packed(index=rebuild_index, spill=spill)
        after: TaskKey | None = None
        while True:
            page = await self._store.load_preloaded_packed(
                scope, horizon, self._config.load_batch, after, changed_since
            )
            if packed:
                self._timeline.add_packed(page)
            else:
                batch = page.unpack()
                self._timeline.add(batch, index=False, spill=spill)
                if rebuild_index:
                    for p in batch:
                        if (items := per_shard.get(p.shard_id)) is not None:
                            items.append(p)
            if page.count < self._config.load_batch:
                break
            after = page.last
        if rebuild_index:
            self._mirror.rebuild(per_shard)

    async def reload(self, items: Sequence[Release]) -> None:
        """Released tasks are PRELOADED again: back into the wheel, due now at the
        latest."""
        now = self._now()
        reloaded = []
        for r in items:
            try:
                task = await self._store.get_task(None, r.key.id)
            except NotFound:
                continue
            if task.status is TaskState.PRELOADED:
                reloaded.append(preloaded(task, min(task.due_at, now)))
        self._timeline.add(reloaded)
