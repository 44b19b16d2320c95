"""SQLite column codecs and row -> record conversions.

Owns how a value is stored in SQLite (UUIDs as text, times as integer microseconds since
the epoch, booleans as 0/1) and the conversion of ``tasks``, ``tenants``, ``workflows``,
``cron_schedules`` and ``job_expectations`` rows into :mod:`scheduler.types` records.
Pure functions; calls nothing but the value types. Every SQLite part uses it.
"""

from __future__ import annotations

import json
import sqlite3
import uuid
from datetime import datetime, timedelta

from scheduler.jitter import JitterMode
from scheduler.states import TaskState
from scheduler.store import _common
from scheduler.types import (
    Assignment,
    Expectation,
    OverlapPolicy,
    Pool,
    Preloaded,
    Schedule,
    TaskKey,
    TaskRecord,
    Tenant,
    UpstreamPolicy,
    Workflow,
)


def us(t: datetime) -> int:
    """A time as microseconds since the epoch (how SQLite stores it)."""
    return (t - _common.EPOCH) // timedelta(microseconds=1)


def opt_us(t: datetime | None) -> int | None:
    """:func:`us`, None kept."""
    return None if t is None else us(t)


def dt(value: int) -> datetime:
    """Inverse of :func:`us` (UTC)."""
    return _common.EPOCH + timedelta(microseconds=value)


def opt_dt(value: int | None) -> datetime | None:
    """:func:`dt`, None kept."""
    return None if value is None else dt(value)


def opt_uuid(v: str | None) -> uuid.UUID | None:
    """A UUID column that may be NULL."""
    return None if v is None else uuid.UUID(v)


def opt_str(v: uuid.UUID | None) -> str | None:
    """A UUID for a column that may be NULL."""
    return None if v is None else str(v)


def task(r: sqlite3.Row) -> TaskRecord:
    """A ``tasks`` row (``SELECT *``)."""
    return TaskRecord(
        id=uuid.UUID(r["id"]),
        tenant_id=uuid.UUID(r["tenant_id"]),
        type=r["type"],
        status=TaskState(r["status"]),
        scheduled_at=dt(r["scheduled_at"]),
        due_at=dt(r["due_at"]),
        idempotency_key=r["idempotency_key"].split("\x01", 1)[0],
        shard_id=r["shard_id"],
        pool=Pool(r["pool"]),
        strict_timing=bool(r["strict_timing"]),
        jitter_mode=JitterMode(r["jitter_mode"]),
        fencing_token=r["fencing_token"],
        retry_count=r["retry_count"],
        max_retries=r["max_retries"],
        timeout_s=float(r["timeout_s"]),
        payload=json.loads(r["payload"]),
        result_payload=_common.loads(r["result_payload"]),
        checkpoint=_common.loads(r["checkpoint"]),
        trace_context=_common.loads(r["trace_context"]),
        last_error=r["last_error"],
        worker_id=r["worker_id"],
        lease_expires_at=opt_dt(r["lease_expires_at"]),
        cancel_requested=bool(r["cancel_requested"]),
        workflow_id=opt_uuid(r["workflow_id"]),
        unresolved_dependencies=r["unresolved_dependencies"],
        schedule_id=opt_uuid(r["schedule_id"]),
        created_at=dt(r["created_at"]),
        updated_at=dt(r["updated_at"]),
        retry_policy=_common.retry_policy_of(r["retry_policy"]),
        last_error_type=r["last_error_type"],
        last_traceback=r["last_traceback"],
        concurrency_key=r["concurrency_key"],
        rate_limit_key=r["rate_limit_key"] or "",
    )


def preloaded(r: sqlite3.Row) -> Preloaded:
    """What the wheel needs of a ``tasks`` row."""
    return Preloaded(
        TaskKey(uuid.UUID(r["id"]), dt(r["scheduled_at"])),
        dt(r["due_at"]),
        uuid.UUID(r["tenant_id"]),
        r["shard_id"],
        Pool(r["pool"]),
        r["type"],
        r["rate_limit_key"] or "",
    )


def assignment(r: sqlite3.Row) -> Assignment:
    """A dispatched ``tasks`` row (``RETURNING *``) as the worker receives it."""
    return Assignment(
        key=TaskKey(uuid.UUID(r["id"]), dt(r["scheduled_at"])),
        tenant_id=uuid.UUID(r["tenant_id"]),
        type=r["type"],
        payload=json.loads(r["payload"]),
        fencing_token=r["fencing_token"],
        attempt=r["retry_count"] + 1,
        max_retries=r["max_retries"],
        due_at=dt(r["due_at"]),
        lease_expires_at=dt(r["lease_expires_at"]),
        checkpoint=_common.loads(r["checkpoint"]),
        trace_context=_common.loads(r["trace_context"]),
        pool=Pool(r["pool"]),
        worker_id=r["worker_id"],
        timeout_s=float(r["timeout_s"]),
        concurrency_key=r["concurrency_key"],
    )


def tenant(r: sqlite3.Row) -> Tenant:
    """A ``tenants`` row."""
    return Tenant(
        id=uuid.UUID(r["id"]),
        name=r["name"],
        tier=r["tier"],
        rate_limit_rps=r["rate_limit_rps"],
        max_concurrent_workers=r["max_concurrent_workers"],
        home_region=r["home_region"],
        created_at=dt(r["created_at"]),
    )


def workflow(r: sqlite3.Row) -> Workflow:
    """A ``workflows`` row."""
    return Workflow(
        id=uuid.UUID(r["id"]),
        tenant_id=uuid.UUID(r["tenant_id"]),
        name=r["name"],
        idempotency_key=r["idempotency_key"],
        on_upstream_failure=UpstreamPolicy(r["on_upstream_failure"]),
        node_count=r["node_count"],
        created_at=dt(r["created_at"]),
    )


def schedule(r: sqlite3.Row) -> Schedule:
    """A ``cron_schedules`` row."""
    return Schedule(
        id=uuid.UUID(r["id"]),
        tenant_id=uuid.UUID(r["tenant_id"]),
        name=r["name"],
        cron_expr=r["cron_expr"],
        interval_s=float(r["interval_s"]),
        timezone=r["timezone"],
        task_type=r["task_type"],
        payload=json.loads(r["payload"]),
        pool=Pool(r["pool"]),
        max_retries=r["max_retries"],
        timeout_s=float(r["timeout_s"]),
        overlap_policy=OverlapPolicy(r["overlap_policy"]),
        catchup_window_s=float(r["catchup_window_s"]),
        jitter_s=float(r["jitter_s"]),
        enabled=bool(r["enabled"]),
        next_fire_at=opt_dt(r["next_fire_at"]),
        last_fired_at=opt_dt(r["last_fired_at"]),
        buffered_at=opt_dt(r["buffered_at"]),
        created_at=dt(r["created_at"]),
        updated_at=dt(r["updated_at"]),
    )


def expectation(r: sqlite3.Row) -> Expectation:
    """A ``job_expectations`` row."""
    return Expectation(
        id=uuid.UUID(r["id"]),
        tenant_id=uuid.UUID(r["tenant_id"]),
        job_id=r["job_id"],
        interval_s=r["interval_s"],
        tolerance_s=r["tolerance_s"],
        schedule_id=opt_uuid(r["schedule_id"]),
        max_runtime_s=r["max_runtime_s"],
        created_at=dt(r["created_at"]),
    )
