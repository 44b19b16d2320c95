"""Plan probes of the hot statements (issue 41): seed a stampede straight into ``tasks``,
EXPLAIN (ANALYZE, BUFFERS) each statement of the dispatch, ack, completion and pre-load
paths with a small batch, and count the tuples and index entries it touched.

Used by the plan-regression test (tests/integration/store/test_plans.py) and by the
benchmark's plan probe (benchmarks/plan_probe.py, ``test_stampede --plans``) that runs
the same statements on bigger tables. Seeding is plain SQL (``generate_series``): a
million rows in seconds, not the store's insert path.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

#: The statements probed, in the order of a task's life. ``forecast`` is not among them:
#: it counts a window, so what it reads grows with the window (it must use an index:
#: ``FORECAST`` below).
HOT = (
    "claim_preload",
    "load_preloaded",
    "load_preloaded_packed",
    "mark_dispatched",
    "ack",
    "heartbeat",
    "complete",
    "complete_acked",
    "fail",
    "release",
    "confirm_cancel",
    "existing_keys",
    "reclaim_expired",
)


@dataclass
class PlanCost:
    """What one EXPLAIN (ANALYZE, BUFFERS) touched on the task partitions."""

    #: Tuples and index entries read by the scans of task partitions: rows returned plus
    #: rows removed by a filter or a recheck, times the loops. (Not the rows a join
    #: compares, nor the index entries an index scan steps over for a condition on a
    #: column after the first: a nested loop over the batch for each key shows as 1 a
    #: task; ``ms`` shows it.)
    tuples: int = 0
    #: Shared buffers hit + read by the whole statement (every relation).
    buffers: int = 0
    #: The task partitions' access paths, e.g. ``Index Scan tasks_p20260310_pkey`` (a
    #: bitmap scan: ``Bitmap Heap Scan tasks_p…`` and ``Bitmap Index Scan <its index>``).
    scans: list[str] = field(default_factory=list)
    #: The statement's execution time (ms), for the probe's report only.
    ms: float = 0.0


def plan_cost(raw: str | list[Any]) -> PlanCost:
    """The :class:`PlanCost` of an ``EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON)`` answer."""
    doc = json.loads(raw) if isinstance(raw, str) else raw
    top = doc[0]
    cost = PlanCost(ms=float(top.get("Execution Time", 0.0)))
    root = top["Plan"]
    cost.buffers = int(root.get("Shared Hit Blocks", 0)) + int(root.get("Shared Read Blocks", 0))
    _walk(root, cost)
    return cost


def _walk(node: dict[str, Any], cost: PlanCost) -> None:
    rel = str(node.get("Relation Name", ""))
    if rel.startswith("tasks") and "Scan" in str(node.get("Node Type", "")):
        loops = int(node.get("Actual Loops", 1))
        seen = (
            float(node.get("Actual Rows", 0))
            + float(node.get("Rows Removed by Filter", 0))
            + float(node.get("Rows Removed by Index Recheck", 0))
        )
        cost.tuples += round(seen * loops)
        cost.scans.append(f"{node['Node Type']} {node.get('Index Name', rel)}")
    elif node.get("Node Type") == "Bitmap Index Scan" and "tasks" in str(node.get("Index Name")):
        # Its rows are counted by the Bitmap Heap Scan above it; the index is named here.
        cost.scans.append(f"Bitmap Index Scan {node['Index Name']}")
    for child in node.get("Plans", []) or []:
        _walk(child, cost)


async def seed_stampede(
    conn: Any, tenant_id: uuid.UUID, at: datetime, n: int, *, spread_s: int = 0
) -> None:
    """Insert ``n`` tasks of one tenant: every one nominally at ``at`` (a stampede: one
    ``scheduled_at``, ``due_at`` jittered late-only over 0-120 s) or, with ``spread_s``,
    at ``at`` + (i mod spread_s) seconds. Half are SCHEDULED, half PRELOADED (the pre-loaded
    backlog of a stampede that waits to be dispatched), each with its ``task_keys`` row as
    the store writes it. ``conn``: a connection in the system scope (``tickwheel.tenant =
    '*'``) or a superuser's."""
    end = at + timedelta(seconds=spread_s)
    day = at.date()
    while day <= end.date():
        await conn.execute("SELECT tickwheel_ensure_partition($1::date)", day)
        day += timedelta(days=1)
    await conn.execute(
        """
        WITH t AS (
            INSERT INTO tasks (id, tenant_id, type, scheduled_at, due_at, status,
                               idempotency_key, payload, shard_id, jitter_mode)
            SELECT gen_random_uuid(), $1, 'stampede', s.at, s.at + (g % 121) * interval '1 s',
                   CASE WHEN g % 2 = 0 THEN 'SCHEDULED' ELSE 'PRELOADED' END, 'k' || g,
                   '{}'::jsonb, g % 256, 'late_only'
            FROM generate_series(1, $2::int) g,
                 LATERAL (SELECT $3::timestamptz
                          + CASE WHEN $4::int > 0 THEN (g % $4::int) * interval '1 s'
                                 ELSE interval '0' END AS at) s
            RETURNING tenant_id, idempotency_key, id, scheduled_at
        )
        INSERT INTO task_keys (tenant_id, idempotency_key, task_id, scheduled_at)
        SELECT * FROM t
        """,
        tenant_id,
        n,
        at,
        spread_s,
    )


@dataclass
class Batch:
    """A batch of task keys that the probe moved to one state (committed)."""

    ids: list[uuid.UUID]
    times: list[datetime]

    @property
    def uniform_times(self) -> list[datetime]:
        """The times as the store sends them to a statement that spreads a uniform
        column (``tickwheel_fill``): one value when all are equal."""
        return self.times[:1] if len(set(self.times)) == 1 else self.times

    @property
    def lo(self) -> datetime:
        return min(self.times)

    @property
    def hi(self) -> datetime:
        return max(self.times)


async def take_batch(conn: Any, k: int, state: str, *, offset: int, **cols: Any) -> Batch:
    """Move ``k`` PRELOADED tasks (from the ``offset``-th on, by id) to ``state`` with token 2
    and the columns ``cols``, and return their keys."""
    sets = "".join(f", {c} = ${i + 4}" for i, c in enumerate(cols))
    rows = await conn.fetch(
        f"""
        WITH b AS (SELECT id, scheduled_at FROM tasks WHERE status = 'PRELOADED'
                   ORDER BY id OFFSET $2 LIMIT $1)
        UPDATE tasks t SET status = $3, fencing_token = 2{sets}
        FROM b WHERE t.id = b.id AND t.scheduled_at = b.scheduled_at
        RETURNING t.id, t.scheduled_at
        """,
        k,
        offset,
        state,
        *cols.values(),
    )
    return Batch([r["id"] for r in rows], [r["scheduled_at"] for r in rows])


@dataclass
class Probe:
    """The committed batches of a seeded database, one per state the statements need."""

    now: datetime
    preloaded: Batch
    dispatched: Batch
    running: Batch
    cancelling: Batch
    k: int

    @classmethod
    async def prepare(cls, conn: Any, now: datetime, k: int) -> Probe:
        """Take the batches (k tasks each) from the seeded PRELOADED tasks."""
        lease = now - timedelta(seconds=1)  # lapsed: reclaim_expired finds k of them
        return cls(
            now=now,
            preloaded=await take_batch(conn, k, "PRELOADED", offset=0),
            dispatched=await take_batch(
                conn, k, "DISPATCHED", offset=k, worker_id="w", lease_expires_at=lease
            ),
            running=await take_batch(
                conn, k, "RUNNING", offset=k, worker_id="w", lease_expires_at=now
            ),
            cancelling=await take_batch(
                conn, k, "RUNNING", offset=k, cancel_requested=True, lease_expires_at=now
            ),
            k=k,
        )

    def args(self, name: str) -> tuple[str, tuple[Any, ...]]:
        """The statement (its ``Q`` name) and arguments of the probe ``name``."""
        now, k = self.now, self.k
        horizon = now + timedelta(hours=1)
        day = now.replace(hour=0, minute=0, second=0, microsecond=0)
        p, d, r, c = self.preloaded, self.dispatched, self.running, self.cancelling
        tokens = [2] * k
        match name:
            case "claim_preload":
                return name, (horizon, None, day, day + timedelta(days=2), k, now, "t", now)
            case "load_preloaded" | "load_preloaded_packed":
                return name, (horizon, None, day, uuid.UUID(int=0), k, None)
            case "mark_dispatched":
                return name, (
                    *(p.ids, p.uniform_times, ["w"], [now + timedelta(seconds=30)], now),
                    *(p.lo, p.hi, "t", None, [False], False),
                )
            case "ack":
                return name, (d.ids, d.times, tokens, now, now, d.lo, d.hi)
            case "heartbeat":
                return name, (r.ids, r.times, tokens, now, now, r.lo, r.hi, ["RUNNING"])
            case "complete":
                return name, (
                    r.ids,
                    r.uniform_times,
                    tokens,
                    [None] * k,
                    now,
                    r.lo,
                    r.hi,
                    [None] * k,
                )
            case "complete_acked":
                return "complete", (
                    *(d.ids, d.uniform_times, tokens, [None] * k, now, d.lo, d.hi),
                    [now] * k,
                )
            case "fail":
                return name, (
                    *(r.ids, r.times, tokens, ["e"] * k, [True] * k, [None] * k, now),
                    *(r.lo, r.hi, [""] * k, [1.0] * k, [""] * k),
                )
            case "release":
                return name, (r.ids, r.times, tokens, [None] * k, now, r.lo, r.hi, [False] * k)
            case "confirm_cancel":
                return name, (c.ids, c.times, tokens, now, c.lo, c.hi)
            case "existing_keys":
                return name, (p.ids, p.times, p.lo, p.hi)
            case "reclaim_expired":
                return name, (now, None, k, "t")
        raise KeyError(name)


#: The probes whose statements the store runs in a by-key transaction
#: (``Db.conn(..., by_key=True)``: the settings of ``BY_KEY``).
BY_KEY_PROBES = frozenset(HOT)


async def explain(
    conn: Any, sql: str, args: tuple[Any, ...], *, generic: bool, by_key: bool = True
) -> PlanCost:
    """EXPLAIN (ANALYZE, BUFFERS) ``sql`` in a transaction that is rolled back (the writes
    run), under a custom or the generic plan (asyncpg's prepared statements get the
    generic one after five runs when it looks no dearer), in a by-key transaction as the
    store runs it (``by_key``) or a plain one.

    The generic plan is that of a prepared statement (``PREPARE``, then ``EXPLAIN
    EXECUTE`` under ``force_generic_plan``): an ``EXPLAIN`` sent with bound parameters is
    planned with their values whatever ``plan_cache_mode`` says (PostgreSQL 15 has no
    ``EXPLAIN (GENERIC_PLAN)``), so it always showed the custom plan."""
    from scheduler.store.postgres import _db

    # An older tree (the benchmark's --tree) has no BY_KEY: its calls ran as they were.
    pin = getattr(_db, "BY_KEY", None) if by_key else None
    tx = conn.transaction()
    await tx.start()
    prepared = False
    try:
        await conn.execute("SET LOCAL tickwheel.tenant = '*'")
        await conn.execute("SET LOCAL jit = off")  # as the store's pool connections
        if pin:
            await conn.execute(pin)
        mode = "force_generic_plan" if generic else "force_custom_plan"
        await conn.execute(f"SET LOCAL plan_cache_mode = {mode}")
        if not generic:
            raw = await conn.fetchval(f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {sql}", *args)
            return plan_cost(raw)
        await conn.execute(f"PREPARE tickwheel_probe AS {sql}")
        prepared = True
        # EXECUTE takes no bound parameters: its arguments go as literals of the types
        # the statement was prepared with.
        types = await conn.fetchval(
            "SELECT parameter_types::text[] FROM pg_prepared_statements"
            " WHERE name = 'tickwheel_probe'"
        )
        literals = [
            f"{await conn.fetchval(f'SELECT quote_nullable($1::{t})', a)}::{t}"
            for t, a in zip(types, args, strict=True)
        ]
        raw = await conn.fetchval(
            "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) EXECUTE tickwheel_probe("
            + ", ".join(literals)
            + ")"
        )
        return plan_cost(raw)
    finally:
        await tx.rollback()
        if prepared:  # PREPARE is the session's, not the transaction's
            await conn.execute("DEALLOCATE tickwheel_probe")
