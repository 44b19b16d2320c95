"""Unit tests: SQL templates follow the state machine; validation; config; URLs."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest

from scheduler._errors import InvalidTransition
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


def test_routes_are_legal_steps() -> None:
    for _start, _finish, f, t in _sql.route_steps():
        assert (f, t) in TRANSITIONS


def test_status_check_constraint_lists_every_state() -> None:
    schema = _sql.read_text("postgres", "schema.sql")
    for state in TaskState:
        assert f"'{state.value}'" in schema


def test_migrations_are_numbered() -> None:
    assert [v for v, _, _ in _sql.migrations()] == [1, 2]


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
