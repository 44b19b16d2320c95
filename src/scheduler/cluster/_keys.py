"""Every etcd key the cluster uses, in one place."""

from __future__ import annotations


def cluster(prefix: str) -> str:
    """Prefix of every key of the cluster (the registrations and the ownership keys,
    read together in one range read)."""
    return f"{prefix}/"


def nodes(prefix: str) -> str:
    """Prefix of the live-node registrations (one key per node, on its lease)."""
    return f"{prefix}/nodes/"


def node(prefix: str, node_id: str) -> str:
    """A node's registration; value = node id, attached to the node's lease."""
    return f"{nodes(prefix)}{node_id}"


def shards(prefix: str) -> str:
    """Prefix of the shard ownership keys."""
    return f"{prefix}/shards/"


def shard(prefix: str, shard_id: int) -> str:
    """A shard's owner; value = node id, attached to the owner's lease. Created only if
    absent (``create_revision == 0``), so a shard has at most one owner; the key's
    create revision names that ownership (the claim revision)."""
    return f"{shards(prefix)}{shard_id}"


def shard_of_key(prefix: str, key: str) -> int | None:
    """The shard number of an ownership key (None for anything else under the prefix)."""
    tail = key.removeprefix(shards(prefix))
    return int(tail) if tail != key and tail.isdigit() else None
