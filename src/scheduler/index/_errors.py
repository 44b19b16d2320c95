"""Errors of the time index. The engine answers every one by falling back to PostgreSQL."""

from __future__ import annotations

from scheduler._errors import TickwheelError


class IndexUnavailable(TickwheelError):
    """The index could not be read or written (Redis down, timeout, server error).

    Retryable: the caller serves the shard from PostgreSQL meanwhile and rebuilds the
    index with :meth:`TimeIndex.replace` when it answers again.
    """

    retryable = True

    def __init__(self, shard: int | None, detail: str) -> None:
        where = "time index" if shard is None else f"time index of shard {shard}"
        super().__init__(f"{where} unavailable: {detail}")
        self.shard = shard
        self.detail = detail


class IndexLost(IndexUnavailable):
    """The shard's index is not complete (never seeded, or flushed / evicted since).

    Its content can no longer stand for the shard's PRELOADED window: rebuild it with
    :meth:`TimeIndex.replace` from PostgreSQL (or from the wheel).
    """

    def __init__(self, shard: int) -> None:
        super().__init__(shard, "not seeded (flushed, evicted or never built)")
