"""The metrics collectors, the bucket counts and the bounded labels, without a server."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from scheduler._histogram import LATENESS_BUCKETS_S, Buckets
from scheduler.engine import Engine, EngineConfig
from scheduler.metrics import (
    CATALOG,
    OTHER,
    BoundedLabel,
    DepthPoller,
    EngineCollector,
    MetricsConfig,
    WorkerCollector,
)
from scheduler.store import DepthRow, open_store
from scheduler.types import Pool
from scheduler.worker import Worker
from tests.support.metrics import documented, parse, total


def test_buckets_count_values_up_to_and_including_each_bound() -> None:
    b = Buckets((0.1, 1.0))
    for v in (0.05, 0.1, 0.5, 1.0, 7.0):
        b.observe(v)
    assert b.cumulative() == [("0.1", 2), ("1.0", 4), ("+Inf", 5)]
    assert b.count == 5
    assert b.sum == pytest.approx(8.65)
    with pytest.raises(ValueError, match="increasing"):
        Buckets((1.0, 0.5))


def test_the_lateness_buckets_run_from_a_millisecond_past_an_hour() -> None:
    assert LATENESS_BUCKETS_S[0] == 0.001
    assert LATENESS_BUCKETS_S[-1] > 3600


def test_a_bounded_label_keeps_the_first_values_and_names_the_rest_other() -> None:
    label = BoundedLabel(2)
    assert [label(v) for v in ("a", "b", "c", "a", "d", "b")] == ["a", "b", OTHER, "a", OTHER, "b"]


def test_the_doc_table_is_the_catalog() -> None:
    assert documented() == {m.name: (m.kind, m.labels) for m in CATALOG}


def test_metrics_config_is_validated() -> None:
    with pytest.raises(ValueError, match="port"):
        MetricsConfig(port=70_000)
    with pytest.raises(ValueError, match="depth_interval_s"):
        MetricsConfig(depth_interval_s=-1)


class _Store:
    """The two reads the depth poller makes, answering fixed rows."""

    def __init__(self, rows: list[DepthRow]) -> None:
        self.rows = rows

    async def queue_depth(self, now: datetime) -> list[DepthRow]:
        return self.rows

    async def replication_lag(self) -> None:
        return None


async def test_engine_collector_reads_the_counters_and_precreates_every_series() -> None:
    now = datetime(2026, 1, 1, 12, tzinfo=UTC)
    store = await open_store("sqlite://:memory:")
    try:
        engine = Engine(store, EngineConfig(), clock=lambda: now)
        stats = engine.stats
        stats.count("submitted", Pool.BULK, "email", 3)
        stats.count("submitted", Pool.BULK, "sms")
        stats.lateness_s.observe(0.002)
        stats.throttled[uuid.uuid4()] += 2
        stats.throttled[uuid.uuid4()] += 5
        rows = [
            DepthRow("bulk", "PRELOADED", "due", 4, now - timedelta(seconds=90)),
            DepthRow("bulk", "SCHEDULED", "later", 7, now + timedelta(days=1)),
        ]
        depth = DepthPoller(_Store(rows), 0)  # type: ignore[arg-type]
        await depth.refresh(now)
        registry = CollectorRegistry(auto_describe=False)
        registry.register(
            EngineCollector(engine, depth, MetricsConfig(type_labels=1, tenant_labels=1))
        )
        s = parse(generate_latest(registry).decode())
    finally:
        await store.close()
    submitted = s["tickwheel_tasks_submitted_total"]
    assert submitted[(("pool", "bulk"), ("type", "email"))] == 3
    assert submitted[(("pool", "bulk"), ("type", OTHER))] == 1  # past the type limit
    assert total(s, "tickwheel_dispatch_lateness_seconds", "histogram") == 1
    assert len(s["tickwheel_quota_throttled_total"]) == 2  # one tenant, then other
    assert total(s, "tickwheel_quota_throttled_total", "counter") == 7
    depth_series = s["tickwheel_queue_depth"]
    assert len(depth_series) == 3 * 5 * 4  # pools x open states x horizons, zeros too
    assert depth_series[(("horizon", "later"), ("pool", "bulk"), ("state", "SCHEDULED"))] == 7
    assert depth_series[(("horizon", "due"), ("pool", "critical"), ("state", "RUNNING"))] == 0
    age = s["tickwheel_oldest_due_age_seconds"]
    assert age[(("pool", "bulk"),)] == 90
    assert age[(("pool", "critical"),)] == 0
    assert len(s["tickwheel_pool_slots_free"]) == 3
    assert s["tickwheel_replication_lag_seconds"][()] == 0
    assert s["tickwheel_replication_lag_bytes"][()] == 0


async def test_worker_collector_reports_outcomes_durations_and_slots() -> None:
    async def h(ctx: object) -> None:
        return None

    worker = Worker("127.0.0.1:9", api_key="k", handlers={"t": h}, slots=3)
    worker.stats.handled[("t", "completed")] += 2
    worker.stats.handler_done("t", 0.2)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(WorkerCollector(worker))
    s = parse(generate_latest(registry).decode())
    handled = s["tickwheel_worker_tasks_handled_total"]
    assert handled[(("outcome", "completed"), ("type", "t"))] == 2
    assert handled[(("outcome", "failed"), ("type", "t"))] == 0  # pre-created
    assert total(s, "tickwheel_worker_handler_seconds", "histogram") == 1
    assert s["tickwheel_worker_slots_free"][()] == 3
    assert s["tickwheel_worker_slots_used"][()] == 0
    assert s["tickwheel_worker_stream_reconnects_total"][()] == 0


async def test_a_taken_metrics_port_is_an_error_naming_it() -> None:
    from scheduler.metrics import MetricsServer

    first = MetricsServer(CollectorRegistry(auto_describe=False))
    await first.start()
    try:
        second = MetricsServer(CollectorRegistry(auto_describe=False), port=first.port)
        with pytest.raises(OSError, match=f"metrics port 127.0.0.1:{first.port}"):
            await second.start()
        await second.stop()  # safe after a failed start
    finally:
        await first.stop()
        await first.stop()  # and twice
