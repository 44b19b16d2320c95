"""Unit tests: the SQLite SQL sections alone, on an in-memory database (no store)."""

from __future__ import annotations

import sqlite3
import uuid

import pytest

from scheduler.states import TaskState, sources
from scheduler.store import _sql

Q = _sql.queries("sqlite")


@pytest.fixture
def db() -> sqlite3.Connection:
    conn = sqlite3.connect(":memory:", isolation_level=None)
    conn.row_factory = sqlite3.Row
    conn.executescript(_sql.read_text("sqlite", "schema.sql"))
    return conn


def insert(db: sqlite3.Connection, status: TaskState, *, due: int = 0, deps: int = 0) -> str:
    task_id = str(uuid.uuid4())
    args = (task_id, str(uuid.uuid4()), "t", 0, due, status.value, task_id, 3, "{}", deps)
    args += (0, "standard", 0, "symmetric", 0.0, None, None, None, 0, 0, None, None, None)
    assert db.execute(Q["insert_task"], args).rowcount == 1
    return task_id


def test_no_inline_sql_is_left_to_the_code() -> None:
    """Every statement the SQLite store runs is a named section; all are expanded."""
    for name in ("insert_tenant", "update_tenant", "list_tasks", "claim_preload"):
        assert name in Q
    assert all("{{" not in sql for sql in Q.values())


def test_claim_guard_is_rendered_from_the_state_machine() -> None:
    assert "status IN ('SCHEDULED', 'RETRYING')" in Q["claim_preload"]
    assert set(sources(TaskState.PRELOADED)) >= {TaskState.SCHEDULED, TaskState.RETRYING}


@pytest.mark.parametrize("status", list(TaskState))
def test_claim_write_moves_only_scheduled_or_retrying_rows(
    db: sqlite3.Connection, status: TaskState
) -> None:
    task_id = insert(db, status)
    row = db.execute(Q["claim_preload"], (1, task_id, 10, 10)).fetchone()
    movable = status in (TaskState.SCHEDULED, TaskState.RETRYING)
    assert (row is not None) is movable
    (now,) = db.execute("SELECT status FROM tasks WHERE id = ?", (task_id,)).fetchone()
    assert now == (TaskState.PRELOADED.value if movable else status.value)


def test_claim_write_leaves_waiting_children_and_later_tasks(db: sqlite3.Connection) -> None:
    child = insert(db, TaskState.SCHEDULED, deps=1)
    later = insert(db, TaskState.SCHEDULED, due=100)
    assert db.execute(Q["claim_preload"], (1, child, 10, 10)).fetchone() is None
    assert db.execute(Q["claim_preload"], (1, later, 10, 10)).fetchone() is None
