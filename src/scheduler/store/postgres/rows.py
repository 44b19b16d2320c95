"""PostgreSQL row -> record conversions (asyncpg already decodes UUIDs and times).

Owns how ``tasks``, ``tenants``, ``workflows``, ``cron_schedules`` and
``job_expectations`` rows become :mod:`scheduler.types` records. Pure functions; calls
nothing but the value types. Every PostgreSQL part uses it.
"""

from __future__ import annotations

import array
import json
import sys
from collections.abc import Sequence

import asyncpg

from scheduler.jitter import JitterMode
from scheduler.states import TaskState
from scheduler.store import _common
from scheduler.types import (
    Expectation,
    OverlapPolicy,
    Pool,
    Preloaded,
    PreloadedGroup,
    PreloadedPage,
    Schedule,
    TaskKey,
    TaskRecord,
    Tenant,
    UpstreamPolicy,
    Workflow,
)

POOLS = {p.value: p for p in Pool}
"""Pool by its column value (a dict lookup on the dispatch path)."""


def task(row: asyncpg.Record) -> TaskRecord:
    """A ``tasks`` row (``SELECT *``)."""
    return TaskRecord(
        id=row["id"],
        tenant_id=row["tenant_id"],
        type=row["type"],
        status=TaskState(row["status"]),
        scheduled_at=row["scheduled_at"],
        due_at=row["due_at"],
        idempotency_key=row["idempotency_key"],
        shard_id=row["shard_id"],
        pool=Pool(row["pool"]),
        strict_timing=row["strict_timing"],
        jitter_mode=JitterMode(row["jitter_mode"]),
        fencing_token=row["fencing_token"],
        retry_count=row["retry_count"],
        max_retries=row["max_retries"],
        timeout_s=row["timeout_s"],
        payload=json.loads(row["payload"]),
        result_payload=_common.loads(row["result_payload"]),
        checkpoint=_common.loads(row["checkpoint"]),
        trace_context=_common.loads(row["trace_context"]),
        last_error=row["last_error"],
        worker_id=row["worker_id"],
        lease_expires_at=row["lease_expires_at"],
        cancel_requested=row["cancel_requested"],
        workflow_id=row["workflow_id"],
        unresolved_dependencies=row["unresolved_dependencies"],
        schedule_id=row["schedule_id"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        retry_policy=_common.retry_policy_of(row["retry_policy"]),
        last_error_type=row["last_error_type"],
        last_traceback=row["last_traceback"],
        concurrency_key=row.get("concurrency_key"),
        rate_limit_key=row["rate_limit_key"] or "",
    )


def preloaded(row: asyncpg.Record) -> Preloaded:
    """What the wheel needs of a ``tasks`` row."""
    return Preloaded(
        TaskKey(row["id"], row["scheduled_at"]),
        row["due_at"],
        row["tenant_id"],
        row["shard_id"],
        Pool(row["pool"]),
        row["type"],
        row["rate_limit_key"] or "",
    )


_PG_EPOCH_US = 946_684_800_000_000
"""PostgreSQL's binary timestamps count µs from 2000-01-01; this is that instant in µs
from 1970-01-01."""


def _int64s(raw: bytes, offset: int = 0) -> array.array[int]:
    """Big-endian int64s (``int8send``, ``timestamptz_send``) as ``array('q')``, plus
    ``offset``."""
    out = array.array("q")
    out.frombytes(raw)
    if sys.byteorder == "little":
        out.byteswap()
    if offset:
        out = array.array("q", [v + offset for v in out])
    return out


def preloaded_page(found: Sequence[asyncpg.Record]) -> PreloadedPage:
    """The rows of ``load_preloaded_packed``: one per (tenant, type, pool)."""
    groups = []
    for r in found:
        shards = array.array("i")
        shards.frombytes(r["shards"])
        if sys.byteorder == "little":
            shards.byteswap()
        groups.append(
            PreloadedGroup(
                tenant_id=r["tenant_id"],
                type=r["type"],
                pool=Pool(r["pool"]),
                ids=r["ids"],
                scheduled_us=_int64s(r["scheduled"], _PG_EPOCH_US),
                due_us=_int64s(r["due"], _PG_EPOCH_US),
                shards=array.array("q", shards),
                rate_key=r["rate_limit_key"] or "",
            )
        )
    last = TaskKey(found[0]["last_id"], found[0]["last_at"]) if found else None
    return PreloadedPage(groups=tuple(groups), count=sum(r["n"] for r in found), last=last)


def keys_of(keys: Sequence[TaskKey], found: Sequence[asyncpg.Record]) -> list[TaskKey]:
    """The keys (each once) of the tasks a batch statement returned (column ``id``)."""
    ids = {r["id"] for r in found}
    return list({k.id: k for k in keys if k.id in ids}.values())


def tenant(row: asyncpg.Record) -> Tenant:
    """A ``tenants`` row."""
    return Tenant(
        id=row["id"],
        name=row["name"],
        tier=row["tier"],
        rate_limit_rps=row["rate_limit_rps"],
        max_concurrent_workers=row["max_concurrent_workers"],
        home_region=row["home_region"],
        created_at=row["created_at"],
    )


def workflow(r: asyncpg.Record) -> Workflow:
    """A ``workflows`` row."""
    return Workflow(
        id=r["id"],
        tenant_id=r["tenant_id"],
        name=r["name"],
        idempotency_key=r["idempotency_key"],
        on_upstream_failure=UpstreamPolicy(r["on_upstream_failure"]),
        node_count=r["node_count"],
        created_at=r["created_at"],
    )


def schedule(r: asyncpg.Record) -> Schedule:
    """A ``cron_schedules`` row."""
    return Schedule(
        id=r["id"],
        tenant_id=r["tenant_id"],
        name=r["name"],
        cron_expr=r["cron_expr"],
        interval_s=r["interval_s"],
        timezone=r["timezone"],
        task_type=r["task_type"],
        payload=json.loads(r["payload"]),
        pool=Pool(r["pool"]),
        max_retries=r["max_retries"],
        timeout_s=r["timeout_s"],
        overlap_policy=OverlapPolicy(r["overlap_policy"]),
        catchup_window_s=r["catchup_window_s"],
        jitter_s=r["jitter_s"],
        enabled=r["enabled"],
        next_fire_at=r["next_fire_at"],
        last_fired_at=r["last_fired_at"],
        buffered_at=r["buffered_at"],
        created_at=r["created_at"],
        updated_at=r["updated_at"],
    )


def expectation(r: asyncpg.Record) -> Expectation:
    """A ``job_expectations`` row."""
    return Expectation(
        id=r["id"],
        tenant_id=r["tenant_id"],
        job_id=r["job_id"],
        interval_s=r["interval_s"],
        tolerance_s=r["tolerance_s"],
        schedule_id=r["schedule_id"],
        max_runtime_s=r["max_runtime_s"],
        created_at=r["created_at"],
    )
