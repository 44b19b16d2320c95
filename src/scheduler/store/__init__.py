"""The durable record: the :class:`Store` protocol and its two implementations.

``open_store("postgresql://...")`` gives the production store (asyncpg), and
``open_store("sqlite:///path/to/file.db")`` or ``open_store("sqlite://:memory:")`` the
embedded one. PostgreSQL must be migrated first (:func:`migrate`,
``tickwheel migrate --postgres-dsn DSN``).
"""

from __future__ import annotations

from typing import Any

from scheduler.store._config import StoreConfig
from scheduler.store._errors import StoreUnavailable
from scheduler.store.protocol import (
    HORIZONS,
    DepthRow,
    MoveCallback,
    ReplicationLag,
    Store,
    WorkCallback,
    WorkNotices,
)
from scheduler.types import (
    JSON,
    UPSTREAM_FAILED,
    ApiKey,
    Assignment,
    CancelResult,
    CompleteResult,
    Completion,
    DispatchRequest,
    Expectation,
    FailResult,
    Failure,
    FencedWrite,
    InsertResult,
    MaintenanceResult,
    NewTask,
    Outcome,
    OverlapPolicy,
    Page,
    Pool,
    Preloaded,
    ReclaimResult,
    Release,
    Schedule,
    ShardClaim,
    TaskFilter,
    TaskKey,
    TaskRecord,
    Tenant,
    Transition,
    UpstreamPolicy,
    Workflow,
    WorkflowView,
    raise_for_outcome,
)

__all__ = [
    "HORIZONS",
    "JSON",
    "UPSTREAM_FAILED",
    "ApiKey",
    "Assignment",
    "CancelResult",
    "CompleteResult",
    "Completion",
    "DepthRow",
    "DispatchRequest",
    "Expectation",
    "FailResult",
    "Failure",
    "FencedWrite",
    "InsertResult",
    "MaintenanceResult",
    "MoveCallback",
    "NewTask",
    "Outcome",
    "OverlapPolicy",
    "Page",
    "Pool",
    "Preloaded",
    "ReclaimResult",
    "Release",
    "ReplicationLag",
    "Schedule",
    "ShardClaim",
    "Store",
    "StoreConfig",
    "StoreUnavailable",
    "TaskFilter",
    "TaskKey",
    "TaskRecord",
    "Tenant",
    "Transition",
    "UpstreamPolicy",
    "WorkCallback",
    "WorkNotices",
    "Workflow",
    "WorkflowView",
    "migrate",
    "open_store",
    "raise_for_outcome",
]


async def migrate(dsn: str) -> list[int]:
    """Apply pending PostgreSQL migrations; returns the versions applied (idempotent)."""
    from scheduler.store.postgres import migrate as _migrate

    return await _migrate(dsn)


async def open_store(url: str, **opts: Any) -> Store:
    """Open a store by URL; ``opts`` are :class:`StoreConfig` fields (or ``config=``).

    - ``postgresql://user@host:port/db`` (or ``postgres://``): :class:`PostgresStore`;
      the schema must be migrated.
    - ``sqlite:///relative/or/absolute/path.db``, ``sqlite:////abs/path.db`` or
      ``sqlite://:memory:``: :class:`SqliteStore` (creates its schema itself).
    """
    config = opts.pop("config", None) or StoreConfig(**opts)
    if url.startswith(("postgresql://", "postgres://")):
        from scheduler.store.postgres import PostgresStore

        return await PostgresStore.open(url, config)
    if url.startswith("sqlite://"):
        from scheduler.store.sqlite import SqliteStore

        rest = url[len("sqlite://") :]
        path = ":memory:" if rest in (":memory:", "/:memory:") else rest.removeprefix("/")
        if not path:
            raise ValueError(f"no database path in {url!r}")
        return await SqliteStore.open(path, config)
    raise ValueError(f"unsupported store URL {url!r} (postgresql:// or sqlite://)")
