"""Moving a tenant's home from one region's PostgreSQL to another's (issue 16).

Owns :func:`move_tenant`, the store side of ``tickwheel tenants move``: the pre-copy,
the freeze, the copy of what changed, the checked flip, all resumable. Calls asyncpg on
two databases (the source S and the target T) with the system scope; called by the
CLI. The protocol (docs/regions.md, "Moving a tenant's home"):

1. **Prepare T** (no pause): ``tenant_moves`` at T says ``target/frozen`` (T's nodes do
   not serve the tenant), then the tenant row (``home_region`` = T) and its API keys.
2. **Pre-copy** (no pause): a REPEATABLE READ snapshot of the tenant's live rows at S
   goes into T: its tasks SCHEDULED, PRELOADED, RETRYING, DISPATCHED, RUNNING (tokens,
   worker ids and leases kept; a PRELOADED row arrives SCHEDULED, for T's pre-loader),
   their idempotency keys and DAG edges, and every workflow, schedule and expectation;
   its flow control rows (concurrency and rate limits, dispatch pauses, debounce and
   throttle keys) and the finished tasks a still open window names (:mod:`.move_flow`).
3. **Freeze S**: ``tenant_moves`` at S says ``source/frozen``. S's nodes read the table
   every ``move_poll_interval_s``; from then on they answer the tenant's calls
   TENANT_MOVING (UNAVAILABLE; the SDKs make the call again), dispatch none of its
   tasks and end its worker streams.
4. **Copy what changed** since the pre-copy: each live task's digest (state, token,
   attempt, due time, worker, checkpoint; PRELOADED counts as SCHEDULED, the lease is
   left out) is compared at both ends, and only the tasks that differ are replaced at
   T, in one transaction (T serves none of it yet). The snapshot's fingerprint (every
   digest, every schedule's next firing) is kept.
5. **Flip S**, one transaction: lock ``tasks`` and ``cron_schedules`` against writers
   (SHARE ROW EXCLUSIVE: S's other tenants' task writes wait for this transaction:
   tens of milliseconds, about 0.3 s for 5,000 live tasks), compute the fingerprint
   again; if anything changed since the copy (a write that was in flight when the
   freeze began), roll back and copy again. Else delete its live tasks (with their
   keys and edges), schedules, expectations, limits and pauses at S, set its
   ``home_region`` to T and ``tenant_moves`` to ``source/done``: from now on S forwards
   its calls to T. A write to a deleted row finds nothing (a worker's is refused as
   stale, a dispatch commits nothing), and the one statement that inserts tasks
   refuses a tenant with a ``source`` row (a late submission gets TENANT_MOVING and is
   made again, at T).
6. **Open T**: the leases of the copied DISPATCHED/RUNNING tasks are brought up to the
   values S last held (heartbeats during the copy) plus the pause (no node heard their
   workers meanwhile), and ``tenant_moves`` at T says
   ``target/done``: T's nodes serve the tenant. The pause ends here.

A task is never live in two regions: T dispatches nothing of the tenant before step 6,
S nothing after step 3, and the flip proves T holds exactly what S held.

Terminal history (COMPLETED, CANCELLED, DEAD_LETTER rows, the completion ledger and the
audit) stays at S; it is not copied.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import asyncpg

from scheduler._errors import FailedPrecondition, NotFound, StoreError
from scheduler.regions import check_region_name
from scheduler.store.postgres._db import driver_errors
from scheduler.store.postgres.move_flow import (
    FLOW_MD5,
    FLOW_PARTS,
    FLOW_TABLES,
    RULE_TABLES,
    delete_flow,
    repayloaded,
    window_tasks,
)

LIVE_STATES: tuple[str, ...] = ("SCHEDULED", "PRELOADED", "RETRYING", "DISPATCHED", "RUNNING")
"""Task states that move with the tenant (everything not terminal)."""

_Lease = tuple[datetime, datetime]
"""A leased task's (scheduled_at, lease_expires_at)."""

RECONNECT_MARGIN_S = 2.0
"""Added to a moved task's lease beyond the pause: the worker SDK's reconnect back-off
ceiling (``ReconnectConfig.max_backoff_s``), the longest a worker waits before it
reconnects to the new home and heartbeats there."""

MAX_COPY_ROUNDS = 20
"""Copies tried before the move gives up and unfreezes (each one after a flip found
that the source changed since its copy)."""

_DIGEST = """md5(concat_ws('|', id,
    CASE status WHEN 'PRELOADED' THEN 'SCHEDULED' ELSE status END,
    fencing_token, retry_count, due_at, worker_id, cancel_requested,
    unresolved_dependencies, md5(coalesce(checkpoint::text, '')),
    md5(coalesce(last_error, ''))))"""
"""One live task's state as the move compares it. PRELOADED counts as SCHEDULED (a
pre-loader claim, at either end, changes nothing that moves) and the lease is left out
(heartbeats; the last value S held is carried over when T opens). The payload is left
out too (hashing every live task's payload doubled the digest's cost): the only change
of a live task's payload, a debounced submission's, is compared apart
(:data:`.move_flow.DEBOUNCED`). Both connections
read times in UTC, so the two databases spell them alike."""

_OF_TENANT = (
    "tenant_id = $1 AND (id, scheduled_at) IN"
    " (SELECT k.task_id, k.scheduled_at FROM task_keys k WHERE k.tenant_id = $1)"
)
"""The tenant's tasks (a condition on ``tasks``), found through task_keys' listing index
(migration 0022: ``tasks`` has no index by tenant): one primary-key probe a task."""

_DIGESTS = (
    f"SELECT id, {_DIGEST} AS digest FROM tasks WHERE {_OF_TENANT} AND status = ANY($2::text[])"
)

_FINGERPRINT = f"""
SELECT
  (SELECT count(*) FROM tasks WHERE {_OF_TENANT} AND status = ANY($2::text[])) AS tasks,
  (SELECT coalesce(md5(string_agg(d, ',' ORDER BY id)), '')
     FROM (SELECT id, {_DIGEST} AS d FROM tasks
           WHERE {_OF_TENANT} AND status = ANY($2::text[])) r) AS tasks_md5,
  (SELECT coalesce(md5(string_agg(concat_ws('|', id, enabled, next_fire_at,
        last_fired_at, buffered_at, updated_at), ',' ORDER BY id)), '')
     FROM cron_schedules WHERE tenant_id = $1) AS schedules_md5,
  {FLOW_MD5}
"""
"""The tenant's live state the flip must find unchanged since the last copy."""

_PARTS = {
    "tasks": "SELECT coalesce(jsonb_agg(to_jsonb(t)), '[]')::text FROM tasks t"
    " WHERE tenant_id = $1 AND id = ANY($2::uuid[])",
    "task_keys": "SELECT coalesce(jsonb_agg(to_jsonb(k)), '[]')::text FROM task_keys k"
    " WHERE tenant_id = $1 AND task_id = ANY($2::uuid[])",
    "task_dependencies": "SELECT coalesce(jsonb_agg(to_jsonb(d)), '[]')::text"
    " FROM task_dependencies d WHERE parent_task_id = ANY($2::uuid[]) AND $1::uuid IS NOT NULL",
    "workflows": "SELECT coalesce(jsonb_agg(to_jsonb(w)), '[]')::text FROM workflows w"
    " WHERE tenant_id = $1 AND $2::uuid[] IS NOT NULL",
    "cron_schedules": "SELECT coalesce(jsonb_agg(to_jsonb(s)), '[]')::text"
    " FROM cron_schedules s WHERE tenant_id = $1 AND $2::uuid[] IS NOT NULL",
    "job_expectations": "SELECT coalesce(jsonb_agg(to_jsonb(e)), '[]')::text"
    " FROM job_expectations e WHERE tenant_id = $1 AND $2::uuid[] IS NOT NULL",
    **FLOW_PARTS,
}
"""Each table's part of what a copy carries, as one JSON array (every column, so a later
migration's column moves too): the tasks given (new or changed since the last copy),
their keys and DAG edges, every workflow, schedule and expectation, and the flow rows."""


@dataclass(frozen=True)
class Fingerprint:
    """What the flip compares with the copy."""

    tasks: int
    tasks_md5: str
    schedules_md5: str
    flow_md5: str


@dataclass
class MoveReport:
    """What a move did, with its timings (seconds, monotonic)."""

    tenant_id: uuid.UUID
    from_region: str
    to_region: str
    tasks_moved: int = 0
    schedules_moved: int = 0
    copies: int = 0
    """Copy rounds while frozen (1 unless the source changed after a copy)."""
    precopied: int = 0
    """Live tasks copied before the freeze (the rest of the tasks the frozen copy
    carried had changed since)."""
    copied_frozen: int = 0
    """Tasks copied while the tenant was frozen (new or changed since the pre-copy)."""
    resumed: bool = False
    """The command found a move of this tenant under way and finished it."""
    frozen_s: float = 0.0
    """From the freeze's commit at S to the tenant opening at T: the tenant's writes
    are paused this long (plus up to one node poll interval at each end)."""
    copy_s: float = 0.0
    """The copies made while frozen."""
    flip_s: float = 0.0
    """The flip transaction at S (S's other tenants' task writes wait for its lock)."""
    steps: list[tuple[str, float]] = field(default_factory=list)
    """(step, seconds since the command started), in order."""

    def as_dict(self) -> dict[str, object]:
        """The report as JSON-ready values."""
        return {
            "tenant_id": str(self.tenant_id),
            "from_region": self.from_region,
            "to_region": self.to_region,
            "tasks_moved": self.tasks_moved,
            "schedules_moved": self.schedules_moved,
            "copies": self.copies,
            "precopied": self.precopied,
            "copied_frozen": self.copied_frozen,
            "resumed": self.resumed,
            "paused_s": round(self.frozen_s, 4),
            "copy_s": round(self.copy_s, 4),
            "flip_s": round(self.flip_s, 4),
            "steps": [{"step": s, "at_s": round(t, 4)} for s, t in self.steps],
        }


async def _connect(dsn: str) -> asyncpg.Connection:
    # The system scope: the move reads and writes one tenant's rows of every table. UTC:
    # both databases must spell a row's times alike (the digests compare them).
    return await asyncpg.connect(
        dsn, timeout=30, server_settings={"tickwheel.tenant": "*", "TimeZone": "UTC"}
    )


async def move_tenant(
    tenant_id: uuid.UUID,
    *,
    source_dsn: str,
    target_dsn: str,
    source_region: str,
    target_region: str,
    settle_s: float = 0.3,
    max_rounds: int = MAX_COPY_ROUNDS,
    on_step: Callable[[str], Awaitable[None] | None] | None = None,
) -> MoveReport:
    """Move ``tenant_id``'s home from ``source_region`` (database ``source_dsn``) to
    ``target_region`` (``target_dsn``); see the module docstring. Idempotent: a re-run
    after a crash at any step finishes the move (or reports it done).

    ``settle_s``: how long the freeze is given to reach S's nodes before the copy (at
    least their ``move_poll_interval_s``); a copy that misses a late write is only
    repeated, never wrong. FailedPrecondition when the tenant is not at home in
    ``source_region``, or another move of it is under way."""
    check_region_name(source_region, "from")
    check_region_name(target_region, "to")
    if source_region == target_region:
        raise FailedPrecondition("to", f"the tenant is already in {source_region!r}")
    started = time.monotonic()
    report = MoveReport(tenant_id, source_region, target_region)

    async def step(name: str) -> None:
        report.steps.append((name, time.monotonic() - started))
        if on_step is not None:
            result = on_step(name)
            if inspect.isawaitable(result):
                await result

    async with driver_errors():
        src = await _connect(source_dsn)
        try:
            dst = await _connect(target_dsn)
            try:
                await _move(src, dst, report, step, settle_s, max_rounds)
            finally:
                await dst.close()
        finally:
            await src.close()
    return report


async def _move(
    src: asyncpg.Connection,
    dst: asyncpg.Connection,
    report: MoveReport,
    step: Callable[[str], Awaitable[None]],
    settle_s: float,
    max_rounds: int,
) -> None:
    tid, source, target = report.tenant_id, report.from_region, report.to_region
    home = await src.fetchval("SELECT home_region FROM tenants WHERE id = $1", tid)
    if home is None:
        raise NotFound("tenant", f"{tid} (in region {source})")
    move = await src.fetchrow(
        "SELECT role, phase, to_region FROM tenant_moves WHERE tenant_id = $1", tid
    )
    if move is not None and move["role"] == "source":
        if move["to_region"] != target:
            state = "moved" if move["phase"] == "done" else "is moving"
            raise FailedPrecondition(
                "to", f"tenant {tid} {state} to {move['to_region']!r}, not {target!r}"
            )
        report.resumed = True
        if move["phase"] == "done":  # S flipped; T may not have opened yet
            frozen_s = await src.fetchval(
                "SELECT extract(epoch FROM now() - updated_at) FROM tenant_moves"
                " WHERE tenant_id = $1",
                tid,
            )
            await _open_target(dst, tid, {}, float(frozen_s))
            await step("opened")
            return
    elif home != source:
        raise FailedPrecondition("from", f"tenant {tid} lives in {home!r}, not {source!r}")

    tenant = await src.fetchval("SELECT to_jsonb(t)::text FROM tenants t WHERE id = $1", tid)
    keys = await src.fetchval(
        "SELECT coalesce(jsonb_agg(to_jsonb(k)), '[]')::text FROM api_keys k WHERE tenant_id = $1",
        tid,
    )
    await _prepare_target(dst, tid, tenant, keys, source, target)
    await step("prepared")
    # The pre-copy, before any pause: the frozen copy carries only what changed since.
    if move is None or move["phase"] != "frozen":
        _, counts = await _sync(src, dst, tid)
        report.precopied = counts["copied"]
        await step(f"pre-copied {counts['copied']} tasks")
    frozen_at = time.monotonic()
    await src.execute(
        "INSERT INTO tenant_moves (tenant_id, role, phase, from_region, to_region)"
        " VALUES ($1, 'source', 'frozen', $2, $3)"
        " ON CONFLICT (tenant_id) DO UPDATE SET role = 'source', phase = 'frozen',"
        " from_region = $2, to_region = $3, started_at = now(), updated_at = now()",
        tid,
        source,
        target,
    )
    await step("frozen")
    await asyncio.sleep(settle_s)  # the nodes' poll; a late write only costs a copy
    for _ in range(max_rounds):
        copy_started = time.monotonic()
        fp, counts = await _sync(src, dst, tid)
        report.copy_s += time.monotonic() - copy_started
        report.copies += 1
        report.copied_frozen += counts["copied"]
        await step(f"copied {counts['copied']} of {counts['live']} tasks")
        flip_started = time.monotonic()
        leases = await _flip_or_none(src, tid, target, fp)
        report.flip_s = time.monotonic() - flip_started
        if leases is not None:
            report.tasks_moved = counts["live"]
            report.schedules_moved = counts["cron_schedules"]
            await step("flipped")
            await _open_target(dst, tid, leases, time.monotonic() - frozen_at)
            report.frozen_s = time.monotonic() - frozen_at
            await step("opened")
            return
        await step("source changed since the copy: copying again")
    await _abort(src, dst, tid)
    await step("aborted")
    raise StoreError(
        f"tenant {tid}: the source kept changing over {max_rounds} copies; the move was "
        "undone (the tenant is served at the source again)"
    )


async def _prepare_target(
    dst: asyncpg.Connection,
    tid: uuid.UUID,
    tenant_json: str,
    keys_json: str,
    source: str,
    target: str,
) -> None:
    async with dst.transaction():
        await dst.execute(
            "INSERT INTO tenant_moves (tenant_id, role, phase, from_region, to_region)"
            " VALUES ($1, 'target', 'frozen', $2, $3)"
            " ON CONFLICT (tenant_id) DO UPDATE SET role = 'target', phase = 'frozen',"
            " from_region = $2, to_region = $3, started_at = now(), updated_at = now()",
            tid,
            source,
            target,
        )
        await dst.execute(
            "INSERT INTO tenants SELECT * FROM jsonb_populate_record(NULL::tenants, $1::jsonb)"
            " ON CONFLICT (id) DO UPDATE SET name = excluded.name, tier = excluded.tier,"
            " rate_limit_rps = excluded.rate_limit_rps,"
            " max_concurrent_workers = excluded.max_concurrent_workers",
            tenant_json,
        )
        await dst.execute("UPDATE tenants SET home_region = $2 WHERE id = $1", tid, target)
        await dst.execute(
            "INSERT INTO api_keys SELECT * FROM jsonb_populate_recordset(NULL::api_keys, $1::jsonb)"
            " ON CONFLICT (id) DO UPDATE SET revoked = excluded.revoked,"
            " revoked_at = excluded.revoked_at, expires_at = excluded.expires_at,"
            " scopes = excluded.scopes",
            keys_json,
        )


async def fingerprint(conn: asyncpg.Connection, tid: uuid.UUID) -> Fingerprint:
    """The tenant's live state at ``conn``'s database (see :data:`_FINGERPRINT`)."""
    row = await conn.fetchrow(_FINGERPRINT, tid, list(LIVE_STATES))
    assert row is not None  # an aggregate always answers one row
    return Fingerprint(row["tasks"], row["tasks_md5"], row["schedules_md5"], row["flow_md5"])


async def _sync(
    src: asyncpg.Connection, dst: asyncpg.Connection, tid: uuid.UUID
) -> tuple[Fingerprint, dict[str, int]]:
    """Bring T's copy of the tenant's live rows up to a snapshot of S: the tasks whose
    digest differs (new, changed, gone at S) are replaced, schedules, expectations and
    flow rows replaced whole, and the finished tasks of open windows added. Returns the
    snapshot's fingerprint and counts."""
    live = list(LIVE_STATES)
    async with src.transaction(isolation="repeatable_read", readonly=True):
        fp = await fingerprint(src, tid)
        at_src = {r["id"]: r["digest"] for r in await src.fetch(_DIGESTS, tid, live)}
        at_dst = {r["id"]: r["digest"] for r in await dst.fetch(_DIGESTS, tid, live)}
        changed = [i for i, d in at_src.items() if at_dst.get(i) != d]
        stale = [i for i, d in at_dst.items() if at_src.get(i) != d]
        known = set(changed)
        for i in await repayloaded(src, dst, tid, at_src):  # same digest, new payload
            if i not in known:
                changed.append(i)
                stale.append(i)
        ids = changed + await window_tasks(src, tid, set(at_src))
        parts = {name: await src.fetchval(sql, tid, ids) for name, sql in _PARTS.items()}
    counts = await _copy(dst, tid, stale, parts)
    counts.update(copied=len(changed), live=len(at_src))
    return fp, counts


def _columns(rows_json: str) -> list[str]:
    rows = json.loads(rows_json)
    return list(rows[0]) if rows else []


async def _copy(
    dst: asyncpg.Connection, tid: uuid.UUID, stale: list[uuid.UUID], parts: dict[str, str]
) -> dict[str, int]:
    """One transaction at T (which serves none of it yet): the stale rows go, the
    snapshot's rows come in."""
    counts: dict[str, int] = {}
    async with dst.transaction():
        await _delete_tasks(dst, tid, stale)
        await dst.execute("DELETE FROM cron_schedules WHERE tenant_id = $1", tid)
        await dst.execute("DELETE FROM job_expectations WHERE tenant_id = $1", tid)
        await delete_flow(dst, tid)
        # The day partitions (UTC days) the tasks need, made if T lacks one.
        await dst.execute(
            "SELECT tickwheel_ensure_partition(d) FROM (SELECT DISTINCT"
            " (r.scheduled_at AT TIME ZONE 'UTC')::date AS d"
            " FROM jsonb_populate_recordset(NULL::tasks, $1::jsonb) r ORDER BY 1) days",
            parts["tasks"],
        )
        for table in (
            "workflows",
            "tasks",
            "task_keys",
            "task_dependencies",
            "cron_schedules",
            "job_expectations",
            *FLOW_TABLES,
        ):
            cols = _columns(parts[table])
            counts[table] = 0
            if not cols:
                continue
            names = ", ".join(f'"{c}"' for c in cols)
            status = await dst.execute(
                f"INSERT INTO {table} ({names}) SELECT {names}"
                f" FROM jsonb_populate_recordset(NULL::{table}, $1::jsonb)"
                " ON CONFLICT DO NOTHING",
                parts[table],
            )
            counts[table] = int(status.rsplit(" ", 1)[-1])
        # T's pre-loader claims it: PRELOADED means "in some node's wheel" and no wheel
        # at T has it yet.
        await dst.execute(
            "UPDATE tasks SET status = 'SCHEDULED' WHERE tenant_id = $1 AND status = 'PRELOADED'"
            " AND id = ANY($2::uuid[])",
            tid,
            [uuid.UUID(r["id"]) for r in json.loads(parts["tasks"])],
        )
    return counts


async def _leases(conn: asyncpg.Connection, tid: uuid.UUID) -> dict[uuid.UUID, _Lease]:
    """The leases of the tenant's live tasks (by id: scheduled_at, lease)."""
    leased = await conn.fetch(
        f"SELECT id, scheduled_at, lease_expires_at FROM tasks WHERE {_OF_TENANT}"
        " AND status = ANY($2::text[]) AND lease_expires_at IS NOT NULL",
        tid,
        list(LIVE_STATES),
    )
    return {r["id"]: (r["scheduled_at"], r["lease_expires_at"]) for r in leased}


async def _flip_source(
    src: asyncpg.Connection, tid: uuid.UUID, target: str, copied: Fingerprint
) -> dict[uuid.UUID, _Lease]:
    """The checked flip at S: the leases S last held, or _Rollback (nothing changed
    at S) when S's live rows differ from the last copy."""
    async with src.transaction():
        await src.execute("SET LOCAL lock_timeout = '10s'")
        # Writers of any tenant wait for this transaction (a read and a delete of the
        # tenant's live rows): no write can slip between the check and the flip.
        # The rules' tables too (each written alone, never with tasks: no deadlock).
        rules = ", ".join(RULE_TABLES)
        await src.execute(f"LOCK TABLE tasks, cron_schedules, {rules} IN SHARE ROW EXCLUSIVE MODE")
        if await fingerprint(src, tid) != copied:
            raise _Rollback
        leases = await _leases(src, tid)
        # Its live rows go in the flip itself: a worker's write or a dispatch that was
        # under way here then finds no row (refused), never a row it could still change.
        await _delete_tasks(src, tid)
        await src.execute("DELETE FROM cron_schedules WHERE tenant_id = $1", tid)
        await src.execute("DELETE FROM job_expectations WHERE tenant_id = $1", tid)
        await delete_flow(src, tid, RULE_TABLES)
        await src.execute("UPDATE tenants SET home_region = $2 WHERE id = $1", tid, target)
        await src.execute(
            "UPDATE tenant_moves SET phase = 'done', updated_at = now() WHERE tenant_id = $1",
            tid,
        )
    return leases


class _Rollback(Exception):
    """Ends the flip's transaction without a change."""


async def _flip_or_none(
    src: asyncpg.Connection, tid: uuid.UUID, target: str, copied: Fingerprint
) -> dict[uuid.UUID, _Lease] | None:
    try:
        return await _flip_source(src, tid, target, copied)
    except _Rollback:
        return None


async def _open_target(
    dst: asyncpg.Connection,
    tid: uuid.UUID,
    leases: dict[uuid.UUID, _Lease],
    paused_s: float,
) -> None:
    """T serves the tenant from now on. A leased task's lease is the latest S held plus
    the time its worker could reach no node (``paused_s``, and the SDK's reconnect
    back-off): a worker that ran it through the move completes it here, adopted, instead
    of losing it to a lease that lapsed while nobody could hear its heartbeats."""
    ids: Sequence[uuid.UUID] = list(leases)
    credit = timedelta(seconds=paused_s + RECONNECT_MARGIN_S)
    async with dst.transaction():
        if ids:
            await dst.execute(
                "UPDATE tasks t SET lease_expires_at = greatest(t.lease_expires_at, l.lease)"
                " FROM unnest($2::timestamptz[], $3::uuid[], $4::timestamptz[])"
                " AS l(scheduled_at, id, lease)"
                " WHERE t.tenant_id = $1 AND t.scheduled_at = l.scheduled_at AND t.id = l.id",
                tid,
                [leases[i][0] for i in ids],
                ids,
                [leases[i][1] + credit for i in ids],
            )
        await dst.execute(
            "UPDATE tenant_moves SET phase = 'done', updated_at = now()"
            " WHERE tenant_id = $1 AND role = 'target'",
            tid,
        )


async def _delete_tasks(
    conn: asyncpg.Connection, tid: uuid.UUID, ids: list[uuid.UUID] | None = None
) -> None:
    """Delete the tenant's live tasks (those of ``ids``; None: all of them) with their
    keys and DAG edges, in one transaction."""
    live = list(LIVE_STATES)
    async with conn.transaction():
        gone = await conn.fetch(
            f"DELETE FROM tasks WHERE {_OF_TENANT} AND status = ANY($2::text[])"
            " AND ($3::uuid[] IS NULL OR id = ANY($3)) RETURNING id",
            tid,
            live,
            ids,
        )
        if not gone:
            return
        removed = [r["id"] for r in gone]
        await conn.execute(
            "DELETE FROM task_keys WHERE tenant_id = $1 AND task_id = ANY($2::uuid[])",
            tid,
            removed,
        )
        await conn.execute(
            "DELETE FROM task_dependencies WHERE parent_task_id = ANY($1::uuid[])", removed
        )


async def _abort(src: asyncpg.Connection, dst: asyncpg.Connection, tid: uuid.UUID) -> None:
    """Undo a move that could not flip: T drops its copy (and keeps not serving the
    tenant), then S serves it again."""
    async with dst.transaction():
        await _delete_tasks(dst, tid)
        await dst.execute("DELETE FROM cron_schedules WHERE tenant_id = $1", tid)
        await dst.execute("DELETE FROM job_expectations WHERE tenant_id = $1", tid)
        await delete_flow(dst, tid)
    await src.execute("DELETE FROM tenant_moves WHERE tenant_id = $1 AND role = 'source'", tid)
