"""The region lease and the orchestrator's decisions on a real etcd (issue 38); the
same with two sites, a witness and partitions is tests/acceptance/regions/test_witness.py."""

from __future__ import annotations

import asyncio

import pytest

from scheduler.cluster import LeaseHeld
from scheduler.dr import (
    Orchestrator,
    OrchestratorConfig,
    RegionLease,
    WitnessConfig,
    read_state,
    take_region,
)
from scheduler.dr._witness import new_client
from tests.support.servers import EtcdServer
from tests.support.waiting import eventually


def _config(etcd: EtcdServer, prefix: str, site: str) -> WitnessConfig:
    return WitnessConfig(
        etcd_endpoints=(etcd.endpoint,),
        region="r1",
        site=site,
        prefix=prefix,
        lease_ttl_s=2,
        safety_margin_s=0.5,
    )


async def test_a_node_holds_the_region_until_another_site_takes_it(
    etcd_server: EtcdServer, etcd_prefix: str
) -> None:
    a = _config(etcd_server, etcd_prefix, "a")
    lease = RegionLease(a, "node-1")
    await lease.acquire()
    client = new_client(etcd_server.endpoint, 1.0)
    try:
        assert lease.held
        state = await read_state(client, a)
        assert state.active == "a"
        assert state.alive == {"a": ("node-1",)}
        await eventually(lambda: asyncio.sleep(0, lease.renewals), until=lambda n: n >= 2)
        assert lease.held
        # The manual override: site b takes the region; the node fences at its next
        # renewal and cannot register again.
        b = _config(etcd_server, etcd_prefix, "b")
        assert await take_region(client, b, from_site=None, revision=None)
        await asyncio.wait_for(lease.wait_lost(), timeout=10)
        assert not lease.held
        with pytest.raises(LeaseHeld, match="site 'b' holds region 'r1'"):
            await lease.acquire()
    finally:
        await lease.release()
        await client.close()


async def test_the_orchestrator_waits_out_the_lease_then_takes_the_region(
    etcd_server: EtcdServer, etcd_prefix: str
) -> None:
    a = _config(etcd_server, etcd_prefix, "a")
    lease = RegionLease(a, "node-1")
    await lease.acquire()
    watch = Orchestrator(
        OrchestratorConfig(
            witness=_config(etcd_server, etcd_prefix, "b"),
            from_site="a",
            standby_dsn="postgresql://unused",
            detection_s=0.5,
            dry_run=True,
        )
    )
    try:
        assert await watch.step() == "primary-alive"
        # A's node stops renewing (frozen): it stops trusting first, then etcd expires
        # its key, then the orchestrator counts the detection bound.
        renewing = lease._tasks[0]
        assert renewing.get_name() == "tickwheel-region-lease"
        renewing.cancel()
        await asyncio.wait_for(lease.wait_lost(), timeout=10)
        decision = await eventually(
            watch.step, until=lambda d: d != "primary-alive", timeout_s=10, what="expiry"
        )
        assert decision == "primary-absent"
        assert await eventually(watch.step, until=lambda d: d != "primary-absent") == (
            "would-promote"
        )
        # Dry run: nothing changed.
        client = new_client(etcd_server.endpoint, 1.0)
        try:
            assert (await read_state(client, a)).active == "a"
            # A node that registers again resets the count (active's revision moved).
            await lease.acquire()
            assert await watch.step() == "primary-alive"
        finally:
            await client.close()
    finally:
        await lease.release()
        if watch.client is not None:
            await watch.client.close()


async def test_a_region_nobody_took_is_not_taken(etcd_server: EtcdServer, etcd_prefix: str) -> None:
    """Before A's first node registered there is nothing to fail over from."""
    watch = Orchestrator(
        OrchestratorConfig(
            witness=_config(etcd_server, etcd_prefix, "b"),
            from_site="a",
            standby_dsn="postgresql://unused",
            detection_s=0.0,
        )
    )
    try:
        assert await watch.step() == "unclaimed"
        assert await watch.step() == "unclaimed"
        client = new_client(etcd_server.endpoint, 1.0)
        try:
            assert (await read_state(client, _config(etcd_server, etcd_prefix, "b"))).active is None
        finally:
            await client.close()
    finally:
        if watch.client is not None:
            await watch.client.close()
