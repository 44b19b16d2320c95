"""A task row and an assignment for the conversion and wire tests (and the codec
benchmarks): plausible values, any field overridden."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from scheduler.jitter import JitterMode
from scheduler.jsonbytes import RawJSON
from scheduler.states import TaskState
from scheduler.types import Assignment, Pool, TaskKey, TaskRecord

NOW = datetime(2030, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)


def task_record(**kw: Any) -> TaskRecord:
    """A PRELOADED row as an insert leaves it (a new id each call), with ``kw`` set."""
    base: dict[str, Any] = dict(
        id=uuid.uuid4(),
        tenant_id=uuid.uuid4(),
        type="email",
        status=TaskState.PRELOADED,
        scheduled_at=NOW,
        due_at=NOW + timedelta(seconds=5),
        idempotency_key="",
        shard_id=12,
        pool=Pool.STANDARD,
        strict_timing=False,
        jitter_mode=JitterMode.SYMMETRIC,
        fencing_token=0,
        retry_count=0,
        max_retries=3,
        timeout_s=0.0,
        payload=RawJSON('{"a": 1}'),
        result_payload=None,
        checkpoint=None,
        trace_context=None,
        last_error="",
        worker_id="",
        lease_expires_at=None,
        cancel_requested=False,
        workflow_id=None,
        unresolved_dependencies=0,
        schedule_id=None,
        created_at=NOW,
        updated_at=NOW,
    )
    base.update(kw)
    return TaskRecord(**base)


def assignment(**kw: Any) -> Assignment:
    """A first attempt's assignment (a new task id and tenant each call), due at NOW,
    with ``kw`` set."""
    base: dict[str, Any] = dict(
        key=TaskKey(uuid.uuid4(), NOW),
        tenant_id=uuid.uuid4(),
        type="t",
        payload=RawJSON('{"a": 1}'),
        fencing_token=1,
        attempt=1,
        max_retries=3,
        due_at=NOW,
        lease_expires_at=NOW + timedelta(seconds=30),
        checkpoint=None,
        trace_context=None,
        pool=Pool.STANDARD,
        worker_id="w",
        timeout_s=0.0,
    )
    base.update(kw)
    return Assignment(**base)
