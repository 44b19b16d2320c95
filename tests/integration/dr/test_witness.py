"""The region lease and the orchestrator's decisions on a real etcd (issue 38); the
same with two sites, a witness and partitions is tests/acceptance/regions/test_witness.py."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

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
from tests.support.witness import witness_cluster


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


@pytest.mark.parametrize("fault", ["kill", "freeze"])
async def test_the_lease_never_drops_when_the_member_it_renews_through_is_lost(
    tmp_path: Path, fault: str
) -> None:
    """A 3-member etcd; the node's client renews through a member that is not the
    leader, which is then killed -9 (calls fail) or SIGSTOPped (calls hang). The next
    renewal goes to the next member within the margin: the lease is held throughout.
    (A lost leader stops every renewal for an election, which the TTL and margin must
    cover: docs/ha.md.)"""
    with witness_cluster(tmp_path / "etcd") as etcd:
        probe = new_client(etcd["a"].endpoint, 2.0)
        try:
            leader = (await probe.status()).leader.name
        finally:
            await probe.close()
        victim = next(n for n in ("w", "b", "a") if n != leader)
        others = [n for n in ("a", "b", "w") if n != victim]
        config = WitnessConfig(
            etcd_endpoints=tuple(etcd[n].endpoint for n in (victim, *others)),
            region="r1",
            site="a",
            prefix="/flap",
            lease_ttl_s=2,
            safety_margin_s=0.5,
        )
        lease = RegionLease(config, "node-1")
        await lease.acquire()
        try:
            await eventually(lambda: asyncio.sleep(0, lease.renewals), until=lambda n: n >= 2)
            if fault == "kill":
                etcd[victim].kill9()
            else:
                etcd[victim].pause()
            before = lease.renewals
            dropped = 0
            end = time.monotonic() + 5.0  # ten renewals' worth
            while time.monotonic() < end:
                dropped += not lease.held
                await asyncio.sleep(0.01)
            assert dropped == 0, f"the lease dropped for {dropped} samples after the {fault}"
            assert lease.renewals >= before + 5
        finally:
            if fault == "freeze":
                etcd[victim].resume()
            await lease.release()
