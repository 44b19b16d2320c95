"""Disaster recovery on PostgreSQL (issue 16): a standby's replication status, and the
promote that turns it into the primary and raises the fencing generation.

The fence: ``fencing_generation`` (migration 0011) holds one generation ``g``; every
fencing token and shard epoch issued is at least ``(g << 40) + 1``. A promote raises
``g`` to ``old + 1 + salt`` (salt random in [0, 1024): two standbys promoted from the
same state almost surely differ; never a timeline id, which collides, nor an etcd
revision, which a restored etcd reuses) and, in the same transaction, jumps every
in-flight task's token to the new base + 1 and expires its lease now, so a worker of
the lost primary holding token N is refused even before the new primary re-dispatches.
A DISPATCHED task becomes RUNNING (it may have started there, its ack unreplicated), so
its re-run counts an attempt.

Called by ``tickwheel dr`` (``scheduler.cli._dr``) and the standby node's wait.
"""

from __future__ import annotations

import dataclasses
import logging
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

import asyncpg

_log = logging.getLogger("tickwheel.dr")

TOKEN_SHIFT = 40
"""A generation's base is ``g << TOKEN_SHIFT``: 2**40 tokens or epochs per generation."""

SALT_RANGE = 1024
"""A promote raises the generation by 1 + a random salt in [0, SALT_RANGE)."""

FENCE_REASON = "fenced by promote"
"""The reason of the audit row a promote writes for each in-flight task it fences."""


@dataclass(frozen=True)
class ReplicationStatus:
    """What ``tickwheel dr status`` shows: the standby's side (always), the primary's
    (when it answers), and so what a promote now would lose."""

    standby_in_recovery: bool
    generation: int
    standby_receive_lsn: str | None
    standby_replay_lsn: str | None
    replay_delay_s: float | None
    """``now() - pg_last_xact_replay_timestamp()`` on the standby: how old the last
    replayed commit is (grows on an idle primary too: read it with the byte lag)."""
    primary_reachable: bool
    primary_lsn: str | None = None
    lag_bytes: int | None = None
    """WAL written on the primary not yet replayed on the standby: what a promote now
    would lose (None without the primary)."""
    replay_lag_s: float | None = None
    """``replay_lag`` of pg_stat_replication on the primary (None without it)."""
    sync_state: str | None = None
    """``async``, ``sync``, ``quorum`` or ``potential`` (pg_stat_replication)."""


async def _fetch_generation(conn: asyncpg.Connection) -> int:
    value = await conn.fetchval("SELECT generation FROM fencing_generation")
    return int(value or 0)


async def status(standby_dsn: str, primary_dsn: str | None = None) -> ReplicationStatus:
    """The replication status seen from ``standby_dsn``, and from ``primary_dsn`` when it
    answers (a dead primary is not an error: the standby's side is shown)."""
    conn = await asyncpg.connect(standby_dsn)
    try:
        row = await conn.fetchrow(
            "SELECT pg_is_in_recovery() AS rec, pg_last_wal_receive_lsn()::text AS recv,"
            " pg_last_wal_replay_lsn()::text AS replay,"
            " extract(epoch FROM now() - pg_last_xact_replay_timestamp())::float8 AS delay"
        )
        generation = await _fetch_generation(conn)
    finally:
        await conn.close()
    assert row is not None  # a SELECT without FROM returns one row
    result = ReplicationStatus(
        standby_in_recovery=bool(row["rec"]),
        generation=generation,
        standby_receive_lsn=row["recv"],
        standby_replay_lsn=row["replay"],
        replay_delay_s=row["delay"],
        primary_reachable=False,
    )
    if primary_dsn is None:
        return result
    try:
        pconn = await asyncpg.connect(primary_dsn, timeout=3)
    except (OSError, asyncpg.PostgresError, TimeoutError):
        return result
    try:
        lsn = await pconn.fetchval("SELECT pg_current_wal_lsn()::text")
        lag = (
            await pconn.fetchval(
                "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1::text::pg_lsn)::bigint",
                row["replay"],
            )
            if row["replay"]
            else None
        )
        rep = await pconn.fetchrow(
            "SELECT extract(epoch FROM replay_lag)::float8 AS lag, sync_state"
            " FROM pg_stat_replication ORDER BY replay_lsn DESC NULLS LAST LIMIT 1"
        )
    finally:
        await pconn.close()
    return dataclasses.replace(
        result,
        primary_reachable=True,
        primary_lsn=lsn,
        lag_bytes=int(lag) if lag is not None else None,
        replay_lag_s=rep["lag"] if rep else None,
        sync_state=rep["sync_state"] if rep else None,
    )


@dataclass(frozen=True)
class PromoteReport:
    """What ``tickwheel dr promote`` did, with timings."""

    promoted: bool
    """True: this run called pg_promote (False: the database was already a primary)."""
    fenced: bool
    """True: this run raised the generation (False: it was already raised)."""
    old_generation: int
    generation: int
    tasks_fenced: int
    shards: int
    """Shard epochs raised to the new base (their next claim is above it anyway)."""
    promote_s: float
    fence_s: float
    raised_at: datetime | None


async def promote(dsn: str, actor: str = "tickwheel dr promote") -> PromoteReport:
    """Promote the standby at ``dsn`` (``pg_promote(wait => true)``) and raise its fence.

    Idempotent: on a promoted database whose fence was not raised yet (the fence is
    remembered in ``fencing_generation.raised_by``), it raises it; on one already fenced
    it changes nothing and says so (``promoted`` and ``fenced`` False). Needs
    ``pg_promote`` (a superuser, or ``GRANT EXECUTE ON FUNCTION pg_promote`` to the role)
    and write access to the tasks tables (the table owner, which bypasses row security
    unless forced: set ``tickwheel.tenant`` scope ``*``, done here)."""
    conn = await asyncpg.connect(dsn)
    try:
        started = time.monotonic()
        promoted = False
        if await conn.fetchval("SELECT pg_is_in_recovery()"):
            if not await conn.fetchval("SELECT pg_promote(wait => true, wait_seconds => 60)"):
                raise RuntimeError("pg_promote did not finish within 60 s")
            promoted = True
        promote_s = time.monotonic() - started
        started = time.monotonic()
        timeline = await _timeline(conn)
        async with conn.transaction():
            raised = await _raise_fence(conn, actor, timeline, again=promoted)
        if raised is None:
            old, raised_at = await _fetch_raised(conn)
            return PromoteReport(
                promoted=False,
                fenced=False,
                old_generation=old,
                generation=old,
                tasks_fenced=0,
                shards=0,
                promote_s=promote_s,
                fence_s=time.monotonic() - started,
                raised_at=raised_at,
            )
        old, new, fenced, shards, raised_at = raised
        return PromoteReport(
            promoted=promoted,
            fenced=True,
            old_generation=old,
            generation=new,
            tasks_fenced=fenced,
            shards=shards,
            promote_s=promote_s,
            fence_s=time.monotonic() - started,
            raised_at=raised_at,
        )
    finally:
        await conn.close()


async def _scope_all(conn: asyncpg.Connection) -> None:
    # Row security (0007) scopes a session to a tenant; the fence is for every tenant.
    await conn.execute("SELECT set_config('tickwheel.tenant', '*', true)")


def _timeline_tag(timeline: int) -> str:
    return f"(timeline {timeline})"


async def _timeline(conn: asyncpg.Connection) -> int:
    """The primary's current timeline: a promote starts a new one. Read from the
    current WAL file's name (pg_control_checkpoint's lags until the next checkpoint)."""
    return int(
        await conn.fetchval("SELECT substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8)"), 16
    )


async def _fetch_raised(conn: asyncpg.Connection) -> tuple[int, datetime | None]:
    row = await conn.fetchrow("SELECT generation, raised_at FROM fencing_generation")
    return (int(row["generation"]), row["raised_at"]) if row else (0, None)


async def _raise_fence(
    conn: asyncpg.Connection, actor: str, timeline: int, *, again: bool
) -> tuple[int, int, int, int, datetime] | None:
    """Raise the fence, in the caller's transaction, unless one was raised on
    ``timeline`` already (and ``again`` is False: a promote this call made always
    raises). ``(old, new, tasks fenced, shards, raised_at)``, or None when nothing was
    done. A fence is raised once per timeline, whoever raised it (``dr promote`` or a
    node that found a promoted primary): the row remembers the timeline in
    ``raised_by``."""
    await _scope_all(conn)
    row = await conn.fetchrow(
        "SELECT generation, raised_at, raised_by FROM fencing_generation FOR UPDATE"
    )
    if row is None:
        raise RuntimeError("fencing_generation is empty: run tickwheel migrate (0011)")
    old = int(row["generation"])
    tag = _timeline_tag(timeline)
    if not again and (row["raised_by"] or "").endswith(tag):
        return None
    new = old + 1 + secrets.randbelow(SALT_RANGE)
    base = new << TOKEN_SHIFT
    raised_at = datetime.now(UTC)
    await conn.execute(
        "UPDATE fencing_generation SET generation = $1, raised_at = $2, raised_by = $3",
        new,
        raised_at,
        f"{actor} {tag}",
    )
    fenced = await conn.fetchval(
        """
        WITH x AS (
            SELECT id, scheduled_at, status FROM tasks
            WHERE status IN ('DISPATCHED', 'RUNNING') FOR UPDATE
        ), f AS (
            -- A DISPATCHED task may have started in the lost region (its ack not
            -- replicated): it is RUNNING from here, so its re-run counts an attempt,
            -- as a lease expiry of a started task does (issue 38).
            UPDATE tasks t SET fencing_token = GREATEST(t.fencing_token, $1) + 1,
                status = 'RUNNING', lease_expires_at = $2, updated_at = $2
            FROM x WHERE t.id = x.id AND t.scheduled_at = x.scheduled_at
            RETURNING t.id, t.scheduled_at, x.status AS from_status, t.fencing_token
        ), a AS (
            INSERT INTO task_transitions
                (task_id, scheduled_at, from_status, to_status, fencing_token,
                 actor, at, reason)
            SELECT id, scheduled_at, from_status, 'RUNNING', fencing_token, $3, $2, $4
            FROM f
        )
        SELECT count(*) FROM f
        """,
        base,
        raised_at,
        actor,
        FENCE_REASON,
    )
    shards = await conn.fetchval(
        "WITH s AS (UPDATE shard_epochs SET epoch = GREATEST(epoch, $1) + 1,"
        " updated_at = $2 RETURNING 1) SELECT count(*) FROM s",
        base,
        raised_at,
    )
    return old, new, int(fenced), int(shards), raised_at


NEW_TIMELINE_ACTOR = "tickwheel node (new timeline)"
"""The actor of a fence a node raised on finding its primary on a new timeline."""


class FenceWatch:
    """The store pool's connection hook: raises the fence on a primary promoted under
    the node (:func:`fence_new_timeline`) and tells its listeners when the generation
    changed since the pool's first connection, whoever raised it. A node whose shard
    epochs a fence raised must claim its shards again before it can dispatch
    (``ShardHandler``): its old epochs are refused like a lost node's."""

    def __init__(self) -> None:
        self.generation: int | None = None
        self._listeners: list[Callable[[int], None]] = []

    def listen(self, callback: Callable[[int], None]) -> None:
        """Call ``callback(generation)`` whenever a new connection finds it raised."""
        self._listeners.append(callback)

    async def on_connect(self, conn: asyncpg.Connection) -> None:
        await fence_new_timeline(conn)
        try:
            generation = await _fetch_generation(conn)
        except asyncpg.UndefinedTableError:
            return  # not migrated yet
        seen, self.generation = self.generation, generation
        if seen is not None and generation != seen:
            _log.warning("fencing generation %d -> %d: claiming shards again", seen, generation)
            for callback in self._listeners:
                callback(generation)


async def fence_new_timeline(conn: asyncpg.Connection) -> bool:
    """Raise the fence on a primary promoted by something other than ``dr promote``
    (Patroni, a managed service's failover, a hand-run ``pg_ctl promote``), before this
    connection is used: the store's pool runs it on every connection it opens, so a node
    that reconnects to a new primary raises the fence before its first dispatch there,
    exactly as ``dr promote`` does (issue 42). A database still on timeline 1 was never
    promoted: nothing to do. Cheap on the common path: one unlocked read. Whether this
    call raised it."""
    if await conn.fetchval("SELECT pg_is_in_recovery()"):
        return False
    timeline = await _timeline(conn)
    if timeline <= 1:
        return False
    try:
        raised_by = await conn.fetchval("SELECT raised_by FROM fencing_generation")
    except asyncpg.UndefinedTableError:
        return False  # not migrated yet: migrate creates it at generation 0
    if (raised_by or "").endswith(_timeline_tag(timeline)):
        return False
    async with conn.transaction():
        raised = await _raise_fence(conn, NEW_TIMELINE_ACTOR, timeline, again=False)
    if raised is not None:
        old, new, fenced, shards, _ = raised
        _log.warning(
            "the primary is on timeline %d, promoted without a fence: raised the fencing"
            " generation %d -> %d (%d in-flight tasks fenced, %d shard epochs)",
            timeline,
            old,
            new,
            fenced,
            shards,
        )
    return raised is not None


async def fence_state(dsn: str) -> tuple[bool, int] | None:
    """``(in recovery, generation)`` of the database at ``dsn``, or None when it cannot
    be read now (down, starting up, mid-promote): what a standby node polls until its
    database is promoted and its fence raised."""
    try:
        conn = await asyncpg.connect(dsn, timeout=5)
    except (OSError, TimeoutError, asyncpg.PostgresError) as exc:
        _log.warning("standby: cannot reach the database (%s)", exc)
        return None
    try:
        rec = bool(await conn.fetchval("SELECT pg_is_in_recovery()"))
        return rec, await _fetch_generation(conn)
    except (OSError, asyncpg.PostgresError) as exc:
        _log.warning("standby: cannot read the fencing generation (%s)", exc)
        return None
    finally:
        await conn.close()
