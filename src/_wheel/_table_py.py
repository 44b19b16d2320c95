"""Pure-Python twin of the task table (``_table_c.pyx``): same API, same semantics.

A ``TaskTable`` holds one compact row per task the engine's timeline and ready queues
know: the task's 128-bit id, its ``scheduled_at`` and ``due_at`` in epoch microseconds,
a group number (the caller's interned ``(tenant, type, pool)``) and its shard. A row is
found by its handle (a small int, which the wheel uses as its key) or by its id. The C
version keeps the rows in one array of 40-byte structs and the ids in an open-addressing
index of int32 handles: no Python object per task, so the garbage collector never scans
them and a million tasks cost about 46 bytes of table. This twin keeps the same API on
dicts, for ``TICKWHEEL_NO_EXTENSIONS=1`` and as the tests' oracle.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Sequence

Row = tuple[int, int, int, int, int]
"""(id as a 128-bit int, scheduled_at µs, due_at µs, group, shard)."""

_U128 = (1 << 128) - 1
_I64_MIN = -(1 << 63)
_I64_MAX = (1 << 63) - 1
_I32_MAX = (1 << 31) - 1
MAX_ROWS = (1 << 31) - 1


def _int(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{what} must be an int, not {type(value).__name__}")
    return value


def check_row(task_id: int, scheduled_us: int, due_us: int, group: int, shard: int) -> None:
    """Raise ``TypeError``/``ValueError`` for a row the C table could not hold."""
    if not 0 <= _int(task_id, "task_id") <= _U128:
        raise ValueError(f"task_id must be an unsigned 128-bit int, got {task_id}")
    for name, v in (("scheduled_us", scheduled_us), ("due_us", due_us)):
        if not _I64_MIN <= _int(v, name) <= _I64_MAX:
            raise ValueError(f"{name} {v} is outside the signed 64-bit range")
    for name, v in (("group", group), ("shard", shard)):
        if not 0 <= _int(v, name) <= _I32_MAX:
            raise ValueError(f"{name} must be in [0, {_I32_MAX}], got {v}")


class TaskTable:
    """Compact task rows by handle and by 128-bit id (pure Python)."""

    __slots__ = ("_free", "_ids", "_next", "_rows")

    def __init__(self) -> None:
        self._rows: dict[int, Row] = {}
        self._ids: dict[int, int] = {}
        self._free: list[int] = []
        self._next = 0

    def __len__(self) -> int:
        return len(self._rows)

    def __contains__(self, task_id: object) -> bool:
        return isinstance(task_id, int) and task_id in self._ids

    def add(self, task_id: int, scheduled_us: int, due_us: int, group: int, shard: int) -> int:
        """Store a row; its handle, or -1 (and nothing stored) if ``task_id`` is here."""
        check_row(task_id, scheduled_us, due_us, group, shard)
        if task_id in self._ids:
            return -1
        if self._free:
            h = self._free.pop()
        else:
            if self._next >= MAX_ROWS:
                raise MemoryError(f"task table is full ({MAX_ROWS} rows)")
            h = self._next
            self._next += 1
        self._rows[h] = (task_id, scheduled_us, due_us, group, shard)
        self._ids[task_id] = h
        return h

    def add_many(
        self,
        ids: bytes,
        scheduled_us: Sequence[int],
        due_us: Sequence[int],
        group: int,
        shards: Sequence[int],
        allowed: bytes | None = None,
    ) -> tuple[array[int], array[int]]:
        """Store many rows of one group: ``ids`` holds 16 big-endian bytes per row (a
        UUID's ``bytes``), the other columns one int per row. Rows whose id is here
        already, and with ``allowed``, rows whose shard ``s`` has no nonzero
        ``allowed[s]``, are skipped. Returns the new rows' handles and their due times
        in ms (``due_us // 1000``, at least 0): what the wheel's ``add_many`` takes."""
        n = len(scheduled_us)
        if len(ids) != 16 * n or len(due_us) != n or len(shards) != n:
            raise ValueError("add_many: ids must hold 16 bytes per row and columns one int")
        handles, dues = array("q"), array("q")
        for i in range(n):
            shard = shards[i]
            if allowed is not None and (shard >= len(allowed) or not allowed[shard]):
                continue
            task_id = int.from_bytes(ids[16 * i : 16 * i + 16], "big")
            h = self.add(task_id, scheduled_us[i], due_us[i], group, shard)
            if h >= 0:
                handles.append(h)
                dues.append(max(due_us[i] // 1000, 0))
        return handles, dues

    def find(self, task_id: int) -> int:
        """The handle of ``task_id``'s row, or -1."""
        return self._ids.get(task_id, -1) if isinstance(task_id, int) else -1

    def get(self, handle: int) -> Row:
        """The row of ``handle``; ``KeyError`` if there is none."""
        return self._rows[handle]

    def due_us(self, handle: int) -> int:
        """The row's due time in µs; ``KeyError`` if there is none."""
        return self._rows[handle][2]

    def pop(self, handle: int) -> Row:
        """Remove and return the row of ``handle``; ``KeyError`` if there is none."""
        row = self._rows.pop(handle)
        del self._ids[row[0]]
        self._free.append(handle)
        return row

    def pop_many(self, handles: Iterable[int]) -> list[Row]:
        """Remove and return the rows of ``handles`` (those that exist), in order."""
        out = []
        for h in handles:
            if h in self._rows:
                out.append(self.pop(h))
        return out

    def discard(self, handle: int) -> bool:
        """Remove the row of ``handle``; whether there was one."""
        if handle not in self._rows:
            return False
        self.pop(handle)
        return True

    def in_shards(self, shards: Iterable[int]) -> array[int]:
        """Handles of the rows whose shard is in ``shards``."""
        wanted = set(shards)
        return array("q", [h for h, r in self._rows.items() if r[4] in wanted])

    def clear(self) -> None:
        """Drop every row (handles start again at 0)."""
        self._rows.clear()
        self._ids.clear()
        self._free.clear()
        self._next = 0

    def memory_bytes(self) -> int:
        """A rough figure for the pure-Python version (the C one is exact)."""
        return len(self._rows) * 200
