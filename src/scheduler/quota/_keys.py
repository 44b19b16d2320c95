"""Every Redis key the quota gate uses, in one place.

All keys share the hash tag ``{prefix}`` so one script may touch many tenants' keys
(a Redis Cluster requires every key of a script to live in one slot).
"""

from __future__ import annotations

import uuid


def _root(prefix: str) -> str:
    return f"{{{prefix}}}:quota"


def nodes(prefix: str) -> str:
    """ZSET: scheduler node id -> lease expiry (Redis server time, ms)."""
    return f"{_root(prefix)}:nodes"


def bucket(prefix: str, tenant: uuid.UUID) -> str:
    """HASH: the tenant's token bucket (``tokens`` in milli-tokens, ``ts`` ms, ``rate``)."""
    return f"{_root(prefix)}:bucket:{tenant}"


def in_flight(prefix: str, tenant: uuid.UUID) -> str:
    """HASH: node id -> units that node has in flight for the tenant."""
    return f"{_root(prefix)}:inflight:{tenant}"
