"""The upstream policy on PostgreSQL: what a workflow task's failure does to its children.

Owns :func:`apply_upstream`, a plain function the task writes (``writes``, ``dispatch``,
``actions``) call on their own connection inside their open transaction, after they
moved a workflow task to DEAD_LETTER or CANCELLED. Calls :mod:`.notices` (children freed
for the pre-loader may belong to another node); see docs/workflows.md.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from scheduler.store import _common
from scheduler.store.postgres.notices import notify_work
from scheduler.types import UPSTREAM_FAILED, TaskKey, UpstreamPolicy

if TYPE_CHECKING:
    from scheduler.store.postgres._db import Conn

log = logging.getLogger(__name__)


async def apply_upstream(
    conn: Conn, q: Mapping[str, str], keys: Sequence[TaskKey], now: datetime, actor: str
) -> int:
    """Apply the upstream policy of the workflow tasks among ``keys`` that are now
    DEAD_LETTER or CANCELLED, on ``conn`` inside the caller's open transaction (the
    one that moved them). Policy cancel: every waiting descendant -> CANCELLED with
    ``upstream_failed`` (audited, ``actor``); continue: the direct children's counters
    go down and they stay SCHEDULED for the pre-loader. Returns how many were cancelled.

    Callers pass only keys they just moved that carry a ``workflow_id``, so a batch
    without any costs no query.
    """
    if not keys:
        return 0
    lo, hi = _common.bounds(keys)
    found = await conn.fetch(
        q["failed_parent_policies"],
        [k.id for k in keys],
        [k.scheduled_at for k in keys],
        lo,
        hi,
    )
    cancel = [r[0] for r in found if r[2] == UpstreamPolicy.CANCEL.value]
    cont = [r[0] for r in found if r[2] == UpstreamPolicy.CONTINUE.value]
    cancelled = 0
    if cancel:
        done = await conn.fetch(q["cancel_descendants"], cancel, now, UPSTREAM_FAILED, actor)
        cancelled = len(done)
        if cancelled:
            log.info("cancelled %d descendants (upstream_failed)", cancelled)
    if cont:
        freed = await conn.fetch(q["resolve_children"], cont, now)
        # At zero they are the pre-loader's; their owner may be another node.
        await notify_work(
            conn,
            {r["shard_id"] for r in freed if r["unresolved_dependencies"] == 0},
            reconcile=False,
        )
    return cancelled
