"""Scale-out: which scheduler node serves which shard (brief §7, issue 7).

Every task belongs to one of ``shard_count`` shards (``scheduler.jitter.shard_of``).
:class:`Membership` registers the node in etcd under a kept-alive lease, places shards
on the live nodes by rendezvous hashing with bounded loads, and claims each with a
create-if-absent transaction, so a shard has at most one owner; :class:`LocalMembership`
owns every shard (single node, embedded mode); :class:`LeasedMembership` owns every
shard while it holds an exclusive lease on the database (:class:`PostgresLease`, an
advisory lock, or :class:`FileLease` beside an SQLite file), so a node without etcd
never shares its shards with a second one. All satisfy :class:`ShardMembership` and
report changes to a :class:`ShardListener`. ``docs/cluster.md`` has the protocol.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from scheduler.cluster._config import ClusterConfig
from scheduler.cluster._local import LocalMembership
from scheduler.cluster._protocol import ShardListener, ShardMembership
from scheduler.cluster._rendezvous import assign, desired

if TYPE_CHECKING:
    from scheduler.cluster._etcd import Membership
    from scheduler.cluster._lease import (
        FileLease,
        LeaseHeld,
        NodeLease,
        PostgresLease,
        holder_name,
    )
    from scheduler.cluster._leased import LeasedMembership

# The backends that need a network client (etcd, PostgreSQL) load on first use, so
# that importing this package (as the engine does) loads neither the client nor grpc.
_LAZY = {
    "Membership": "scheduler.cluster._etcd",
    "FileLease": "scheduler.cluster._lease",
    "LeaseHeld": "scheduler.cluster._lease",
    "NodeLease": "scheduler.cluster._lease",
    "PostgresLease": "scheduler.cluster._lease",
    "holder_name": "scheduler.cluster._lease",
    "LeasedMembership": "scheduler.cluster._leased",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


__all__ = [
    "ClusterConfig",
    "FileLease",
    "LeaseHeld",
    "LeasedMembership",
    "LocalMembership",
    "Membership",
    "NodeLease",
    "PostgresLease",
    "ShardListener",
    "ShardMembership",
    "assign",
    "desired",
    "holder_name",
]
