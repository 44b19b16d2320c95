"""The SQLite audit write: one ``task_transitions`` row per step of a move.

Owns :func:`audit` (a move that passes through an intermediate state, e.g. RUNNING ->
RETRYING -> DEAD_LETTER, is written step by step from :data:`scheduler.store._sql.ROUTES`).
Calls :mod:`scheduler.store._sql` and the state machine; called by every SQLite part that
moves a task, inside its transaction.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Mapping

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
    *,
    reason: str | Callable[[TaskState], str],
    due_at: int | None = None,
) -> None:
    """Record ``start`` -> ``finish`` of one task (each step checked), each step with
    its reason (``reason``, or ``reason(step's target)``); ``due_at`` on a dispatch."""
    steps = STEPS.get((start, finish))
    if steps is None:
        check_transition(task_id, start, finish)
        steps = [(start, finish)]
    c.executemany(
        q["audit"],
        [
            (
                task_id,
                sched,
                f.value,
                t.value,
                token,
                actor or "",
                at,
                reason if isinstance(reason, str) else reason(t),
                due_at,
            )
            for f, t in steps
        ],
    )


def fail_reason(
    error: str, retryable: bool, retry_count: int, max_retries: int, final: TaskState
) -> Callable[[TaskState], str]:
    """The reasons of a failed attempt's steps (as PostgreSQL's ``fail`` statement);
    ``retry_count`` is the count after this failure, ``final`` the state it ends in."""

    def of(to: TaskState) -> str:
        if to is TaskState.DEAD_LETTER:
            if retryable and retry_count > max_retries:
                return "no attempts left"
            return "not retryable"
        if final is TaskState.RETRYING:
            return f"failed: {error[:200]} (retry {retry_count} of {max_retries})"
        return f"failed: {error[:200]}"

    return of


def lease_expired(to: TaskState) -> str:
    """The reasons of a lease expiry's steps."""
    if to is TaskState.DEAD_LETTER:
        return "lease expired, no attempts left"
    if to is TaskState.CANCELLED:
        return "lease expired, cancel pending"
    return "lease expired"
