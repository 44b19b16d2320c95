"""The task state machine: the single source of truth for legal transitions.

The store's SQL guards (``WHERE status IN (...)``) are generated from
:data:`TRANSITIONS`, so code and SQL cannot drift apart. Brief §3 has the table.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping

from scheduler._errors import InvalidTransition


class TaskState(enum.StrEnum):
    """Every state a task can be in."""

    SCHEDULED = "SCHEDULED"
    PRELOADED = "PRELOADED"
    DISPATCHED = "DISPATCHED"
    RUNNING = "RUNNING"
    RETRYING = "RETRYING"
    COMPLETED = "COMPLETED"
    CANCELLED = "CANCELLED"
    DEAD_LETTER = "DEAD_LETTER"


S = TaskState

TRANSITIONS: Mapping[tuple[TaskState, TaskState], str] = {
    (S.SCHEDULED, S.PRELOADED): "pre-loader: due within look-ahead, dependencies resolved",
    (S.SCHEDULED, S.CANCELLED): "client cancel",
    (S.PRELOADED, S.CANCELLED): "client cancel",
    (S.RETRYING, S.CANCELLED): "client cancel",
    (S.PRELOADED, S.DISPATCHED): "dispatcher: fencing token + 1, lease set",
    (S.PRELOADED, S.RUNNING): "dispatcher, to a worker that starts tasks on delivery "
    "(no ack): fencing token + 1, lease set",
    (S.DISPATCHED, S.RUNNING): "worker acknowledged with the current token",
    (S.DISPATCHED, S.PRELOADED): "lease expired before ack, or worker disconnected",
    (S.RUNNING, S.COMPLETED): "fenced success",
    (S.RUNNING, S.RETRYING): "fenced failure, task timeout, or lease expiry",
    (S.RUNNING, S.PRELOADED): "graceful drain: lease released with a checkpoint",
    (S.RUNNING, S.CANCELLED): "cancel acknowledged, or lease expiry after a cancel request",
    (S.RETRYING, S.PRELOADED): "backoff elapsed and attempts remain",
    (S.RETRYING, S.DEAD_LETTER): "attempts exhausted, or error marked non-retryable",
    (S.DEAD_LETTER, S.SCHEDULED): "operator redrive",
}
"""(from, to) -> what causes it. Anything not listed is illegal."""

TERMINAL: frozenset[TaskState] = frozenset({S.COMPLETED, S.CANCELLED})
"""States no transition leaves."""


def is_legal(from_state: TaskState, to_state: TaskState) -> bool:
    """Whether the state machine allows ``from_state`` -> ``to_state``."""
    return (from_state, to_state) in TRANSITIONS


def sources(to_state: TaskState) -> tuple[TaskState, ...]:
    """Every state from which ``to_state`` can be reached (for SQL guards)."""
    return tuple(f for (f, t) in TRANSITIONS if t is to_state)


def check_transition(task_id: str, from_state: TaskState, to_state: TaskState) -> None:
    """Raise :class:`InvalidTransition` unless the move is legal."""
    if not is_legal(from_state, to_state):
        raise InvalidTransition(task_id, from_state.value, to_state.value)
