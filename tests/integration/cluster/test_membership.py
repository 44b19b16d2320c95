"""Membership against the real etcd: partition, failover, lease trust, etcd restarts."""

from __future__ import annotations

import asyncio
import time

import pytest

from scheduler.cluster import assign
from tests.integration.cluster._proxy import PartitionProxy
from tests.integration.cluster.conftest import MARGIN_S, SHARDS, TTL_S, Nodes, balanced
from tests.support.servers import EtcdServer
from tests.support.waiting import eventually

pytestmark = pytest.mark.etcd


async def _partition(nodes: Nodes) -> dict[int, str]:
    return nodes.partition()


async def test_three_nodes_converge_to_the_rendezvous_partition(nodes: Nodes) -> None:
    for name in ("a", "b", "c"):
        await nodes.add(name)
    nodes.history.watch(nodes.members.values())
    owners = await eventually(
        lambda: _partition(nodes), until=balanced(3), timeout_s=10, what="3-node partition"
    )
    assert owners == assign(SHARDS, ["a", "b", "c"])
    for name, listener in nodes.listeners.items():
        assert listener.current == nodes.members[name].owned()
    assert nodes.members["a"].live_nodes() == {"a", "b", "c"}
    await nodes.history.stop()
    nodes.history.check()


async def test_a_graceful_stop_hands_its_shards_over(nodes: Nodes) -> None:
    for name in ("a", "b", "c"):
        await nodes.add(name)
    nodes.history.watch(nodes.members.values())
    await eventually(lambda: _partition(nodes), until=balanced(3), timeout_s=10, what="start")
    gone = nodes.members.pop("c")
    had = gone.owned()
    t0 = time.monotonic()
    await gone.stop()
    assert gone.owned() == frozenset()
    assert nodes.listeners["c"].current == set()
    owners = await eventually(
        lambda: _partition(nodes), until=balanced(2), timeout_s=TTL_S + 1, what="takeover"
    )
    took = time.monotonic() - t0
    assert owners == assign(SHARDS, ["a", "b"])
    assert took < TTL_S + 1
    assert had
    assert all(owners[s] in {"a", "b"} for s in had)
    await nodes.history.stop()
    nodes.history.check()


async def test_a_cut_off_node_stops_trusting_before_its_lease_expires(
    nodes: Nodes, etcd_server: EtcdServer
) -> None:
    proxy = PartitionProxy(etcd_server.host, etcd_server.port)
    await proxy.start()
    try:
        await nodes.add("a")
        await nodes.add("b")
        lonely = await nodes.add("c", endpoint=proxy.endpoint)
        nodes.history.watch(nodes.members.values())
        await eventually(lambda: _partition(nodes), until=balanced(3), timeout_s=10, what="start")
        had = lonely.owned()
        # Keep-alives stop reaching etcd from here; the last one went out at most one
        # keep-alive interval ago, so etcd keeps the lease >= TTL_S from now - 0.4 s.
        proxy.cut()
        cut_at = time.monotonic()
        await eventually(
            lambda: asyncio.sleep(0, lonely.owned()),
            until=lambda owned: not owned,
            timeout_s=TTL_S,
            interval_s=0.005,
            what="the cut-off node to stop trusting",
        )
        distrust_after = time.monotonic() - cut_at
        # It trusted at most TTL - margin after its last successful keep-alive...
        assert distrust_after <= TTL_S - MARGIN_S + 0.1
        # ...and nobody else held its shards before its lease could have expired.
        for m in (nodes.members["a"], nodes.members["b"]):
            assert not (m.owned() & had)
        owners = await eventually(
            lambda: _partition(nodes),
            until=lambda o: len(o) == SHARDS and set(o.values()) == {"a", "b"},
            timeout_s=TTL_S + 2,
            what="survivors to take the cut-off node's shards",
        )
        taken_after = time.monotonic() - cut_at
        assert taken_after > distrust_after
        assert nodes.listeners["c"].current == set()
        # Healing: the node finds its lease gone, registers again and gets its share back.
        proxy.heal()
        owners = await eventually(
            lambda: _partition(nodes), until=balanced(3), timeout_s=10, what="rejoin"
        )
        assert owners == assign(SHARDS, ["a", "b", "c"])
    finally:
        await nodes.history.stop()
        await nodes.close()
        await proxy.stop()
    nodes.history.check()


async def test_an_etcd_restart_keeps_or_cleanly_reacquires_every_shard(
    nodes: Nodes, etcd_server: EtcdServer
) -> None:
    for name in ("a", "b", "c"):
        await nodes.add(name)
    nodes.history.watch(nodes.members.values())
    before = await eventually(
        lambda: _partition(nodes), until=balanced(3), timeout_s=10, what="start"
    )
    await asyncio.to_thread(etcd_server.restart)
    after = await eventually(
        lambda: _partition(nodes), until=balanced(3), timeout_s=15, what="after restart"
    )
    assert after == before
    await nodes.history.stop()
    nodes.history.check()


async def test_a_paused_etcd_empties_every_node_then_they_recover(
    nodes: Nodes, etcd_server: EtcdServer
) -> None:
    for name in ("a", "b"):
        await nodes.add(name)
    nodes.history.watch(nodes.members.values())
    before = await eventually(
        lambda: _partition(nodes), until=balanced(2), timeout_s=10, what="start"
    )
    etcd_server.pause()
    try:
        await eventually(
            lambda: _partition(nodes),
            until=lambda o: not o,
            timeout_s=TTL_S,
            interval_s=0.01,
            what="every node to stop trusting a frozen etcd",
        )
    finally:
        etcd_server.resume()
    after = await eventually(
        lambda: _partition(nodes), until=balanced(2), timeout_s=15, what="after resume"
    )
    assert after == before
    assert all(listener.losses >= 1 for listener in nodes.listeners.values())
    await nodes.history.stop()
    nodes.history.check()


async def test_a_join_moves_about_a_third_of_the_shards(nodes: Nodes) -> None:
    await nodes.add("a")
    await nodes.add("b")
    nodes.history.watch(nodes.members.values())
    before = await eventually(
        lambda: _partition(nodes), until=balanced(2), timeout_s=10, what="two nodes"
    )
    await nodes.add("c")
    after = await eventually(
        lambda: _partition(nodes), until=balanced(3), timeout_s=10, what="three nodes"
    )
    moved = sum(before[s] != after[s] for s in range(SHARDS))
    # Bounded loads can shift a few shards between the old nodes too; about S/3 move.
    assert moved <= 1.5 * SHARDS / 3
    assert after == assign(SHARDS, ["a", "b", "c"])
    await nodes.history.stop()
    nodes.history.check()


async def test_settled_rounds_skip_until_a_key_changes(nodes: Nodes) -> None:
    """A settled node's rounds cost one single-key read (the store's revision did not
    move); a join still moves shards as before."""
    a = await nodes.add("a")
    await nodes.add("b")
    nodes.history.watch(nodes.members.values())
    await eventually(lambda: _partition(nodes), until=balanced(2), timeout_s=10, what="two")
    skipped = a.skipped_rounds
    await eventually(
        lambda: asyncio.sleep(0, a.skipped_rounds),
        until=lambda n: n >= skipped + 3,
        timeout_s=5,
        what="settled rounds to skip",
    )
    await nodes.add("c")
    after = await eventually(
        lambda: _partition(nodes), until=balanced(3), timeout_s=10, what="three nodes"
    )
    assert after == assign(SHARDS, ["a", "b", "c"])
    assert a.live_nodes() == {"a", "b", "c"}
    await nodes.history.stop()
    nodes.history.check()
