"""What both backends agree on about task rows, whatever their column types.

Owns :data:`FAILED` (the states whose entry applies a workflow task's upstream policy)
and :func:`record_from_new` (the :class:`TaskRecord` an insert just wrote, built without
reading it back). Calls only the value types and :mod:`scheduler.store._common`; used by
the PostgreSQL and SQLite parts.
"""

from __future__ import annotations

import json
from datetime import datetime

from scheduler.states import TaskState
from scheduler.store import _common
from scheduler.types import NewTask, RawJSON, TaskRecord

FAILED = (TaskState.DEAD_LETTER, TaskState.CANCELLED)
"""States whose entry applies a workflow task's upstream policy (same transaction)."""


def unresolved(t: NewTask) -> int:
    """A new task's unresolved dependency count: its distinct parents, if it names any."""
    return len(set(t.depends_on)) if t.depends_on else t.unresolved_dependencies


def record_from_new(t: NewTask, payload: str, trace: str | None, now: datetime) -> TaskRecord:
    """The row an insert of ``t`` wrote (``payload``/``trace`` as serialised)."""
    return TaskRecord(
        id=t.id,
        tenant_id=t.tenant_id,
        type=t.type,
        status=t.initial_state,
        scheduled_at=t.scheduled_at,
        due_at=t.due_at,
        idempotency_key=t.idempotency_key,
        shard_id=t.shard_id,
        pool=t.pool,
        strict_timing=t.strict_timing,
        jitter_mode=t.jitter_mode,
        fencing_token=1,
        retry_count=0,
        max_retries=t.max_retries,
        timeout_s=float(t.timeout_s),
        # JSON text that came checked (RawJSON) stays text: no parse on the submit path.
        payload=payload if type(payload) is RawJSON else json.loads(payload),
        result_payload=None,
        checkpoint=None,
        trace_context=_common.loads(trace),
        last_error=None,
        worker_id=None,
        lease_expires_at=None,
        cancel_requested=False,
        workflow_id=t.workflow_id,
        unresolved_dependencies=unresolved(t),
        schedule_id=t.schedule_id,
        created_at=now,
        updated_at=now,
        retry_policy=t.retry_policy,
        concurrency_key=t.concurrency_key,
        rate_limit_key=t.rate_limit_key,
    )
