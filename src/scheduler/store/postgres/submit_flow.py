"""Flow control at submission on PostgreSQL (issue 43), inside the inserting
transaction.

Owns :func:`debounce`: one call of ``tickwheel_debounce()`` (migration 0020), which
takes the (tenant, key) row's lock and either pushes the pending task of the key (due
time and, by option, payload) or points the key at the new task the caller then
inserts in the same transaction. A pushed task's owner hears of its new due time at
commit (:func:`.notices.notify_moved`). :func:`throttle`: ``tickwheel_throttle()``,
the same under a throttle key's lock (the idempotency window's rule, shared with
SQLite, is :func:`scheduler.store._common.key_window`). Called by :mod:`.tasks`.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from scheduler.store.postgres.notices import notify_moved
from scheduler.types import DebouncePayload, NewTask, TaskKey

if TYPE_CHECKING:
    from scheduler.store.postgres._db import Conn

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_US = timedelta(microseconds=1)


async def debounce(
    conn: Conn, q: Mapping[str, str], task: NewTask, payload: str, now: datetime
) -> TaskKey | None:
    """None: ``task`` starts a new burst (the caller inserts it); else the key of the
    pending task that took this submission."""
    assert task.flow is not None
    assert task.flow.debounce is not None
    d = task.flow.debounce
    row = await conn.fetchrow(
        q["debounce"],
        task.tenant_id,
        d.key,
        task.id,
        task.scheduled_at,
        now,
        float(d.period_s),
        float(d.max_delay_s),
        d.payload is DebouncePayload.FIRST,
        payload,
    )
    assert row is not None
    if row["r_created"]:
        return None
    if row["r_preloaded"]:  # a SCHEDULED one is in no wheel: its claim reads the new time
        await notify_moved(conn, row["r_shard"], row["r_task"], (row["r_due"] - _EPOCH) // _US)
    return TaskKey(row["r_task"], row["r_scheduled"])


async def throttle(conn: Conn, q: Mapping[str, str], task: NewTask) -> TaskKey | None:
    """None: ``task`` opens a new period of its throttle key (the caller inserts it);
    else the key of the task whose period it falls in."""
    assert task.flow is not None
    assert task.flow.throttle is not None
    t = task.flow.throttle
    row = await conn.fetchrow(
        q["throttle"],
        task.tenant_id,
        t.key,
        task.id,
        task.scheduled_at,
        task.due_at,
        float(t.period_s),
    )
    assert row is not None
    return None if row["r_created"] else TaskKey(row["r_task"], row["r_scheduled"])
