"""Scale-out: which scheduler node serves which shard (brief §7, issue 7).

Every task belongs to one of ``shard_count`` shards (``scheduler.jitter.shard_of``).
:class:`Membership` registers the node in etcd under a kept-alive lease, places shards
on the live nodes by rendezvous hashing with bounded loads, and claims each with a
create-if-absent transaction, so a shard has at most one owner; :class:`LocalMembership`
owns every shard (single node, embedded mode). Both satisfy :class:`ShardMembership`
and report changes to a :class:`ShardListener`. ``docs/cluster.md`` has the protocol.
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

# The backends that need a network client (etcd, Redis) load on first use, so that
# importing this package (as the engine does) loads neither the client nor grpc.
_LAZY = {
    "Membership": "scheduler.cluster._etcd",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


__all__ = [
    "ClusterConfig",
    "LocalMembership",
    "Membership",
    "ShardListener",
    "ShardMembership",
    "assign",
    "desired",
]
