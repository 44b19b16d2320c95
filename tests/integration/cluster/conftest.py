"""Fixtures of the cluster tests: nodes on the real etcd, short leases, a history."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import pytest

from scheduler.cluster import ClusterConfig, Membership
from tests.integration.cluster._history import History, RecordingListener
from tests.support.servers import EtcdServer

pytestmark = pytest.mark.etcd

SHARDS = 256
TTL_S = 2.0
MARGIN_S = 0.5


class Nodes:
    """Creates nodes for one test and stops every one at the end."""

    def __init__(self, endpoint: str, prefix: str) -> None:
        self.endpoint = endpoint
        self.prefix = prefix
        self.history = History()
        self.members: dict[str, Membership] = {}
        self.listeners: dict[str, RecordingListener] = {}

    async def add(self, node_id: str, *, endpoint: str | None = None) -> Membership:
        config = ClusterConfig(
            etcd_endpoints=(endpoint or self.endpoint,),
            node_id=node_id,
            prefix=self.prefix,
            lease_ttl_s=TTL_S,
            safety_margin_s=MARGIN_S,
            shard_count=SHARDS,
            rebalance_interval_s=0.1,
            keepalive_interval_s=0.4,
            etcd_timeout_s=0.5,
        )
        listener = RecordingListener(node_id, self.history)
        member = Membership(config, listener=listener)
        self.members[node_id] = member
        self.listeners[node_id] = listener
        await member.start()
        return member

    def live(self) -> list[Membership]:
        return list(self.members.values())

    def partition(self) -> dict[int, str]:
        """shard -> owner across nodes; fails on a shard owned twice."""
        out: dict[int, str] = {}
        for m in self.members.values():
            for s in m.owned():
                assert s not in out, f"shard {s} owned by {out[s]} and {m.node_id}"
                out[s] = m.node_id
        return out

    async def close(self) -> None:
        await self.history.stop()
        for m in self.members.values():
            await m.stop()


@pytest.fixture
async def nodes(etcd_server: EtcdServer, etcd_prefix: str) -> AsyncIterator[Nodes]:
    group = Nodes(etcd_server.endpoint, etcd_prefix)
    try:
        yield group
    finally:
        await group.close()


def balanced(n_nodes: int) -> Callable[[dict[int, str]], bool]:
    """The partition is complete and every node has at most ceil(S / n) shards."""
    cap = -(-SHARDS // n_nodes)

    def ok(owners: dict[int, str]) -> bool:
        counts: dict[str, int] = {}
        for node in owners.values():
            counts[node] = counts.get(node, 0) + 1
        return len(owners) == SHARDS and len(counts) == n_nodes and max(counts.values()) <= cap

    return ok
