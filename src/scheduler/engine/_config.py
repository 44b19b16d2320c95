"""Engine configuration: one frozen dataclass, units in the field names."""

from __future__ import annotations

import dataclasses
import math

from scheduler.limits import MAX_SUBMIT_BATCH
from scheduler.regions import DEFAULT_REGION, REGION_NAME
from scheduler.types import Pool


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class SlotReserve:
    """Free slots every worker stream keeps idle for ``pool`` (docs/flow-control.md).

    A task of a pool after ``pool`` (standard or bulk after critical, bulk after
    standard) is matched to a worker stream only while the stream has more free slots
    than the reserve, so a task of ``pool`` that falls due finds a free slot at once,
    however long the other pools' tasks run. The reserve is ``slots``, or ``share`` of
    the worker's slots rounded up, whichever is larger, and always leaves the other
    pools at least one slot of a worker that runs them. It applies only to workers
    that run ``pool``.
    """

    pool: Pool
    slots: int = 0
    """Free slots kept, whatever the worker's size."""
    share: float = 0.0
    """Share of the worker's slots kept free (0 <= share < 1), rounded up."""

    def __post_init__(self) -> None:
        if self.pool is Pool.BULK:
            raise ValueError("SlotReserve.pool: no pool comes after bulk to keep slots from")
        if self.slots < 0:
            raise ValueError("SlotReserve.slots must be >= 0")
        if not 0.0 <= self.share < 1.0:
            raise ValueError("SlotReserve.share must be >= 0 and < 1")

    def of(self, worker_slots: int) -> int:
        """Free slots kept on a worker of ``worker_slots`` slots."""
        if worker_slots <= 1:
            return 0
        # 1e-9: a share of 0.1 of 20 slots is 2, not 3 (0.1 * 20 == 2.0000000000000004).
        kept = max(self.slots, math.ceil(self.share * worker_slots - 1e-9))
        return min(kept, worker_slots - 1)

    @classmethod
    def parse(cls, text: str) -> tuple[SlotReserve, ...]:
        """``"critical=10%,standard=2"``: a share (``%``) or a number of slots per pool
        (the ``--reserve`` flag); ValueError naming what is wrong."""
        out: dict[Pool, SlotReserve] = {}
        for item in (part.strip() for part in text.split(",")):
            if not item:
                continue
            name, sep, value = item.partition("=")
            try:
                pool = Pool(name.strip().lower())
            except ValueError:
                raise ValueError(f"{item!r}: expected POOL=SLOTS or POOL=PERCENT%") from None
            value = value.strip()
            if not sep or not value:
                raise ValueError(f"{item!r}: expected POOL=SLOTS or POOL=PERCENT%")
            if pool in out:
                raise ValueError(f"{item!r}: pool {pool.value} given twice")
            try:
                if value.endswith("%"):
                    out[pool] = cls(pool=pool, share=float(value[:-1]) / 100.0)
                else:
                    out[pool] = cls(pool=pool, slots=int(value))
            except ValueError as exc:
                raise ValueError(f"{item!r}: {exc}") from None
        return tuple(out.values())


_POOL_RANK = {Pool.CRITICAL: 0, Pool.STANDARD: 1, Pool.BULK: 2}
"""A pool's place in line for a free slot (``_ready.POOL_ORDER``)."""


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class EngineConfig:
    """How the scheduling engine behaves. Validated on construction."""

    lookahead_s: float = 3600.0
    """Pre-load tasks due within this window into the wheel (the seed's T - 60 min)."""
    preload_interval_s: float = 1.0
    """How often the pre-loader and the lease reaper look at the store."""
    preload_batch: int = 5000
    """Rows claimed per pre-load statement."""
    load_batch: int = 50_000
    """Rows per page of a whole load of PRELOADED rows (recovery at start, a shard
    takeover, a reconcile): read packed, so a page costs a few objects, not one per row."""
    lease_ttl_s: float = 30.0
    """Lease granted at dispatch and extended by each heartbeat."""
    ack_timeout_s: float = 5.0
    """A task pushed to an ack-first worker stream and not acked within this long goes
    back (DISPATCHED-only in the store, so an ack that won the race keeps it) and the
    stream gets nothing more until it shows life: a frozen worker holds a due task
    this long, not a whole lease. Its late ack is refused, so it never runs it.
    It is also the lease such a dispatch commits (:attr:`dispatch_lease_s`), so the
    tasks a node pushed before it died go back this long after they came due, not a
    whole lease later. Streams that start on delivery wait out the lease as before.
    0: off."""
    orphan_grace_s: float = 2.0
    """A worker stream that broke on the worker's side (the worker vanished, froze past
    the server's keepalive, or lost its network) leaves its RUNNING tasks to their
    worker this long: a worker that reconnects within it takes them up again (its
    heartbeat on the new stream), else their leases end and the reaper takes them back
    (another attempt), instead of at the end of a whole lease. 0: at once."""
    heartbeat_interval_s: float = 10.0
    """Interval suggested to workers (a third of the lease by default)."""
    dispatch_lead_ms: int = 50
    """Commit the dispatch this long before the due time, deliver at the due tick
    (brief §12: commit ahead, deliver on time)."""
    dispatch_lead_max_ms: int = 1000
    """Upper bound of the adaptive lead (it follows recent commit times)."""
    push_ahead_ms: int = 20
    """Push a committed task this long before its due time at most (two thirds of it at
    least: one wake-up pushes every task whose window opened) to a worker stream that
    holds early pushes (``Hello.early_ms``, both SDKs' default; the lesser of the
    two), with the time left to its due instant (``Assignment.start_in_us``): the push,
    the ack and its answer then happen before the due instant, and only the worker's
    own timer after it (issue 41: they were half of a flat stream's start lateness).
    The dispatch lead grows by as much, so the commit lands first. Streams that do not
    hold are pushed at the due instant as before. 0: every push at the due instant."""
    dispatch_window_ms: int = 50
    """A dispatch round starts when the earliest task is within the lead of its due
    time and takes every task due up to this much later too, so rounds come at most
    about once per window and a steady trickle is committed in batches, not one
    commit (and quota call, and index removal) per task. Delivery stays at each
    task's own due tick. 0: a round per due tick."""
    max_batch: int = 1000
    """Most tasks per batched store write."""
    ack_linger_ms: int = 0
    """0: a worker's ack is answered once written (its own batched write). Above 0
    (``tickwheel serve`` sets 500): the ack of a task the stream was given, under the
    token it was given, is answered at once and written up to this long after it
    arrived, together with the others; a completion of the task that comes meanwhile
    writes the ack with it (one statement, DISPATCHED -> RUNNING -> COMPLETED, both
    audit rows), so a short task's ack costs no write of its own."""
    complete_linger_ms: int = 10
    """How long a worker's completion waits for others before the batched write (the
    oldest queued one this long at most; a full ``max_batch`` goes at once). In a steady
    stream completions arrive a few at a time, and each write is a store round trip and
    a transaction; this gathers them into one write every few milliseconds (issue 41).
    The worker's answer, and the slot it frees, come this much later. 0: each write
    goes as soon as the one before it is done."""
    dispatch_batch: int = 250
    """Most tasks per dispatch commit while the dispatcher commits ahead of the lead.
    A round runs on the event loop that also delivers, so a smaller one delays the
    deliveries due meanwhile less. Once a round's tasks were all due within the lead
    when it committed (a burst, a backlog, commits slower than the harvest window),
    rounds take up to ``max_batch``: smaller ones would fall behind the due times, and
    larger commits catch up sooner with less CPU per task."""
    retry_base_s: float = 1.0
    """First retry backoff; doubles per attempt."""
    retry_max_s: float = 300.0
    """Backoff ceiling."""
    shard_count: int = 256
    """Fixed number of shards for the cluster."""
    jitter_window_s: int = 120
    """Half-width of the symmetric jitter window."""
    max_submit_batch: int = MAX_SUBMIT_BATCH
    """Most tasks in one SubmitTasks call (RESOURCE_EXHAUSTED over it)."""
    tick_ms: int = 1
    """Timing wheel tick."""
    throttle_retry_s: float = 0.02
    """How soon work held back by a tenant quota is offered again."""
    concurrency_recheck_s: float = 0.5
    """How often the keys whose tasks the store held back (concurrency keys at their
    limit) are tried again: the bound on how late a slot freed by another node, or by
    a task this node did not dispatch, is used (a slot freed on this node is used at
    once)."""
    tenant_refresh_s: float = 10.0
    flow_refresh_s: float = 5.0
    """How often every node re-reads the rate limits and dispatch pauses (issue 43)
    from the store: a change made through another node applies here within this
    (the node that took the call applies it at once)."""
    """How long a node trusts a tenant's cached tier and quotas."""
    wheel_max_timers: int = 0
    """Most timers the wheel holds (0: no cap). Beyond it, with a Redis index, tasks
    wait in the index's sorted sets and are popped when due (brief §2)."""
    index_poll_ms: int = 20
    """How often tasks waiting in the index are looked for."""
    index_flush_ms: int = 50
    """How long removals from the index mirror gather before one pipelined flush."""
    index_check_interval_s: float = 1.0
    """How often a node checks that its shards' Redis index is still there (one
    pipelined GET of each owned shard's seeded marker, on the pre-load loop); a shard
    found lost (FLUSHALL, a Redis restart, an eviction) is rebuilt from the store."""
    reconcile_interval_s: float = 2.0
    """In a cluster: how often a node re-reads its shards' PRELOADED rows, to pick up
    those other nodes wrote (releases, DAG children, submissions routed elsewhere).
    It reads only rows changed since the previous read (less ``reconcile_skew_s``)."""
    reconcile_skew_s: float = 2.0
    """How far back before the previous reconcile the next one looks: covers clocks of
    two nodes that disagree (``updated_at`` is the writer's clock) and slow commits."""
    full_reconcile_interval_s: float = 60.0
    """In a cluster: how often the reconcile reads every PRELOADED row of its shards,
    whatever its ``updated_at`` (the safety net under the incremental reads)."""
    count_cache_ttl_s: float = 5.0
    """CountTasks answers from a cache keyed by (tenant, filter): a count younger than
    this is returned as is (0: no cache, every call counts)."""
    count_cache_max_age_s: float = 60.0
    """A cached count older than the TTL but younger than this is returned at once while
    one refresh runs in the background; older, the caller waits for a fresh count."""
    count_cache_keys: int = 1000
    """Most (tenant, filter) keys the count cache holds (least recently used dropped)."""
    auth_cache_s: float = 5.0
    """How long a node trusts a verified API key before asking the store again."""
    critical_reserved_slots: int = 500
    """Worker slots of this node's streams kept for critical tasks while any waits
    (the seed's 500): standard and bulk may not grow into them then."""
    bulk_max_slots: int = 150
    """Most bulk tasks on this node's workers at once (the seed's 150)."""
    reserves: tuple[SlotReserve, ...] = (SlotReserve(pool=Pool.CRITICAL, share=0.10),)
    """Free slots each worker stream keeps idle for a pool (by default 10% of each
    worker's slots for critical work): the bound on a critical task's wait that does
    not depend on how long bulk tasks run (docs/flow-control.md, "Reservation"). A
    pool's reserve is held only while that pool has work in sight (see
    ``reserve_linger_s``), so a deployment that schedules no critical work keeps no
    slot idle."""
    reserve_linger_s: float | None = 300.0
    """A pool's reserve is held while a task of that pool waits in this node's ready
    queues, or one was due (or will be: it is in the wheel) less than this long ago.
    None: held at all times."""
    tier_weights: tuple[tuple[str, int], ...] = (("STANDARD", 1), ("ENTERPRISE", 4), ("SYSTEM", 8))
    """Fair-share weight of a tenant by tier inside a pool."""

    max_workflow_nodes: int = 20_000
    """Most nodes in one SubmitWorkflow (fan-out/fan-in of 10,000 fit)."""
    max_workflow_edges: int = 100_000
    """Most edges in one SubmitWorkflow."""
    schedule_interval_s: float = 1.0
    """How often the schedule loop looks for due occurrences."""
    schedule_lead_s: float = 2.0
    """Occurrences are inserted this long ahead so they wait in the wheel; the overlap
    policy is judged at that moment."""
    schedule_batch: int = 200
    """Schedules handled per pass."""
    max_occurrences_per_pass: int = 1000
    """Catch-up bound: most occurrences one schedule turns into tasks in one pass."""
    wait_recheck_s: float = 1.0
    """A WaitTask call re-reads its task this often besides the settle events of this
    node (tasks settled by another node, the reaper or an upstream policy)."""
    region: str = DEFAULT_REGION
    """The region this node belongs to (docs/regions.md): the home of the tenants it
    creates, and the only home whose tenants it admits writes for."""
    home_cache_s: float = 1.0
    """How long a node trusts a tenant's cached home region (a moved tenant's calls
    go to its new home within this)."""
    move_poll_interval_s: float = 0.2
    """How often a node reads which tenants a home move has frozen or taken away
    (``tenant_moves``, migration 0012): a freeze reaches the node within this (one
    indexed read of a tiny table per interval)."""
    backlog_interval_s: float = 0.2
    """How often a node works out, for each worker stream that asked (``Hello.backlog``),
    how many ready tasks wait for it, and sends a ``Backlog`` when the figure moved
    (``_backlog.py``). One pass over the open streams per interval, never per task;
    0 turns it off."""
    canary_interval_s: float = 0.0
    """Schedule a canary task this often (0: off; ``tickwheel serve`` turns it on at
    60 s). It runs on a built-in in-process worker of the SYSTEM tenant."""
    stall_after_s: float = 5.0
    """A loop that holds the node's promise (the dispatcher, the pre-loader, the store
    writes) and has made no progress for this long while it had work (one round still
    running, or every attempt failing) makes the node report NOT_SERVING, with a log
    line and ``tickwheel_engine_loop_stalled_seconds`` naming the loop
    (``_health.py``, docs/cluster.md "What a stalled node does")."""
    stall_yield_s: float = 15.0
    """A stall this long makes a clustered node stop renewing its etcd lease, so the
    other nodes take its shards; it renews (and claims again) once the stall is over.
    0: never (a node that is alone has nobody to hand its shards to)."""
    outage_grace_s: float | None = None
    """After a store call failed for want of the store, the reaper takes back no
    expired lease until the store has answered for this long and every write that
    waited through the outage is committed: the heartbeats and completions that
    reached the node meanwhile land first, so an outage reruns nothing (None: one
    ``lease_ttl_s``, time for every live worker to heartbeat once more)."""

    def kept_free(
        self,
        pool: Pool,
        worker_slots: int,
        worker_pools: frozenset[Pool],
        held: frozenset[Pool] | None = None,
    ) -> int:
        """Free slots a worker stream of ``worker_slots`` slots that runs
        ``worker_pools`` keeps before it takes a task of ``pool``: the reserves of the
        pools ahead of ``pool`` that it runs and that are held now (``held``; None:
        every reserve), at most ``worker_slots - 1``."""
        kept = 0
        for r in self.reserves:
            if held is not None and r.pool not in held:
                continue
            if r.pool in worker_pools and _POOL_RANK[r.pool] < _POOL_RANK[pool]:
                kept += r.of(worker_slots)
        return min(kept, max(worker_slots - 1, 0))

    @property
    def dispatch_lease_s(self) -> float:
        """The lease a dispatch to an ack-first worker stream commits, from its due
        time: until its ack is overdue (:attr:`ack_timeout_s`; the whole lease when that
        is off). The ack extends it to :attr:`lease_ttl_s`."""
        if self.ack_timeout_s > 0:
            return min(self.ack_timeout_s, self.lease_ttl_s)
        return self.lease_ttl_s

    def tier_weight(self, tier: str) -> int:
        """The fair-share weight of ``tier`` (1 for an unknown tier)."""
        return dict(self.tier_weights).get(tier, 1)

    def __post_init__(self) -> None:
        positive = {
            "lookahead_s": self.lookahead_s,
            "preload_interval_s": self.preload_interval_s,
            "preload_batch": self.preload_batch,
            "load_batch": self.load_batch,
            "lease_ttl_s": self.lease_ttl_s,
            "heartbeat_interval_s": self.heartbeat_interval_s,
            "max_batch": self.max_batch,
            "dispatch_batch": self.dispatch_batch,
            "retry_base_s": self.retry_base_s,
            "retry_max_s": self.retry_max_s,
            "shard_count": self.shard_count,
            "max_submit_batch": self.max_submit_batch,
            "tick_ms": self.tick_ms,
            "max_workflow_nodes": self.max_workflow_nodes,
            "max_workflow_edges": self.max_workflow_edges,
            "schedule_interval_s": self.schedule_interval_s,
            "schedule_batch": self.schedule_batch,
            "max_occurrences_per_pass": self.max_occurrences_per_pass,
            "reconcile_interval_s": self.reconcile_interval_s,
            "full_reconcile_interval_s": self.full_reconcile_interval_s,
            "wait_recheck_s": self.wait_recheck_s,
            "concurrency_recheck_s": self.concurrency_recheck_s,
            "index_check_interval_s": self.index_check_interval_s,
            "move_poll_interval_s": self.move_poll_interval_s,
        }
        if not REGION_NAME.match(self.region):
            raise ValueError(f"EngineConfig.region: {self.region!r} is not a region name")
        if self.home_cache_s < 0:
            raise ValueError("EngineConfig.home_cache_s must be >= 0")
        for name, value in positive.items():
            if value <= 0:
                raise ValueError(f"EngineConfig.{name} must be positive, got {value}")
        if not 0 <= self.dispatch_lead_ms <= self.dispatch_lead_max_ms:
            raise ValueError("EngineConfig: need 0 <= dispatch_lead_ms <= dispatch_lead_max_ms")
        if self.critical_reserved_slots < 0 or self.bulk_max_slots < 0:
            raise ValueError("EngineConfig: slot reservations must not be negative")
        if len({r.pool for r in self.reserves}) != len(self.reserves):
            raise ValueError("EngineConfig.reserves: one SlotReserve per pool")
        if self.ack_timeout_s < 0:
            raise ValueError("EngineConfig.ack_timeout_s must be >= 0")
        if self.orphan_grace_s < 0:
            raise ValueError("EngineConfig.orphan_grace_s must be >= 0")
        if self.reserve_linger_s is not None and self.reserve_linger_s < 0:
            raise ValueError("EngineConfig.reserve_linger_s must be >= 0 or None")
        if any(w <= 0 for _, w in self.tier_weights):
            raise ValueError("EngineConfig.tier_weights must be positive")
        if self.backlog_interval_s < 0:
            raise ValueError("EngineConfig.backlog_interval_s must be >= 0")
        if self.canary_interval_s < 0:
            raise ValueError("EngineConfig.canary_interval_s must be >= 0")
        if not 0 <= self.count_cache_ttl_s <= self.count_cache_max_age_s:
            raise ValueError("EngineConfig: need 0 <= count_cache_ttl_s <= count_cache_max_age_s")
        if self.count_cache_keys < 1:
            raise ValueError("EngineConfig.count_cache_keys must be positive")
        if self.jitter_window_s < 0:
            raise ValueError("EngineConfig.jitter_window_s must be >= 0")
        if not 0 <= self.ack_linger_ms <= 1000:
            raise ValueError("EngineConfig.ack_linger_ms must be 0-1000")
        if not 0 <= self.complete_linger_ms <= 1000:
            raise ValueError("EngineConfig.complete_linger_ms must be 0-1000")
        if self.dispatch_window_ms < 0:
            raise ValueError("EngineConfig.dispatch_window_ms must be >= 0")
        if not 0 <= self.push_ahead_ms <= 1000:
            raise ValueError("EngineConfig.push_ahead_ms must be 0-1000")
        if self.index_flush_ms < 0:
            raise ValueError("EngineConfig.index_flush_ms must be >= 0")
        if self.reconcile_skew_s < 0:
            raise ValueError("EngineConfig.reconcile_skew_s must be >= 0")
        if self.stall_after_s <= 0:
            raise ValueError("EngineConfig.stall_after_s must be positive")
        if self.stall_yield_s < 0:
            raise ValueError("EngineConfig.stall_yield_s must be >= 0")
        if self.stall_yield_s and self.stall_yield_s < self.stall_after_s:
            raise ValueError("EngineConfig.stall_yield_s must be 0 or >= stall_after_s")
        if self.outage_grace_s is not None and self.outage_grace_s < 0:
            raise ValueError("EngineConfig.outage_grace_s must be >= 0")
        if self.heartbeat_interval_s >= self.lease_ttl_s:
            raise ValueError("EngineConfig.heartbeat_interval_s must be below lease_ttl_s")
