"""The SQLite audit write: one ``task_transitions`` row per step of a move.

Owns :func:`audit` (a move that passes through an intermediate state, e.g. RUNNING ->
RETRYING -> DEAD_LETTER, is written step by step from :data:`scheduler.store._sql.ROUTES`).
Calls :mod:`scheduler.store._sql` and the state machine; called by every SQLite part that
moves a task, inside its transaction.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping

from scheduler.states import TaskState, check_transition
from scheduler.store import _sql

STEPS: dict[tuple[TaskState, TaskState], list[tuple[TaskState, TaskState]]] = {}
"""(start, finish) -> its steps, for every route a statement makes."""
for _a, _b, _f, _t in _sql.route_steps():
    STEPS.setdefault((_a, _b), []).append((_f, _t))


def audit(
    c: sqlite3.Connection,
    q: Mapping[str, str],
    task_id: str,
    sched: int,
    start: TaskState,
    finish: TaskState,
    token: int,
    actor: str | None,
    at: int,
) -> None:
    """Record ``start`` -> ``finish`` of one task (each step checked)."""
    steps = STEPS.get((start, finish))
    if steps is None:
        check_transition(task_id, start, finish)
        steps = [(start, finish)]
    c.executemany(
        q["audit"],
        [(task_id, sched, f.value, t.value, token, actor or "", at) for f, t in steps],
    )
