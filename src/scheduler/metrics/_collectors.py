"""Collectors: read a node's, a worker's or a watchdog's counters at scrape time.

Nothing is incremented on the hot path for Prometheus: the engine and the worker keep
plain counters (``EngineStats``, ``WorkerStats``) and these collectors turn them into
metric families when ``/metrics`` is scraped. Label sets of gauges are pre-created for
every pool, state and horizon, so a series that drops to zero reports 0.
"""

from __future__ import annotations

import collections
from collections.abc import Iterator
from datetime import datetime
from typing import TYPE_CHECKING

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from scheduler._histogram import Buckets
from scheduler.metrics._catalog import help_of
from scheduler.metrics._config import MetricsConfig
from scheduler.metrics._depth import DepthPoller
from scheduler.metrics._labels import BoundedLabel
from scheduler.store import HORIZONS
from scheduler.types import Pool

if TYPE_CHECKING:
    from scheduler.engine import Engine
    from scheduler.watchdog import Watchdog
    from scheduler.worker import ClusterWorker, Worker

POOLS: tuple[str, ...] = tuple(p.value for p in Pool)
OPEN_STATES: tuple[str, ...] = ("SCHEDULED", "PRELOADED", "DISPATCHED", "RUNNING", "RETRYING")
WAITING_STATES = frozenset({"SCHEDULED", "PRELOADED", "RETRYING"})
"""Not yet dispatched: the states of the oldest-due age."""

_EVENT_METRICS: tuple[tuple[str, str], ...] = (
    ("submitted", "tickwheel_tasks_submitted"),
    ("dispatched", "tickwheel_tasks_dispatched"),
    ("completed", "tickwheel_tasks_completed"),
    ("failed", "tickwheel_tasks_failed"),
    ("retried", "tickwheel_tasks_retried"),
    ("dead_lettered", "tickwheel_tasks_dead_lettered"),
    ("cancelled", "tickwheel_tasks_cancelled"),
)


def _counter(name: str, labels: tuple[str, ...] = ()) -> CounterMetricFamily:
    return CounterMetricFamily(name, help_of(f"{name}_total"), labels=list(labels))


def _gauge(name: str, labels: tuple[str, ...] = ()) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, help_of(name), labels=list(labels))


def _histogram(name: str, labels: tuple[str, ...] = ()) -> HistogramMetricFamily:
    return HistogramMetricFamily(name, help_of(name), labels=list(labels))


def _add(family: HistogramMetricFamily, labels: list[str], buckets: Buckets) -> None:
    family.add_metric(labels, buckets.cumulative(), buckets.sum)


class EngineCollector(Collector):
    """A node's metrics: the engine's counters and probes, and the depth poller's
    last store read."""

    def __init__(self, engine: Engine, depth: DepthPoller, config: MetricsConfig) -> None:
        self._engine = engine
        self._depth = depth
        self._type = BoundedLabel(config.type_labels)
        self._tenant = BoundedLabel(config.tenant_labels)

    def collect(self) -> Iterator[Metric]:
        """Every node metric, read now."""
        engine = self._engine
        stats = engine.stats
        yield from self._task_counters()
        lateness = _histogram("tickwheel_dispatch_lateness_seconds")
        _add(lateness, [], stats.lateness_s)
        yield lateness
        yield from self._depth_gauges(engine.now())
        timers = _gauge("tickwheel_wheel_timers")
        timers.add_metric([], engine.timers)
        yield timers
        pools = engine.pool_metrics()
        free = engine.free_slots()
        ready = _gauge("tickwheel_ready_queue_tasks", ("pool",))
        used = _gauge("tickwheel_pool_slots_used", ("pool",))
        free_g = _gauge("tickwheel_pool_slots_free", ("pool",))
        wait = _histogram("tickwheel_ready_queue_wait_seconds", ("pool",))
        for pool, m in pools.items():
            ready.add_metric([pool.value], m.depth)
            used.add_metric([pool.value], m.slots_used)
            free_g.add_metric([pool.value], free.get(pool, 0))
            _add(wait, [pool.value], stats.ready_wait_s[pool])
        yield from (ready, wait, used, free_g)
        flow = engine.flow
        held = _gauge("tickwheel_ready_queue_held", ("cause",))
        held_n = _counter("tickwheel_dispatch_held", ("cause",))
        held_s = _histogram("tickwheel_dispatch_held_seconds", ("cause",))
        for cause, buckets in stats.held_wait_s.items():
            held.add_metric([cause], flow.held.get(cause, 0))
            held_n.add_metric([cause], flow.held_total[cause])
            _add(held_s, [cause], buckets)
        yield from (held, held_n, held_s)
        sessions = _gauge("tickwheel_worker_sessions")
        sessions.add_metric([], len(engine.watch.workers(None)))
        yield sessions
        stale = _counter("tickwheel_stale_writes")
        stale.add_metric([], stats.stale_writes)
        yield stale
        expiries = _counter("tickwheel_lease_expiries", ("outcome",))
        for outcome in ("requeued", "retrying", "dead_letter", "cancelled", "ack_timeout"):
            expiries.add_metric([outcome], stats.lease_expiries[outcome])
        yield expiries
        stalled = _gauge("tickwheel_engine_loop_stalled_seconds", ("loop",))
        for loop, seconds in engine.health.stalled().items():
            stalled.add_metric([loop], seconds)
        yield stalled
        stalls = _counter("tickwheel_engine_loop_stalls", ("loop",))
        for loop in engine.health.beats:
            stalls.add_metric([loop], engine.health.loop_stalls[loop])
        yield stalls
        restarts = _counter("tickwheel_engine_loop_restarts", ("loop",))
        for loop, n in sorted(stats.loop_restarts.items()):
            restarts.add_metric([loop], n)
        yield restarts
        commit = _histogram("tickwheel_store_commit_seconds", ("kind",))
        for kind, buckets in stats.commit_s.items():
            _add(commit, [kind], buckets)
        yield commit
        size = _histogram("tickwheel_store_batch_size", ("kind",))
        for kind, buckets in stats.batch_size.items():
            _add(size, [kind], buckets)
        yield size
        owned = _gauge("tickwheel_shards_owned")
        owned.add_metric([], engine.shards_owned)
        yield owned
        epochs = _counter("tickwheel_shard_epoch_changes")
        epochs.add_metric([], stats.epoch_changes)
        yield epochs
        rebuilds = _counter("tickwheel_index_rebuilds")
        rebuilds.add_metric([], stats.index_rebuilds)
        yield rebuilds
        throttled = _counter("tickwheel_quota_throttled", ("tenant",))
        by_label: collections.Counter[str] = collections.Counter()
        for tenant_id, n in stats.throttled.items():
            by_label[self._tenant(str(tenant_id))] += n
        for label, n in sorted(by_label.items()):
            throttled.add_metric([label], n)
        yield throttled
        canary = _gauge("tickwheel_canary_lag_seconds")
        canary.add_metric([], stats.canary_lag_ms[-1] / 1000.0 if stats.canary_lag_ms else 0.0)
        yield canary
        replication = self._depth.replication
        lag = _gauge("tickwheel_replication_lag_seconds")
        lag.add_metric([], replication.lag_s if replication else 0.0)
        yield lag
        lag_bytes = _gauge("tickwheel_replication_lag_bytes")
        lag_bytes.add_metric([], replication.lag_bytes if replication else 0.0)
        yield lag_bytes
        standbys = _gauge("tickwheel_replication_standbys")
        standbys.add_metric([], replication.standbys if replication else 0)
        yield standbys

    def _task_counters(self) -> Iterator[Metric]:
        tasks = self._engine.stats.tasks
        for event, name in _EVENT_METRICS:
            family = _counter(name, ("pool", "type"))
            merged: collections.Counter[tuple[str, str]] = collections.Counter()
            for (pool, type_), n in list(tasks[event].items()):
                merged[(pool, self._type(type_))] += n
            for (pool, type_), n in sorted(merged.items()):
                family.add_metric([pool, type_], n)
            yield family

    def _depth_gauges(self, now: datetime) -> Iterator[Metric]:
        depth = _gauge("tickwheel_queue_depth", ("pool", "state", "horizon"))
        counts = {(r.pool, r.state, r.horizon): r.count for r in self._depth.rows}
        for pool in POOLS:
            for state in OPEN_STATES:
                for horizon in HORIZONS:
                    depth.add_metric([pool, state, horizon], counts.get((pool, state, horizon), 0))
        yield depth
        oldest: dict[str, datetime] = {}
        for r in self._depth.rows:
            if r.horizon != "due" or r.state not in WAITING_STATES or r.oldest_due is None:
                continue
            if r.pool not in oldest or r.oldest_due < oldest[r.pool]:
                oldest[r.pool] = r.oldest_due
        age = _gauge("tickwheel_oldest_due_age_seconds", ("pool",))
        for pool in POOLS:
            due = oldest.get(pool)
            age.add_metric([pool], max(0.0, (now - due).total_seconds()) if due else 0.0)
        yield age


class WorkerCollector(Collector):
    """A worker process's metrics."""

    def __init__(self, worker: Worker | ClusterWorker, config: MetricsConfig | None = None) -> None:
        self._worker = worker
        self._type = BoundedLabel((config or MetricsConfig()).type_labels)

    def collect(self) -> Iterator[Metric]:
        """Every worker metric, read now."""
        from scheduler.worker._stats import OUTCOMES

        worker = self._worker
        stats = worker.stats
        handled = _counter("tickwheel_worker_tasks_handled", ("type", "outcome"))
        merged: collections.Counter[tuple[str, str]] = collections.Counter()
        for (type_, outcome), n in list(stats.handled.items()):
            merged[(self._type(type_), outcome)] += n
        types = sorted({t for t, _ in merged})
        for type_ in types:
            for outcome in OUTCOMES:
                handled.add_metric([type_, outcome], merged.get((type_, outcome), 0))
        yield handled
        duration = _histogram("tickwheel_worker_handler_seconds", ("type",))
        for type_, buckets in sorted(stats.handler_s.items()):
            _add(duration, [type_], buckets)
        yield duration
        used = _gauge("tickwheel_worker_slots_used")
        used.add_metric([], worker.running_tasks)
        yield used
        free = _gauge("tickwheel_worker_slots_free")
        free.add_metric([], max(0, worker.slots - worker.running_tasks))
        yield free
        reconnects = _counter("tickwheel_worker_stream_reconnects")
        reconnects.add_metric([], worker.reconnects)
        yield reconnects


class WatchdogCollector(Collector):
    """The dead man's switch's metrics."""

    def __init__(self, watchdog: Watchdog) -> None:
        self._watchdog = watchdog

    def collect(self) -> Iterator[Metric]:
        """Alerts fired and firing, per case (every case pre-created)."""
        from scheduler.watchdog import Case

        dog = self._watchdog
        fired = _counter("tickwheel_watchdog_alerts", ("case",))
        firing = _gauge("tickwheel_watchdog_alerts_firing", ("case",))
        now = collections.Counter(a.case for a in dog.active.values())
        for case in Case:
            fired.add_metric([case.value], dog.fired[case])
            firing.add_metric([case.value], now[case])
        yield fired
        yield firing
