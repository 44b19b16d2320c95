"""The work-notice protocol: how a cluster's nodes hear about work in one store.

Owns :class:`NoticeStore`, :class:`WorkNotices` and :data:`WorkCallback` (part of
:class:`~scheduler.store.Store`). Imports nothing of the store; implemented by
``scheduler.store.postgres.notices`` (LISTEN/NOTIFY) and by SQLite (no channel); called
by the engine.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Protocol

WorkCallback = Callable[[frozenset[int], bool], None]
"""``on_notice(shards, reconcile)`` for :meth:`NoticeStore.listen_work`; called on the event
loop, must not block."""


MoveCallback = Callable[[int, uuid.UUID, int], None]
"""``on_move(shard, task_id, due_us)`` for :meth:`NoticeStore.listen_work`: a pending
task's due time was pushed later (a debounced submission, issue 43) to ``due_us``
(epoch microseconds); called on the event loop, must not block."""


class WorkNotices(Protocol):
    """An open :meth:`NoticeStore.listen_work` subscription."""

    async def wait_closed(self) -> None:
        """Return when the subscription ended (its connection was lost, or closed)."""
        ...

    async def close(self) -> None:
        """Stop listening; safe twice."""
        ...


class NoticeStore(Protocol):
    """Work notices between processes that share one store."""

    async def listen_work(
        self, on_notice: WorkCallback, on_move: MoveCallback | None = None
    ) -> WorkNotices | None:
        """Hear, from any process, that a shard has work its owner should pick up:
        tasks inserted SCHEDULED (``reconcile=False``: the pre-loader claims them) and
        workflow children released to PRELOADED (``reconcile=True``: the owner re-reads
        its PRELOADED rows). Each write that makes such work sends one notice naming its
        shards, delivered when (and only if) it commits. ``on_move``: a debounced
        submission pushed a pending task's due time (its owner moves its timer).
        ``None``: this store has no channel to other processes (SQLite; one process
        owns every shard)."""
        ...
