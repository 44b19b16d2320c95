"""Which node should own which shard: rendezvous hashing with bounded loads.

Plain rendezvous (highest random weight) hashing moves only the shards of a node that
joins or leaves, but its loads are multinomial: with 256 shards on 5 nodes one node can
easily get 30 % more than its share. Here every node takes at most ``ceil(S / N)``
shards: all (shard, node) pairs are ranked by their weight and taken greedily, highest
first, skipping a pair whose shard is already placed or whose node is full. A shard
therefore lands on its top-ranked node unless that node filled up with shards it ranks
higher, so a join or leave still moves about ``S / N`` shards (measured in
``tests/unit/cluster``), and the result depends only on the set of node ids: every node
computes the same map from the same view, in any process, on any machine.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable

import xxhash


def weight(shard: int, node_id: str) -> int:
    """The stable 64-bit rendezvous weight of ``node_id`` for ``shard``."""
    return int(xxhash.xxh3_64_intdigest(shard.to_bytes(4, "big") + node_id.encode()))


def assign(shard_count: int, node_ids: Iterable[str]) -> dict[int, str]:
    """The owner of every shard for this set of live nodes ({} when there are none)."""
    nodes = sorted(set(node_ids))
    if shard_count <= 0:
        raise ValueError(f"shard_count must be positive, got {shard_count}")
    if not nodes:
        return {}
    cap = -(-shard_count // len(nodes))
    # Ties on the 64-bit weight are broken by node id, so the order is total.
    ranked = sorted(((weight(s, n), n, s) for s in range(shard_count) for n in nodes), reverse=True)
    owner: dict[int, str] = {}
    load = dict.fromkeys(nodes, 0)
    for _, node, shard in ranked:
        if shard in owner or load[node] >= cap:
            continue
        owner[shard] = node
        load[node] += 1
        if len(owner) == shard_count:
            break
    return owner


def desired(shard_count: int, node_ids: Iterable[str], node_id: str) -> frozenset[int]:
    """The shards ``node_id`` should own when ``node_ids`` are the live nodes.

    Cached per set of live nodes: a node asks every etcd round (four times a second),
    and ranking every (shard, node) pair cost an idle node a tenth of its CPU."""
    return _desired(shard_count, frozenset(node_ids), node_id)


@functools.lru_cache(maxsize=32)
def _desired(shard_count: int, node_ids: frozenset[str], node_id: str) -> frozenset[int]:
    return frozenset(s for s, n in assign(shard_count, node_ids).items() if n == node_id)
