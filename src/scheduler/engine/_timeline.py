"""The timeline: the timing wheel of this node's PRELOADED tasks and its key maps.

Owns the wheel, the task rows its keys point into (``_rows.py``: one compact row per
task: id, ``scheduled_at``, ``due_at``, shard and a group number for the interned
(tenant, type, pool, rate limit key); found by wheel key or by task id; shared with the
ready queues, which take a fired timer's row by its handle), and the decision to keep a
task in the wheel or spill it to the index mirror when the wheel is over its memory cap.
A task is a
``Preloaded`` object only on its way in and out (it is rebuilt from its row when it
fires): outstanding timers are not Python objects, so they cost about 100 bytes each
and a full collection never scans them. Calls the wheel, the index mirror and the shard
state (only this node's shards enter). Called by admission's callers (new PRELOADED tasks), the
pre-loader (claims, loads, reloads), the completer (released DAG children), the reaper
(requeued tasks), the shard handler (drops on a loss) and the dispatcher (what is due).
"""

from __future__ import annotations

import array
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta

from scheduler.engine._config import EngineConfig
from scheduler.engine._index_mirror import IndexMirror
from scheduler.engine._rows import TaskRows
from scheduler.engine._shard_state import ShardState
from scheduler.engine._stats import EngineStats
from scheduler.states import TaskState
from scheduler.types import InsertResult, Pool, Preloaded, PreloadedPage, TaskRecord
from scheduler.wheel import TimingWheel

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MS = timedelta(milliseconds=1)


def to_ms(ts: datetime) -> int:
    """Epoch milliseconds of an aware datetime, rounded down (exact, no float): for
    "now", and for figures."""
    return (ts - _EPOCH) // _MS


_US = timedelta(microseconds=1)
_END_MS = (1 << 62) - 1
"""The wheel's last millisecond: advancing to it fires every timer."""


def to_us(ts: datetime) -> int:
    """Epoch microseconds of an aware datetime, exactly (a datetime's own unit): the
    delivery gate compares due and now in it, so a task with a due time of
    12:00:00.000400 is never pushed at 12:00:00.000100 (both truncated to the
    millisecond, it was: 0.3 ms early)."""
    return (ts - _EPOCH) // _US


def preloaded(task: TaskRecord, due_at: datetime | None = None) -> Preloaded:
    """The wheel's entry for a PRELOADED row (due at ``due_at`` if given)."""
    return Preloaded(
        key=task.key,
        due_at=task.due_at if due_at is None else due_at,
        tenant_id=task.tenant_id,
        shard_id=task.shard_id,
        pool=task.pool,
        type=task.type,
        rate_key=task.rate_limit_key,
    )


class Timeline:
    """PRELOADED tasks of this node by due time."""

    def __init__(
        self,
        config: EngineConfig,
        shards: ShardState,
        mirror: IndexMirror,
        stats: EngineStats,
        wake_dispatcher: Callable[[], None],
        start_ms: int,
    ) -> None:
        self._config = config
        self._shards = shards
        self._mirror = mirror
        self._stats = stats
        self._wake_dispatcher = wake_dispatcher
        self._wheel = TimingWheel(tick_ms=config.tick_ms, start_ms=start_ms)
        # The wheel's keys are the table's handles; the ready queues share the rows.
        self.rows = TaskRows()
        self.rows.wheel = self._wheel
        self.rows.on_group = self._interned
        self._table = self.rows.table
        self._watched = frozenset(r.pool for r in config.reserves)
        self._group_latest: list[int] = []
        """By group number: the latest due ms of its tasks that entered the wheel (a
        group of a reserve's pool), or the end of time (any other group)."""
        self._watched_groups: list[int] = []
        """The group numbers of the reserves' pools."""
        self.latest_due_ms: dict[Pool, int] = {}
        """Per pool that has a reserve: the latest due time (ms since the epoch) of a
        task of that pool that entered the wheel (the dispatcher holds the pool's
        reserve while this is in sight, ``EngineConfig.reserve_linger_s``)."""

    def __len__(self) -> int:
        return len(self._wheel)

    def __contains__(self, task_id: object) -> bool:
        if not isinstance(task_id, uuid.UUID):
            return False
        k = self._table.find(task_id.int)
        return k >= 0 and k in self._wheel

    def reset(self, start_ms: int) -> None:
        """An empty wheel starting at ``start_ms`` (the engine's start); the rows of
        tasks waiting in the ready queues stay."""
        for k in self._wheel.advance(_END_MS):
            self._table.discard(k)
        self._wheel = TimingWheel(tick_ms=self._config.tick_ms, start_ms=start_ms)
        self.rows.wheel = self._wheel

    def memory_bytes(self) -> int:
        """C memory of the wheel and the task table (the outstanding timers' cost)."""
        return self._wheel.memory_bytes() + self._table.memory_bytes()

    def next_due_ms(self) -> int | None:
        """The earliest due time in the wheel."""
        return self._wheel.next_due_ms()

    def admit(self, results: Sequence[InsertResult]) -> None:
        """Put freshly inserted PRELOADED tasks into the wheel (any inserting caller)."""
        fresh = [
            preloaded(r.task) for r in results if r.created and r.task.status is TaskState.PRELOADED
        ]
        submitted = self._stats.tasks["submitted"]
        for r in results:
            if r.created:
                submitted[(r.task.pool.value, r.task.type)] += 1
                self._stats.submitted += 1
        self.add(fresh)

    def add(self, items: Sequence[Preloaded], *, index: bool = True, spill: bool = True) -> None:
        """Index PRELOADED tasks in the wheel by due time (one ``add_many`` per batch).

        ``index``: mirror them into the index; ``spill``: over the wheel's cap, keep the
        farthest in the index instead.
        """
        if self._shards.clustered:
            # Only our shards: the rest belong to other nodes, whose reconcile finds them.
            owned = self._shards.owned_or_gaining()
            items = [p for p in items if p.shard_id in owned]
        cap = self._config.wheel_max_timers
        if cap and spill and self._mirror.enabled:
            table = self._table
            fresh = [p for p in items if table.find(p.key.id.int) < 0]
            room = max(0, cap - len(self._wheel))
            if len(fresh) > room:
                # Over the wheel's memory cap: the nearest stay in the wheel, the rest
                # wait in the Redis index and the dispatcher pops them when due. Not
                # while a shard's index is being rebuilt (the rebuild would erase them).
                fresh.sort(key=lambda p: p.due_at)
                keep = fresh[:room]
                out: list[Preloaded] = []
                rebuilding = self._mirror.rebuilding
                for p in fresh[room:]:
                    (keep if p.shard_id in rebuilding else out).append(p)
                items = keep
                if out:
                    # Spilled tasks are in sight too (a path taken over the cap only).
                    for p in out:
                        if p.pool in self._watched:
                            self._saw(p.pool, (p.due_at - _EPOCH) // _MS)
                    self._mirror.spill(out, self._add_unspilled)
        keys = array.array("q")
        dues = array.array("q")
        added: list[Preloaded] = []
        add = self._table.add
        group = self.rows.group
        # The latest due time of a reserve's pool, per group (interned: a group's pool
        # is known once); a task of an unwatched pool costs a list index, no more.
        latest = self._group_latest
        for p in items:
            due_us = (p.due_at - _EPOCH) // _US
            g = group(p.tenant_id, p.type, p.pool, p.rate_key)
            k = add(p.key.id.int, (p.key.scheduled_at - _EPOCH) // _US, due_us, g, p.shard_id)
            if k < 0:
                continue  # in the wheel or waiting ready already (a reload, say)
            keys.append(k)
            due_ms = max(due_us // 1000, 0)
            dues.append(due_ms)
            if index:
                added.append(p)
            if due_ms > latest[g]:
                latest[g] = due_ms
        if self._watched_groups:
            self._note_latest()
        if keys:
            if index:
                self._mirror.add(added)
            self._wheel.add_many(keys, dues)
            self._stats.preloaded += len(keys)
            self._wake_dispatcher()

    def can_add_packed(self, *, index: bool, spill: bool) -> bool:
        """Whether :meth:`add_packed` may take a load: it neither mirrors into the
        index nor spills over the cap (those paths need the tasks as objects)."""
        return not index and not (spill and self._config.wheel_max_timers and self._mirror.enabled)

    def add_packed(self, page: PreloadedPage) -> int:
        """Index a packed page of PRELOADED tasks (a whole load: recovery, a takeover, a
        reconcile) without a Python object per task: each group's columns go into the
        task table and the wheel in two C calls. Only when :meth:`can_add_packed`.
        Returns how many were new."""
        allowed: bytes | None = None
        if self._shards.clustered:
            # Only our shards: the rest belong to other nodes, whose reconcile finds them.
            owned = self._shards.owned_or_gaining()
            mask = bytearray(max(owned, default=-1) + 1)
            for shard in owned:
                mask[shard] = 1
            allowed = bytes(mask)
        added = 0
        for group in page.groups:
            g = self.rows.group(group.tenant_id, group.type, group.pool, group.rate_key)
            keys, dues = self._table.add_many(
                group.ids, group.scheduled_us, group.due_us, g, group.shards, allowed
            )
            if keys:
                self._wheel.add_many(keys, dues)
                added += len(keys)
                if group.pool in self._watched:
                    self._saw(group.pool, max(dues))
        if added:
            self._stats.preloaded += added
            self._wake_dispatcher()
        return added

    def _interned(self, g: int, pool: Pool) -> None:
        """A group was interned (``TaskRows.on_group``): a group of a reserve's pool
        starts at -1 (noted), any other at the end of time (never noted: ``due_ms >
        latest[g]`` is never true for it)."""
        watched = pool in self._watched
        self._group_latest.append(-1 if watched else _END_MS)
        if watched:
            self._watched_groups.append(g)

    def _note_latest(self) -> None:
        """Fold the watched groups' latest due times into :attr:`latest_due_ms` (per
        pool; O(watched groups), once per add)."""
        latest, groups = self._group_latest, self.rows.groups
        for g in self._watched_groups:
            if latest[g] >= 0:
                self._saw(groups[g][2], latest[g])

    def _saw(self, pool: Pool, due_ms: int) -> None:
        if due_ms > self.latest_due_ms.get(pool, -1):
            self.latest_due_ms[pool] = due_ms

    def _add_unspilled(self, items: Sequence[Preloaded]) -> None:
        self.add(items, index=False, spill=False)

    def drop(self, task_id: uuid.UUID) -> None:
        """Forget ``task_id`` (cancelled)."""
        k = self._table.find(task_id.int)
        if k >= 0 and self._wheel.cancel(k):  # a waiting row is the ready queues'
            self._table.discard(k)

    def postpone(self, task_id: uuid.UUID, due_us: int) -> bool:
        """Move ``task_id``'s timer to ``due_us`` (epoch µs) if that is later than its
        own (a debounced submission pushed it; the store's due time only grows, so an
        older notice that arrives late never pulls it back). Whether it is in the wheel
        (a row waiting in the ready queues is not: the caller takes it out of them)."""
        k = self._table.find(task_id.int)
        if k < 0 or not self.rows.timed(k):
            return False  # not in the wheel: a waiting row is the ready queues' (or gone)
        if due_us <= self._table.due_us(k):
            return True
        self._wheel.cancel(k)
        row = self._table.pop(k)
        moved = (row[0], row[1], due_us, row[3], row[4])
        self.add([self.rows.rebuild(moved)])
        return True

    def drop_shards(self, shards: frozenset[int]) -> int:
        """Forget every timer of ``shards`` (lost to another node); how many (the
        ready queues drop the rows of theirs)."""
        wheel = self._wheel
        dropped = array.array("q", [k for k in self._table.in_shards(shards) if k in wheel])
        wheel.cancel_many(dropped)
        for k in dropped:
            self._table.discard(k)
        return len(dropped)

    def fire(self, until_ms: int) -> list[Preloaded]:
        """Take every task due by ``until_ms`` out of the wheel, in due order (each
        rebuilt from its row)."""
        rebuild = self.rows.rebuild
        return [rebuild(row) for row in self._table.pop_many(self._wheel.advance(until_ms))]

    def fire_handles(self, until_ms: int) -> array.array[int]:
        """Take every task due by ``until_ms`` out of the wheel, in due order, as the
        handles of their rows, which stay: the caller queues them at once
        (``ReadyQueues.extend_handles``), no object is built."""
        return self._wheel.advance(until_ms)
