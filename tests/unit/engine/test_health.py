"""The engine's health: beats, the stall verdict, what it changes, and the reaping rule
after a store outage (``engine/_health.py``). Pure logic: times are given, not waited."""

from __future__ import annotations

import time

from scheduler.engine import EngineConfig
from scheduler.engine._health import Beat, Health
from scheduler.store import StoreUnavailable

CONFIG = EngineConfig(lease_ttl_s=30.0, stall_after_s=5.0, stall_yield_s=15.0)


class Rig:
    def __init__(self, config: EngineConfig = CONFIG) -> None:
        self.yields: list[bool] = []
        self.serving: list[bool] = []
        self.health = Health(config, self.yields.append)

        async def told(serving: bool) -> None:
            self.serving.append(serving)

        self.health.on_serving = told


def test_an_idle_or_progressing_beat_is_never_stalled() -> None:
    beat = Beat("dispatcher")
    now = time.monotonic()
    assert beat.stalled_for(now + 1000) == 0.0
    beat.begin()
    beat.ok()
    assert beat.stalled_for(now + 1000) == 0.0


def test_a_round_that_never_ends_and_a_run_of_failures_both_stall() -> None:
    busy, failing = Beat("preloader"), Beat("dispatcher")
    busy.begin()
    busy.begin()  # a round in progress keeps its start
    failing.failed(StoreUnavailable("gone"))
    failing.begin()
    failing.failed(StoreUnavailable("still gone"))
    later = time.monotonic() + 7
    assert busy.stalled_for(later) >= 7
    assert failing.stalled_for(later) >= 7
    assert failing.last_error == "StoreUnavailable: still gone"
    failing.ok()
    assert failing.stalled_for(later) == 0.0
    assert failing.last_error is None
    assert failing.recovered_at <= time.monotonic()


async def test_a_stall_reports_not_serving_then_yields_the_shards_then_recovers() -> None:
    rig = Rig()
    health = rig.health
    health.dispatcher.failed(StoreUnavailable("refused"))
    t0 = time.monotonic()
    await health.check(t0 + 1)
    assert health.serving
    assert rig.serving == []
    assert rig.yields == []
    await health.check(t0 + 6)
    assert not health.serving
    assert rig.serving == [False]
    assert health.stalls == 1
    assert rig.yields == []
    await health.check(t0 + 16)
    assert health.yielding
    assert rig.yields == [True]
    await health.check(t0 + 17)  # told once per change
    assert rig.serving == [False]
    assert rig.yields == [True]
    health.dispatcher.ok()
    await health.check(t0 + 18)
    assert health.serving
    assert not health.yielding
    assert rig.serving == [False, True]
    assert rig.yields == [True, False]


async def test_a_node_alone_never_yields_when_stall_yield_is_off() -> None:
    rig = Rig(EngineConfig(stall_after_s=1.0, stall_yield_s=0))
    rig.health.preloader.begin()
    await rig.health.check(time.monotonic() + 3600)
    assert rig.serving == [False]
    assert rig.yields == []


def test_reaping_waits_out_the_outage_the_held_writes_and_the_grace() -> None:
    rig = Rig(EngineConfig(lease_ttl_s=30.0, heartbeat_interval_s=10.0))
    health = rig.health
    assert health.reaping_allowed()  # never failed
    held = [False]
    health.pending_writes = lambda: held[0]
    health.store.failed(StoreUnavailable("gone"))
    assert not health.reaping_allowed(time.monotonic() + 3600)  # still failing
    health.store.ok()
    back = health.store.recovered_at
    assert not health.reaping_allowed(back + 29.9)  # the grace: one lease TTL
    assert health.reaping_allowed(back + 30.0)
    held[0] = True
    assert not health.reaping_allowed(back + 3600)  # writes of the outage still queued


def test_the_grace_can_be_set_apart_from_the_lease() -> None:
    rig = Rig(EngineConfig(outage_grace_s=0))
    rig.health.store.failed(StoreUnavailable("gone"))
    assert not rig.health.reaping_allowed()
    rig.health.store.ok()
    assert rig.health.reaping_allowed()


async def test_each_loop_that_stalls_is_counted_once_per_stall() -> None:
    rig = Rig()
    health = rig.health
    t0 = time.monotonic()
    health.dispatcher.failed(StoreUnavailable("refused"))
    await health.check(t0 + 6)
    await health.check(t0 + 7)  # the same stall: not counted again
    health.store.failed(StoreUnavailable("refused"))  # a second loop, while not serving
    await health.check(time.monotonic() + 6)
    assert health.loop_stalls == {"dispatcher": 1, "store": 1}
    assert health.stalls == 1  # the verdict changed once
    health.dispatcher.ok()
    health.store.ok()
    await health.check(time.monotonic())
    health.dispatcher.failed(StoreUnavailable("again"))
    await health.check(time.monotonic() + 6)
    assert health.loop_stalls == {"dispatcher": 2, "store": 1}
    assert health.stalls == 2
