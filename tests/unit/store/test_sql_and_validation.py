"""Unit tests: SQL templates follow the state machine; validation; config; URLs."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest

from scheduler._errors import InvalidArgument, InvalidTransition
from scheduler.states import TRANSITIONS, TaskState
from scheduler.store import StoreConfig, _sql, open_store
from scheduler.store._common import day_windows


def test_every_query_is_expanded() -> None:
    for dialect in ("postgres", "sqlite"):
        for name, sql in _sql.queries(dialect).items():
            assert "{{" not in sql, (dialect, name)


def test_guard_templates_check_the_state_machine() -> None:
    assert _sql.expand("{{from:RUNNING,DISPATCHED|to:PRELOADED}}") == "'RUNNING', 'DISPATCHED'"
    assert _sql.expand("{{sources:COMPLETED}}") == "'RUNNING'"
    with pytest.raises(InvalidTransition):
        _sql.expand("{{from:SCHEDULED|to:COMPLETED}}")
    # Several targets: every source must reach every one of them.
    assert _sql.expand("{{from:PRELOADED|to:DISPATCHED,RUNNING}}") == "'PRELOADED'"
    with pytest.raises(InvalidTransition):
        _sql.expand("{{from:DISPATCHED|to:RUNNING,COMPLETED}}")


def test_routes_are_legal_steps() -> None:
    for _start, _finish, f, t in _sql.route_steps():
        assert (f, t) in TRANSITIONS


def test_status_check_constraint_lists_every_state() -> None:
    schema = _sql.read_text("postgres", "schema.sql")
    for state in TaskState:
        assert f"'{state.value}'" in schema


def test_migrations_are_numbered() -> None:
    versions = [v for v, _, _ in _sql.migrations()]
    # Unique and ascending; gaps allowed (numbers are handed out to parallel branches).
    assert versions == sorted(set(versions))
    assert {1, 2, 3, 4, 5, 6, 7} <= set(versions)


def test_day_windows_split_at_midnight() -> None:
    lo = datetime(2026, 1, 1, 23, 0, tzinfo=UTC)
    hi = datetime(2026, 1, 2, 1, 0, tzinfo=UTC)
    assert day_windows(lo, hi) == [
        (lo, datetime(2026, 1, 2, tzinfo=UTC)),
        (datetime(2026, 1, 2, tzinfo=UTC), hi),
    ]


def test_config_validates() -> None:
    assert StoreConfig().payload_limit_bytes == 1024 * 1024
    with pytest.raises(ValueError, match="payload_limit_bytes"):
        StoreConfig(payload_limit_bytes=0)
    with pytest.raises(ValueError, match="retention_days"):
        StoreConfig(retention_days=0)


async def test_open_store_urls() -> None:
    with pytest.raises(ValueError, match="unsupported"):
        await open_store("mysql://x")
    s = await open_store("sqlite://:memory:")
    try:
        with pytest.raises(Exception, match="tenant"):
            await s.get_tenant(uuid.uuid4())
    finally:
        await s.close()


def test_ids_read_from_the_database_take_the_fast_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """asyncpg reads a UUID as its own subclass (a tenant id from the API-key lookup):
    such a task is valid, and is checked without the per-field path."""
    from asyncpg.pgproto.pgproto import UUID as PgUUID

    from scheduler.store import _validate as v
    from scheduler.types import NewTask

    now = datetime(2026, 1, 1, tzinfo=UTC)
    task = NewTask(
        id=uuid.uuid4(),
        tenant_id=PgUUID(str(uuid.uuid4())),
        type="t",
        payload={"a": 1},
        scheduled_at=now,
        due_at=now,
        idempotency_key="k",
        shard_id=0,
    )

    def per_field(i: int, t: object, limit: int) -> tuple[str, str | None]:
        raise AssertionError("the per-field path was taken")

    monkeypatch.setattr(v, "new_task", per_field)
    assert v.new_tasks([task], 1000) == [('{"a":1}', None)]


def test_batch_validation_fast_path_reports_the_failing_item() -> None:
    from scheduler.store import _validate as v
    from scheduler.types import DispatchRequest, Failure, NewTask, TaskKey

    now = datetime(2026, 1, 1, tzinfo=UTC)

    def task(**kw: object) -> NewTask:
        fields: dict[str, object] = {
            "id": uuid.uuid4(),
            "tenant_id": uuid.uuid4(),
            "type": "t",
            "payload": {"a": 1},
            "scheduled_at": now,
            "due_at": now,
            "idempotency_key": "k",
            "shard_id": 0,
        }
        fields.update(kw)
        return NewTask(**fields)  # type: ignore[arg-type]

    good = [task() for _ in range(3)]
    assert v.new_tasks(good, 1000) == [v.new_task(i, t, 1000) for i, t in enumerate(good)]
    assert v.new_tasks([task(trace_context={"x": "y"})], 1000) == [('{"a":1}', '{"x":"y"}')]
    cases: list[tuple[NewTask, str]] = [
        (task(type=""), "tasks[1].type"),
        (task(scheduled_at=datetime(2026, 1, 1)), "tasks[1].scheduled_at"),
        (task(payload={"a": float("nan")}), "tasks[1].payload"),
        (task(payload={"a": "x" * 2000}), "tasks[1].payload"),
        (task(trace_context={"a": "\x00"}), "tasks[1].trace_context"),
        (task(timeout_s=float("inf")), "tasks[1].timeout_s"),
        (task(shard_id=True), "tasks[1].shard_id"),
    ]
    for bad, field in cases:
        with pytest.raises(InvalidArgument) as err:
            v.new_tasks([good[0], bad, good[1]], 1000)
        assert err.value.field == field
    k = TaskKey(uuid.uuid4(), now)
    naive = TaskKey(uuid.uuid4(), datetime(2026, 1, 1))
    with pytest.raises(InvalidArgument) as err:
        v.keys("writes", [Failure(key=k, token=1, error=""), Failure(key=naive, token=1, error="")])
    assert err.value.field == "writes[1].key.scheduled_at"
    with pytest.raises(InvalidArgument) as err:
        v.dispatch_requests(
            [
                DispatchRequest(key=k, worker_id="w", lease_expires_at=now),
                DispatchRequest(key=k, worker_id="", lease_expires_at=now),
            ]
        )
    assert err.value.field == "requests[1].worker_id"
    with pytest.raises(InvalidArgument) as err:
        v.failures([Failure(key=k, token=1, error="ok"), Failure(key=k, token=1, error="a\x00")])
    assert err.value.field == "items[1].error"


def test_a_column_of_nulls_goes_to_unnest_as_one_null() -> None:
    """``unnest`` pads a NULL array with NULLs, so a column that is all NULL is sent as
    one NULL (asyncpg encodes no element); any other column goes as it is."""
    from scheduler.store.postgres._db import column

    assert column([None, None, None]) is None
    some = [None, "x", None]
    assert column(some) is some
    first = ["x", None]
    assert column(first) is first
    empty: list[str] = []
    assert column(empty) is empty


def test_a_uniform_column_goes_as_its_one_value() -> None:
    """A column whose values are all equal goes as a one-element array, which the
    statement spreads back with ``tickwheel_fill`` (migration 0014); any other as it is."""
    from scheduler.store.postgres._db import uniform

    assert uniform(["bench"] * 5) == ["bench"]
    mixed = ["bench", "bench", "other"]
    assert uniform(mixed) is mixed
    one = ["bench"]
    assert uniform(one) is one
    empty: list[str] = []
    assert uniform(empty) is empty
    assert uniform([None, None]) == [None]
