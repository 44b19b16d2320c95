"""Store throughput (rows/s) beside raw-SQL baselines, in the same run.

Two baselines per call, on a separate single asyncpg connection:

- ``raw``: the *minimal* SQL for the same state change on the same table: COPY for
  inserts, one ``UPDATE ... FROM unnest(...)`` per batch for the rest. It does strictly
  less work than the store: no idempotency key table, no transition audit rows, no
  completion ledger, a constant worker id and lease, fewer returned columns.
- ``rawsql``: the store's own statements (``queries.sql``) run on the raw connection with
  pre-built arguments, in the same transactions: the same database work, without the
  store's Python (validation, argument building, result objects, pool, outcomes).

The store runs on a pool of one connection. ``extra_info`` carries rows/s; at the end of
the module a table of store/raw and store/rawsql time ratios is printed (docs/store.md
has the figures).

Run: ``make bench`` or
``PYTHONPATH=src:. .venv/bin/pytest benchmarks/test_store.py --benchmark-only -p no:cacheprovider``
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import statistics
import time
import uuid
from collections.abc import Callable, Coroutine, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import pytest

from scheduler.ids import uuid7
from scheduler.store import StoreConfig
from scheduler.store.postgres import PostgresStore, Q
from scheduler.store.postgres.tasks import insert_args
from scheduler.types import (
    Completion,
    DispatchRequest,
    Failure,
    FencedWrite,
    NewTask,
    Release,
    TaskKey,
    Tenant,
)

BATCHES = [1, 100, 1000]
NOW = datetime.now(UTC).replace(microsecond=0)
LEASE = NOW + timedelta(minutes=5)
PAYLOAD = {"to": "user@example.com", "template": "welcome", "n": 1}
COLS = (
    "id",
    "tenant_id",
    "type",
    "scheduled_at",
    "due_at",
    "status",
    "idempotency_key",
    "payload",
    "shard_id",
    "fencing_token",
    "created_at",
    "updated_at",
)


_TAIL = (json.dumps(PAYLOAD), 1, 1, NOW, NOW)


class Env:
    """One event loop, the store (one connection) and a raw connection."""

    def __init__(self, dsn: str) -> None:
        self.loop = asyncio.new_event_loop()
        self.store = self.run(
            PostgresStore.open(dsn, StoreConfig(pool_min_size=1, pool_max_size=1))
        )
        self.raw: asyncpg.Connection = self.run(asyncpg.connect(dsn))
        self.tenant = self.run(self.store.create_tenant(Tenant(id=uuid.uuid4(), name="bench")))

    def run(self, coro: Coroutine[Any, Any, Any]) -> Any:
        return self.loop.run_until_complete(coro)

    def close(self) -> None:
        self.run(self.raw.close())
        self.run(self.store.close())
        self.loop.close()

    def new_tasks(self, n: int) -> list[NewTask]:
        return [
            NewTask(
                id=(i := uuid7()),
                tenant_id=self.tenant.id,
                type="email.send",
                payload=PAYLOAD,
                scheduled_at=NOW,
                due_at=NOW,
                idempotency_key=str(i),
                shard_id=1,
            )
            for _ in range(n)
        ]

    def seed(self, n: int, status: str, token: int = 1) -> list[TaskKey]:
        """n tasks in ``status`` (raw COPY, not timed); other live tasks are finished first."""
        self.run(
            self.raw.execute(
                "UPDATE tasks SET status = 'COMPLETED' WHERE status <> 'COMPLETED'"
                " AND scheduled_at >= $1 AND scheduled_at < $2",
                NOW - timedelta(days=1),
                NOW + timedelta(days=1),
            )
        )
        tasks = self.new_tasks(n)
        records = [
            (
                t.id,
                t.tenant_id,
                t.type,
                NOW,
                NOW,
                status,
                t.idempotency_key,
                json.dumps(PAYLOAD),
                1,
                token,
                NOW,
                NOW,
            )
            for t in tasks
        ]
        self.run(self.raw.copy_records_to_table("tasks", records=records, columns=COLS))
        return [TaskKey(t.id, NOW) for t in tasks]


@pytest.fixture(scope="module")
def bench_pg_dsn() -> Iterator[str]:
    """A migrated database on a PostgreSQL server of this module's own (fsync on)."""
    from tests.support.db import migrate_sync
    from tests.support.servers import PostgresServer, start_server

    server = start_server(PostgresServer)
    try:
        server.psql("CREATE DATABASE tickwheel_bench")
        dsn = server.dsn("tickwheel_bench")
        migrate_sync(dsn)
        yield dsn
    finally:
        server.cleanup()


@pytest.fixture(scope="module")
def env(bench_pg_dsn: str) -> Iterator[Env]:
    e = Env(bench_pg_dsn)
    try:
        yield e
    finally:
        e.close()


Case = tuple[Callable[[], Any], Callable[[Any], Coroutine[Any, Any, Any]]]
"""(setup, op): ``setup()`` makes a round's input (not timed), ``op(input)`` is timed."""

#: call -> kind ("store", "raw", "rawsql") -> factory(env, n) -> Case.
VARIANTS: dict[str, dict[str, Callable[[Env, int], Case]]] = {}


def variant(call: str, kind: str) -> Callable[[Callable[[Env, int], Case]], Callable[..., Case]]:
    """Register a factory of one call's store op or baseline."""

    def register(factory: Callable[[Env, int], Case]) -> Callable[[Env, int], Case]:
        VARIANTS.setdefault(call, {})[kind] = factory
        return factory

    return register


#: (call, batch) -> {"store"|"raw"|"rawsql": median seconds}, printed at module end.
MEDIANS: dict[tuple[str, int], dict[str, float]] = {}


@pytest.fixture(scope="module", autouse=True)
def ratio_table(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    if not MEDIANS:
        return
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
        _print_ratios()


def _print_ratios() -> None:
    w = print
    w("")
    w("store vs raw SQL, rounds interleaved (median time per batch; ratio = store / baseline)")
    w(
        f"{'call':<12}{'batch':>6}{'store/s':>10}{'raw/s':>10}{'rawsql/s':>10}"
        f"{'store/raw':>11}{'store/rawsql':>14}"
    )
    for (call, n), m in MEDIANS.items():
        st, raw, full = m["store"], m["raw"], m["rawsql"]
        w(
            f"{call:<12}{n:>6}{n / st:>10,.0f}{n / raw:>10,.0f}{n / full:>10,.0f}"
            f"{st / raw:>11.2f}{st / full:>14.2f}"
        )


def _interleaved(benchmark: Any, env: Env, call: str, n: int) -> None:
    """Each round runs raw, rawsql (timed here) and then the store (timed by the plugin),
    so load spikes on the shared machine hit the three alike."""
    cases = {kind: factory(env, n) for kind, factory in VARIANTS[call].items()}
    times: dict[str, list[float]] = {"raw": [], "rawsql": []}
    state: dict[str, Any] = {}

    def prepare() -> tuple[tuple[Any, ...], dict[str, Any]]:
        for kind, samples in times.items():
            setup, op = cases[kind]
            arg = setup()
            t0 = time.perf_counter()
            env.run(op(arg))
            samples.append(time.perf_counter() - t0)
        state["arg"] = cases["store"][0]()
        return (), {}

    store_op = cases["store"][1]
    benchmark.pedantic(
        lambda: env.run(store_op(state["arg"])),
        setup=prepare,
        rounds=30 if n <= 100 else 15,
        iterations=1,
    )
    medians = {k: statistics.median(v) for k, v in times.items()}
    medians["store"] = benchmark.stats.stats.median
    MEDIANS[(call, n)] = medians
    benchmark.extra_info["batch"] = n
    for kind, t in medians.items():
        benchmark.extra_info[f"{kind}_rows_per_s"] = round(n / t)
    benchmark.extra_info["store_over_raw"] = round(medians["store"] / medians["raw"], 3)
    benchmark.extra_info["store_over_rawsql"] = round(medians["store"] / medians["rawsql"], 3)


def _bounds(keys: list[TaskKey]) -> tuple[datetime, datetime]:
    return min(k.scheduled_at for k in keys), max(k.scheduled_at for k in keys)


# -- insert ------------------------------------------------------------------------------
@variant("insert", "store")
def _insert_store(env: Env, n: int) -> Case:
    return (lambda: env.new_tasks(n), lambda t: env.store.insert_tasks(t, NOW))


@variant("insert", "raw")
def _insert_raw(env: Env, n: int) -> Case:
    def setup() -> list[tuple[Any, ...]]:
        return [
            (t.id, t.tenant_id, t.type, NOW, NOW, "SCHEDULED", t.idempotency_key, *_TAIL)
            for t in env.new_tasks(n)
        ]

    return (
        setup,
        lambda r: env.raw.copy_records_to_table("tasks", records=r, columns=COLS),
    )


def _insert_args(tasks: list[NewTask]) -> tuple[Any, ...]:
    """Arguments of the store's insert_tasks statement (the store's own builder), built
    outside the timing."""
    return insert_args(tasks, [(json.dumps(t.payload), None) for t in tasks], NOW)


@variant("insert", "rawsql")
def _insert_rawsql(env: Env, n: int) -> Case:
    async def op(args: tuple[Any, ...]) -> None:
        async with env.raw.transaction():
            await env.raw.fetch(Q["insert_tasks"], *args)

    return (lambda: _insert_args(env.new_tasks(n)), op)


# -- pre-load claim ----------------------------------------------------------------------
@variant("claim", "store")
def _claim_store(env: Env, n: int) -> Case:
    return (
        lambda: env.seed(n, "SCHEDULED"),
        lambda _: env.store.claim_preload(None, NOW + timedelta(minutes=60), n, NOW),
    )


RAW_CLAIM = """
UPDATE tasks t SET status = 'PRELOADED', updated_at = $3
FROM (SELECT id, scheduled_at FROM tasks
      WHERE status IN ('SCHEDULED', 'RETRYING') AND due_at <= $1
        AND scheduled_at >= $4 AND scheduled_at < $5
      ORDER BY due_at LIMIT $2 FOR UPDATE SKIP LOCKED) c
WHERE t.id = c.id AND t.scheduled_at = c.scheduled_at
  AND t.scheduled_at >= $4 AND t.scheduled_at < $5
RETURNING t.id, t.scheduled_at, t.due_at, t.shard_id
"""


@variant("claim", "raw")
def _claim_raw(env: Env, n: int) -> Case:
    day = NOW.replace(hour=0, minute=0, second=0)
    return (
        lambda: env.seed(n, "SCHEDULED"),
        lambda _: env.raw.fetch(
            RAW_CLAIM, NOW + timedelta(minutes=60), n, NOW, day, day + timedelta(days=1)
        ),
    )


@variant("claim", "rawsql")
def _claim_rawsql(env: Env, n: int) -> Case:
    day = NOW.replace(hour=0, minute=0, second=0)
    return (
        lambda: env.seed(n, "SCHEDULED"),
        lambda _: env.raw.fetch(
            Q["claim_preload"],
            NOW + timedelta(minutes=60),
            None,
            day,
            day + timedelta(days=1),
            n,
            NOW,
            "scheduler",
            NOW + timedelta(minutes=60),  # retry horizon
        ),
    )


# -- dispatch ------------------------------------------------------------------------------
@variant("dispatch", "store")
def _dispatch_store(env: Env, n: int) -> Case:
    def setup() -> list[DispatchRequest]:
        return [
            DispatchRequest(key=k, worker_id="w1", lease_expires_at=LEASE)
            for k in env.seed(n, "PRELOADED")
        ]

    return (setup, lambda r: env.store.mark_dispatched(r, NOW))


RAW_DISPATCH = """
UPDATE tasks t SET status = 'DISPATCHED', fencing_token = t.fencing_token + 1,
    worker_id = 'w1', lease_expires_at = $3, updated_at = $3
FROM unnest($1::uuid[], $2::timestamptz[]) AS u(id, scheduled_at)
WHERE t.id = u.id AND t.scheduled_at = u.scheduled_at AND t.status = 'PRELOADED'
  AND t.scheduled_at >= $4 AND t.scheduled_at <= $5
RETURNING t.id, t.payload, t.fencing_token
"""


@variant("dispatch", "raw")
def _dispatch_raw(env: Env, n: int) -> Case:
    return (
        lambda: env.seed(n, "PRELOADED"),
        lambda ks: env.raw.fetch(
            RAW_DISPATCH, [k.id for k in ks], [k.scheduled_at for k in ks], LEASE, *_bounds(ks)
        ),
    )


@variant("dispatch", "rawsql")
def _dispatch_rawsql(env: Env, n: int) -> Case:
    return (
        lambda: env.seed(n, "PRELOADED"),
        lambda ks: env.raw.fetch(
            Q["mark_dispatched"],
            [k.id for k in ks],
            [k.scheduled_at for k in ks],
            ["w1"] * len(ks),
            [LEASE] * len(ks),
            NOW,
            *_bounds(ks),
            "scheduler",
            [None] * len(ks),
            [False] * len(ks),
            False,  # keyed: tasks with a concurrency key take the keyed path
        ),
    )


# -- ack / complete ------------------------------------------------------------------------
RAW_FENCED = """
UPDATE tasks t SET status = $6, lease_expires_at = $4, updated_at = $4
FROM unnest($1::uuid[], $2::timestamptz[], $3::bigint[]) AS u(id, scheduled_at, token)
WHERE t.id = u.id AND t.scheduled_at = u.scheduled_at AND t.fencing_token = u.token
  AND t.status = $7 AND t.scheduled_at >= $5 AND t.scheduled_at <= $8
RETURNING t.id
"""


def _raw_fenced(env: Env, ks: list[TaskKey], to: str, frm: str) -> Any:
    lo, hi = _bounds(ks)
    return env.raw.fetch(
        RAW_FENCED,
        [k.id for k in ks],
        [k.scheduled_at for k in ks],
        [2] * len(ks),
        LEASE,
        lo,
        to,
        frm,
        hi,
    )


@variant("ack", "store")
def _ack_store(env: Env, n: int) -> Case:
    return (
        lambda: [FencedWrite(key=k, token=2) for k in env.seed(n, "DISPATCHED", 2)],
        lambda w: env.store.ack(w, LEASE, NOW),
    )


@variant("ack", "raw")
def _ack_raw(env: Env, n: int) -> Case:
    return (
        lambda: env.seed(n, "DISPATCHED", 2),
        lambda ks: _raw_fenced(env, ks, "RUNNING", "DISPATCHED"),
    )


@variant("complete", "store")
def _complete_store(env: Env, n: int) -> Case:
    return (
        lambda: [Completion(key=k, token=2) for k in env.seed(n, "RUNNING", 2)],
        lambda c: env.store.complete(c, NOW),
    )


@variant("complete", "raw")
def _complete_raw(env: Env, n: int) -> Case:
    return (
        lambda: env.seed(n, "RUNNING", 2),
        lambda ks: _raw_fenced(env, ks, "COMPLETED", "RUNNING"),
    )


def _fenced_sql(env: Env, name: str, ks: list[TaskKey], *extra: Any, tx: bool = False) -> Any:
    """The store's own fenced statement ``name`` on the raw connection (token 2)."""

    async def run() -> Any:
        args = ([k.id for k in ks], [k.scheduled_at for k in ks], [2] * len(ks))
        if tx:
            async with env.raw.transaction():
                return await env.raw.fetch(Q[name], *args, *extra)
        return await env.raw.fetch(Q[name], *args, *extra)

    return run()


@variant("ack", "rawsql")
def _ack_rawsql(env: Env, n: int) -> Case:
    return (
        lambda: env.seed(n, "DISPATCHED", 2),
        lambda ks: _fenced_sql(env, "ack", ks, LEASE, NOW, *_bounds(ks)),
    )


@variant("complete", "rawsql")
def _complete_rawsql(env: Env, n: int) -> Case:
    return (
        lambda: env.seed(n, "RUNNING", 2),
        lambda ks: _fenced_sql(
            env, "complete", ks, [None] * len(ks), NOW, *_bounds(ks), [None] * len(ks), tx=True
        ),
    )


# -- heartbeat / fail / release ------------------------------------------------------------
@variant("heartbeat", "store")
def _heartbeat_store(env: Env, n: int) -> Case:
    return (
        lambda: [FencedWrite(key=k, token=2) for k in env.seed(n, "RUNNING", 2)],
        lambda w: env.store.heartbeat(w, LEASE, NOW),
    )


RAW_HEARTBEAT = """
UPDATE tasks t SET lease_expires_at = $4, updated_at = $4
FROM unnest($1::uuid[], $2::timestamptz[], $3::bigint[]) AS u(id, scheduled_at, token)
WHERE t.id = u.id AND t.scheduled_at = u.scheduled_at AND t.fencing_token = u.token
  AND t.status = 'RUNNING' AND t.scheduled_at >= $5 AND t.scheduled_at <= $6
RETURNING t.id
"""


@variant("heartbeat", "raw")
def _heartbeat_raw(env: Env, n: int) -> Case:
    return (
        lambda: env.seed(n, "RUNNING", 2),
        lambda ks: env.raw.fetch(
            RAW_HEARTBEAT,
            [k.id for k in ks],
            [k.scheduled_at for k in ks],
            [2] * len(ks),
            LEASE,
            *_bounds(ks),
        ),
    )


@variant("heartbeat", "rawsql")
def _heartbeat_rawsql(env: Env, n: int) -> Case:
    return (
        lambda: env.seed(n, "RUNNING", 2),
        lambda ks: _fenced_sql(
            env, "heartbeat", ks, LEASE, NOW, *_bounds(ks), ["DISPATCHED", "RUNNING"]
        ),
    )


@variant("fail", "store")
def _fail_store(env: Env, n: int) -> Case:
    return (
        lambda: [Failure(key=k, token=2, error="boom") for k in env.seed(n, "RUNNING", 2)],
        lambda f: env.store.fail(f, NOW),
    )


RAW_FAIL = """
UPDATE tasks t SET status = 'RETRYING', retry_count = t.retry_count + 1, due_at = $4,
    last_error = u.error, lease_expires_at = NULL, updated_at = $4
FROM unnest($1::uuid[], $2::timestamptz[], $3::bigint[], $7::text[])
    AS u(id, scheduled_at, token, error)
WHERE t.id = u.id AND t.scheduled_at = u.scheduled_at AND t.fencing_token = u.token
  AND t.status = 'RUNNING' AND t.scheduled_at >= $5 AND t.scheduled_at <= $6
RETURNING t.id
"""


@variant("fail", "raw")
def _fail_raw(env: Env, n: int) -> Case:
    return (
        lambda: env.seed(n, "RUNNING", 2),
        lambda ks: env.raw.fetch(
            RAW_FAIL,
            [k.id for k in ks],
            [k.scheduled_at for k in ks],
            [2] * len(ks),
            NOW,
            *_bounds(ks),
            ["boom"] * len(ks),
        ),
    )


@variant("fail", "rawsql")
def _fail_rawsql(env: Env, n: int) -> Case:
    return (
        lambda: env.seed(n, "RUNNING", 2),
        lambda ks: _fenced_sql(
            env,
            "fail",
            ks,
            ["boom"] * len(ks),
            [True] * len(ks),
            [None] * len(ks),
            NOW,
            *_bounds(ks),
            [""] * len(ks),  # error type
            [1.0] * len(ks),  # backoff spread
            tx=True,  # as the store: the upstream policy shares the transaction
        ),
    )


@variant("release", "store")
def _release_store(env: Env, n: int) -> Case:
    return (
        lambda: [Release(key=k, token=2) for k in env.seed(n, "RUNNING", 2)],
        lambda r: env.store.release(r, NOW),
    )


RAW_RELEASE = """
UPDATE tasks t SET status = 'PRELOADED', lease_expires_at = NULL, updated_at = $4
FROM unnest($1::uuid[], $2::timestamptz[], $3::bigint[]) AS u(id, scheduled_at, token)
WHERE t.id = u.id AND t.scheduled_at = u.scheduled_at AND t.fencing_token = u.token
  AND t.status IN ('RUNNING', 'DISPATCHED') AND t.scheduled_at >= $5 AND t.scheduled_at <= $6
RETURNING t.id
"""


@variant("release", "raw")
def _release_raw(env: Env, n: int) -> Case:
    return (
        lambda: env.seed(n, "RUNNING", 2),
        lambda ks: env.raw.fetch(
            RAW_RELEASE,
            [k.id for k in ks],
            [k.scheduled_at for k in ks],
            [2] * len(ks),
            NOW,
            *_bounds(ks),
        ),
    )


@variant("release", "rawsql")
def _release_rawsql(env: Env, n: int) -> Case:
    return (
        lambda: env.seed(n, "RUNNING", 2),
        lambda ks: _fenced_sql(
            env, "release", ks, [None] * len(ks), NOW, *_bounds(ks), [False] * len(ks), tx=True
        ),
    )


# -- the whole lifecycle -------------------------------------------------------------------
@variant("lifecycle", "store")
def _lifecycle_store(env: Env, n: int) -> Case:
    async def life(tasks: list[NewTask]) -> None:
        s = env.store
        await s.insert_tasks(tasks, NOW)
        pre = await s.claim_preload(None, NOW + timedelta(minutes=60), n, NOW)
        asg = await s.mark_dispatched(
            [DispatchRequest(key=p.key, worker_id="w1", lease_expires_at=LEASE) for p in pre], NOW
        )
        writes = [FencedWrite(key=a.key, token=a.fencing_token) for a in asg if a]
        await s.ack(writes, LEASE, NOW)
        await s.complete([Completion(key=w.key, token=w.token) for w in writes], NOW)

    def setup() -> list[NewTask]:
        env.seed(0, "SCHEDULED")
        return env.new_tasks(n)

    return (setup, life)


@variant("lifecycle", "raw")
def _lifecycle_raw(env: Env, n: int) -> Case:
    day = NOW.replace(hour=0, minute=0, second=0)

    async def life(records: list[tuple[Any, ...]]) -> None:
        raw = env.raw
        await raw.copy_records_to_table("tasks", records=records, columns=COLS)
        rows = await raw.fetch(
            RAW_CLAIM, NOW + timedelta(minutes=60), n, NOW, day, day + timedelta(days=1)
        )
        ks = [TaskKey(r[0], r[1]) for r in rows]
        lo, hi = _bounds(ks)
        await raw.fetch(
            RAW_DISPATCH, [k.id for k in ks], [k.scheduled_at for k in ks], LEASE, lo, hi
        )
        await _raw_fenced(env, ks, "RUNNING", "DISPATCHED")
        await _raw_fenced(env, ks, "COMPLETED", "RUNNING")

    def setup() -> list[tuple[Any, ...]]:
        env.seed(0, "SCHEDULED")
        return [
            (t.id, t.tenant_id, t.type, NOW, NOW, "SCHEDULED", t.idempotency_key, *_TAIL)
            for t in env.new_tasks(n)
        ]

    return (setup, life)


@variant("lifecycle", "rawsql")
def _lifecycle_rawsql(env: Env, n: int) -> Case:
    day = NOW.replace(hour=0, minute=0, second=0)

    async def life(args: tuple[Any, ...]) -> None:
        raw = env.raw
        async with raw.transaction():
            await raw.fetch(Q["insert_tasks"], *args)
        rows = await raw.fetch(
            Q["claim_preload"],
            NOW + timedelta(minutes=60),
            None,
            day,
            day + timedelta(days=1),
            n,
            NOW,
            "scheduler",
            NOW + timedelta(minutes=60),  # retry horizon
        )
        ks = [TaskKey(r[0], r[1]) for r in rows]
        lo, hi = _bounds(ks)
        await raw.fetch(
            Q["mark_dispatched"],
            [k.id for k in ks],
            [k.scheduled_at for k in ks],
            ["w1"] * n,
            [LEASE] * n,
            NOW,
            lo,
            hi,
            "scheduler",
            [None] * n,
            [False] * n,
            False,
        )
        await _fenced_sql(env, "ack", ks, LEASE, NOW, lo, hi)
        await _fenced_sql(env, "complete", ks, [None] * n, NOW, lo, hi, [None] * n, tx=True)

    def setup() -> tuple[Any, ...]:
        env.seed(0, "SCHEDULED")
        return _insert_args(env.new_tasks(n))

    return (setup, life)


def _cases() -> list[tuple[str, int]]:
    return [(c, n) for c in VARIANTS for n in ([100, 1000] if c == "lifecycle" else BATCHES)]


@pytest.mark.parametrize(("call", "n"), _cases(), ids=lambda v: str(v))
def test_store_vs_raw(benchmark: Any, env: Env, call: str, n: int) -> None:
    _interleaved(benchmark, env, call, n)
