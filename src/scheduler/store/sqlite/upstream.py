"""The upstream policy on SQLite: what a workflow task's failure does to its children.

Owns :func:`apply_upstream`, a plain function the task writes (``writes``, ``dispatch``,
``actions``) call inside their own transaction, on the same connection, after they moved
a workflow task to DEAD_LETTER or CANCELLED. Calls :mod:`.audit`; see docs/workflows.md.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Mapping, Sequence

from scheduler.states import TaskState
from scheduler.store.sqlite.audit import audit
from scheduler.types import UPSTREAM_FAILED, UpstreamPolicy

log = logging.getLogger(__name__)


def apply_upstream(
    c: sqlite3.Connection,
    q: Mapping[str, str],
    keys: Sequence[tuple[str, int]],
    n: int,
    actor: str,
) -> int:
    """Apply the upstream policy of the workflow tasks among ``keys`` ((id, scheduled_at
    in microseconds)) that are now DEAD_LETTER or CANCELLED, on ``c`` inside the
    caller's transaction (the one that moved them). Policy cancel: every waiting
    descendant -> CANCELLED with ``upstream_failed`` (audited); continue: the direct
    children's counters go down and they stay SCHEDULED for the pre-loader. Returns
    how many were cancelled.

    Callers pass only keys they just moved that carry a ``workflow_id``.
    """
    cancelled = 0
    for task_id, sched in dict.fromkeys(keys):
        pol = c.execute(q["failed_parent_policy"], (task_id, sched)).fetchone()
        if pol is None:
            continue
        if pol[0] == UpstreamPolicy.CONTINUE.value:
            for (child,) in c.execute(q["children"], (task_id,)).fetchall():
                c.execute(q["resolve_child"], (n, child))
            continue
        frontier = [task_id]
        seen: set[str] = set()
        while frontier:
            parent = frontier.pop()
            for (child,) in c.execute(q["children"], (parent,)).fetchall():
                if child in seen:
                    continue
                seen.add(child)
                frontier.append(child)
                row = c.execute(q["cancel_waiting"], (UPSTREAM_FAILED, n, child)).fetchone()
                if row is not None:
                    audit(
                        c,
                        q,
                        row[0],
                        row[1],
                        TaskState.SCHEDULED,
                        TaskState.CANCELLED,
                        row[2],
                        actor,
                        n,
                        reason=UPSTREAM_FAILED,
                    )
                    cancelled += 1
    if cancelled:
        log.info("cancelled %d descendants (upstream_failed)", cancelled)
    return cancelled
