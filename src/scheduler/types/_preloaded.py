"""PRELOADED tasks bound for the wheel: one at a time (``Preloaded``) or packed in columns
per (tenant, type, pool) for a whole load (``scheduler.types`` re-exports them)."""

from __future__ import annotations

import array
import dataclasses
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import NamedTuple

from scheduler.types._tasks import Pool, TaskKey


class Preloaded(NamedTuple):
    """A task that is PRELOADED and belongs in the wheel at ``due_at``.

    A named tuple, not a dataclass: the timeline rebuilds one from its compact row for
    every task that fires, and a tuple is built several times faster than a frozen
    dataclass."""

    key: TaskKey
    due_at: datetime
    tenant_id: uuid.UUID
    shard_id: int
    pool: Pool
    type: str
    rate_key: str = ""
    """The task's rate limit key (issue 43); empty: none."""


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_US = timedelta(microseconds=1)


def _us(ts: datetime) -> int:
    return (ts - _EPOCH) // _US


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class PreloadedGroup:
    """PRELOADED tasks of one (tenant, type, pool) as packed columns: a whole load's
    lean form (recovery, a shard takeover, a reconcile), with no Python object per task.
    Item ``i`` of every column is the same task."""

    tenant_id: uuid.UUID
    type: str
    pool: Pool
    ids: bytes
    """16 bytes per task: each id's ``UUID.bytes`` (big-endian)."""
    scheduled_us: array.array[int]
    """``scheduled_at`` per task, epoch microseconds (``array('q')``)."""
    due_us: array.array[int]
    """``due_at`` per task, epoch microseconds (``array('q')``)."""
    shards: array.array[int]
    """``shard_id`` per task (``array('q')``)."""
    rate_key: str = ""
    """The group's rate limit key (issue 43); empty: none."""

    def __len__(self) -> int:
        return len(self.scheduled_us)

    def unpack(self) -> list[Preloaded]:
        """The tasks as ``Preloaded`` (for the paths that need objects)."""
        ids = self.ids
        return [
            Preloaded(
                TaskKey(uuid.UUID(bytes=ids[16 * i : 16 * i + 16]), _EPOCH + s * _US),
                _EPOCH + d * _US,
                self.tenant_id,
                shard,
                self.pool,
                self.type,
                self.rate_key,
            )
            for i, (s, d, shard) in enumerate(
                zip(self.scheduled_us, self.due_us, self.shards, strict=True)
            )
        ]


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class PreloadedPage:
    """One keyset page of PRELOADED tasks, packed per (tenant, type, pool)."""

    groups: tuple[PreloadedGroup, ...]
    count: int
    """Tasks in the page (a page shorter than asked for is the last)."""
    last: TaskKey | None
    """The page's last key in (scheduled_at, id) order: where the next page starts."""

    @classmethod
    def of(cls, items: Sequence[Preloaded]) -> PreloadedPage:
        """Pack ``items`` (in (scheduled_at, id) order, as a page is)."""
        by_group: dict[tuple[uuid.UUID, str, Pool, str], list[Preloaded]] = {}
        for p in items:
            by_group.setdefault((p.tenant_id, p.type, p.pool, p.rate_key), []).append(p)
        groups = tuple(
            PreloadedGroup(
                tenant_id=tenant_id,
                type=type_,
                pool=pool,
                ids=b"".join(p.key.id.bytes for p in ps),
                scheduled_us=array.array("q", [_us(p.key.scheduled_at) for p in ps]),
                due_us=array.array("q", [_us(p.due_at) for p in ps]),
                shards=array.array("q", [p.shard_id for p in ps]),
                rate_key=rate_key,
            )
            for (tenant_id, type_, pool, rate_key), ps in by_group.items()
        )
        return cls(groups=groups, count=len(items), last=items[-1].key if items else None)

    def unpack(self) -> list[Preloaded]:
        """Every task as ``Preloaded``, in (scheduled_at, id) order."""
        out = [p for g in self.groups for p in g.unpack()]
        out.sort(key=lambda p: (p.key.scheduled_at, p.key.id))
        return out
