"""What a tenant's home move carries of flow control (issue 43), for :mod:`.move`.

The tenant's own rows of the flow tables go with it, replaced whole at each copy as its
schedules are (a row per type, key or pause: small): its concurrency limits
(migration 0018), rate limits and dispatch pauses (0019; an all-tenants pause, the nil
tenant's row, belongs to no tenant and stays), and its debounce and throttle keys
(0020). A window that still holds at the source holds at the new home too: the tasks
that a throttle period still open or an idempotency key's unexpired TTL names are
copied even when they are finished (they are what the new home answers a submission
inside the window with); other finished tasks stay at the source, as before.

The flip deletes the limits and pauses at the source (its nodes stop applying them);
the debounce and throttle keys stay there with the tenant's history (no node of the
source serves the tenant; a move back replaces them). Owns no connection: the move's
two connections are passed in.
"""

from __future__ import annotations

import uuid
from typing import Any

FLOW_TABLES: tuple[str, ...] = (
    "concurrency_limits",
    "rate_limits",
    "dispatch_pauses",
    "debounce_keys",
    "throttle_keys",
)
"""The tenant-scoped flow tables a move copies whole."""

RULE_TABLES: tuple[str, ...] = FLOW_TABLES[:3]
"""Of them, the rules the source's nodes apply: deleted there by the flip."""

FLOW_PARTS: dict[str, str] = {
    table: f"SELECT coalesce(jsonb_agg(to_jsonb(r)), '[]')::text FROM {table} r"
    " WHERE tenant_id = $1 AND $2::uuid[] IS NOT NULL"
    for table in FLOW_TABLES
}
"""Each flow table's part of a copy, as :data:`.move._PARTS` (every column)."""

DEBOUNCED = (
    "SELECT t.id, md5(t.payload::text) AS digest FROM debounce_keys k"
    " JOIN tasks t ON t.id = k.task_id AND t.scheduled_at = k.scheduled_at"
    " WHERE k.tenant_id = $1 AND t.tenant_id = $1 AND t.status IN ('SCHEDULED', 'PRELOADED')"
)
"""The pending debounced tasks' payloads: a debounced submission may replace a task's
payload alone (its due time held at the burst's max_delay cap), which the move's task
digest leaves out; these few are compared apart."""

FLOW_MD5 = (
    "(SELECT md5(concat_ws('|', "
    + ", ".join(
        [
            f"(SELECT coalesce(string_agg(to_jsonb(r)::text, ',' ORDER BY to_jsonb(r)::text),"
            f" '') FROM {table} r WHERE tenant_id = $1)"
            for table in FLOW_TABLES
        ]
        + [f"(SELECT coalesce(string_agg(id || digest, ',' ORDER BY id), '') FROM ({DEBOUNCED}) d)"]
    )
    + "))) AS flow_md5"
)
"""The fingerprint's column of the flow rows and the debounced payloads: a rule set, a
debounce or throttle key moved, or a pending task's payload replaced after the last
copy makes the flip copy again."""

_WINDOW_TASKS = (
    "SELECT task_id FROM throttle_keys WHERE tenant_id = $1 AND next_at > now()"
    " UNION SELECT task_id FROM task_keys"
    " WHERE tenant_id = $1 AND expires_at IS NOT NULL AND expires_at > now()"
)
"""The tasks of the open windows; the keys with a TTL through their partial index
(migration 0021), not every key row of the tenant."""


async def window_tasks(src: Any, tid: uuid.UUID, live: set[uuid.UUID]) -> list[uuid.UUID]:
    """The finished tasks whose window still holds at the source (see the module
    docstring); read in the copy's snapshot."""
    return [r["task_id"] for r in await src.fetch(_WINDOW_TASKS, tid) if r["task_id"] not in live]


async def repayloaded(
    src: Any, dst: Any, tid: uuid.UUID, live: dict[uuid.UUID, str]
) -> list[uuid.UUID]:
    """The live pending debounced tasks whose payload differs between the two ends."""
    at_src = {r["id"]: r["digest"] for r in await src.fetch(DEBOUNCED, tid)}
    at_dst = {r["id"]: r["digest"] for r in await dst.fetch(DEBOUNCED, tid)}
    return [i for i, d in at_src.items() if i in live and at_dst.get(i) != d]


async def delete_flow(conn: Any, tid: uuid.UUID, tables: tuple[str, ...] = FLOW_TABLES) -> None:
    """Delete the tenant's rows of ``tables`` (in the caller's transaction)."""
    for table in tables:
        await conn.execute(f"DELETE FROM {table} WHERE tenant_id = $1", tid)
