# cython: language_level=3
"""Compact task rows by handle and by 128-bit id, in C (Cython).

The twin of ``_table_py`` (same API and semantics; its docstring says what a row is).
Rows live in one array of 40-byte structs (``realloc`` by 1.25x, freed rows on a free
list, so handles are small and reused); ids are found through an open-addressing index
of int32 handles (linear probing, backward-shift deletion, no tombstones) that reads
the id from the row, as the wheel's key index does. No Python object per row.
"""

cimport cython
from cpython.array cimport array, clone, resize
from libc.stdint cimport int32_t, int64_t, uint64_t
from libc.stdlib cimport free, malloc, realloc
from libc.string cimport memset

from array import array as _pyarray

from ._table_py import MAX_ROWS as _PY_MAX_ROWS
from ._table_py import check_row


cdef extern from "Python.h":
    unsigned long long PyLong_AsUnsignedLongLongMask(object o) except? -1
    bint PyLong_CheckExact(object o)


cdef struct TRow:
    # 40 bytes. A free row has group == -1 and the next free row in ``shard``.
    uint64_t hi
    uint64_t lo
    int64_t sched
    int64_t due
    int32_t group
    int32_t shard


cdef array _template = _pyarray("q")
cdef object _U128_SHIFT = 128
cdef object _U64 = 64

MAX_ROWS = _PY_MAX_ROWS


@cython.final
cdef class TaskTable:
    """Compact task rows by handle and by 128-bit id (C implementation)."""

    cdef TRow* rows
    cdef int64_t cap
    cdef int64_t used
    cdef int64_t free_head
    cdef Py_ssize_t count
    cdef int32_t* index
    cdef uint64_t index_mask
    cdef int index_shift

    def __cinit__(self):
        self.rows = NULL
        self.index = NULL

    def __init__(self):
        self._release()
        self._allocate()

    def __dealloc__(self):
        self._release()

    cdef void _release(self) noexcept:
        free(self.rows)
        free(self.index)
        self.rows = NULL
        self.index = NULL

    cdef int _allocate(self) except -1:
        self.cap = 1024
        self.rows = <TRow*>malloc(self.cap * sizeof(TRow))
        self.index = <int32_t*>malloc(1024 * sizeof(int32_t))
        if self.rows == NULL or self.index == NULL:
            self._release()
            raise MemoryError()
        memset(self.index, 0xFF, 1024 * sizeof(int32_t))
        self.index_mask = 1023
        self.index_shift = 64 - 10
        self.used = 0
        self.free_head = -1
        self.count = 0
        return 0

    # -- the id index -----------------------------------------------------------------

    cdef inline uint64_t _home(self, uint64_t hi, uint64_t lo) noexcept nogil:
        return ((hi ^ lo) * <uint64_t>0x9E3779B97F4A7C15ULL) >> self.index_shift

    cdef inline uint64_t _lookup(self, uint64_t hi, uint64_t lo) noexcept nogil:
        """Index position holding the id's row, or the empty position where it would go."""
        cdef uint64_t i = self._home(hi, lo)
        cdef int32_t e
        while True:
            e = self.index[i]
            if e < 0 or (self.rows[e].lo == lo and self.rows[e].hi == hi):
                return i
            i = (i + 1) & self.index_mask

    cdef void _delete_at(self, uint64_t i) noexcept nogil:
        """Empty index position ``i``, shifting later cluster members back."""
        cdef uint64_t j = i
        cdef uint64_t home
        cdef int32_t e
        while True:
            j = (j + 1) & self.index_mask
            e = self.index[j]
            if e < 0:
                break
            home = self._home(self.rows[e].hi, self.rows[e].lo)
            # An entry whose home lies cyclically in (i, j] must not move before its home.
            if ((j - home) & self.index_mask) < ((j - i) & self.index_mask):
                continue
            self.index[i] = e
            i = j
        self.index[i] = -1

    cdef int _grow_index(self) except -1:
        cdef uint64_t size = (self.index_mask + 1) * 2
        cdef int32_t* index = <int32_t*>malloc(size * sizeof(int32_t))
        cdef uint64_t j
        cdef int64_t n
        if index == NULL:
            raise MemoryError()
        memset(index, 0xFF, size * sizeof(int32_t))
        free(self.index)
        self.index = index
        self.index_mask = size - 1
        self.index_shift -= 1
        for n in range(self.used):
            if self.rows[n].group < 0:
                continue
            j = self._home(self.rows[n].hi, self.rows[n].lo)
            while index[j] >= 0:
                j = (j + 1) & self.index_mask
            index[j] = <int32_t>n
        return 0

    # -- rows -------------------------------------------------------------------------

    cdef int64_t _alloc(self) except -1:
        cdef int64_t n = self.free_head
        cdef int64_t cap
        cdef TRow* rows
        if n >= 0:
            self.free_head = self.rows[n].shard
            return n
        if self.used == self.cap:
            cap = self.cap + (self.cap >> 2)
            if cap > MAX_ROWS:
                cap = MAX_ROWS
            if cap <= self.cap:
                raise MemoryError(f"task table is full ({MAX_ROWS} rows)")
            rows = <TRow*>realloc(self.rows, cap * sizeof(TRow))
            if rows == NULL:
                raise MemoryError()
            self.rows = rows
            self.cap = cap
        n = self.used
        self.used += 1
        return n

    cdef inline int64_t _valid(self, object handle) except -2:
        cdef long long h
        if not PyLong_CheckExact(handle):
            if isinstance(handle, bool) or not isinstance(handle, int):
                raise TypeError(f"handle must be an int, not {type(handle).__name__}")
        if handle < 0 or handle >= self.used:
            return -1
        h = handle
        if self.rows[h].group < 0:
            return -1
        return h

    cdef void _remove(self, int64_t h) noexcept nogil:
        self._delete_at(self._lookup(self.rows[h].hi, self.rows[h].lo))
        self.rows[h].group = -1
        self.rows[h].shard = <int32_t>self.free_head
        self.free_head = h
        self.count -= 1

    cdef object _row(self, int64_t h):
        cdef TRow* r = &self.rows[h]
        return (
            ((<object>r.hi) << _U64) | <object>r.lo, r.sched, r.due, r.group, r.shard
        )

    # -- public -----------------------------------------------------------------------

    def add(self, task_id, scheduled_us, due_us, group, shard):
        """Store a row; its handle, or -1 (and nothing stored) if ``task_id`` is here."""
        cdef uint64_t hi, lo, pos
        cdef int64_t n
        if not (
            PyLong_CheckExact(task_id) and PyLong_CheckExact(scheduled_us)
            and PyLong_CheckExact(due_us) and PyLong_CheckExact(group)
            and PyLong_CheckExact(shard)
            and 0 <= task_id and not (task_id >> _U128_SHIFT)
            and 0 <= group <= 0x7FFFFFFF and 0 <= shard <= 0x7FFFFFFF
        ):
            check_row(task_id, scheduled_us, due_us, group, shard)
        cdef int64_t sched, due
        try:
            sched = scheduled_us
            due = due_us
        except OverflowError:
            check_row(task_id, scheduled_us, due_us, group, shard)
            raise
        lo = PyLong_AsUnsignedLongLongMask(task_id)
        hi = PyLong_AsUnsignedLongLongMask(task_id >> _U64)
        if (<uint64_t>self.count + 1) * 10 > (self.index_mask + 1) * 7:
            self._grow_index()
        pos = self._lookup(hi, lo)
        if self.index[pos] >= 0:
            return -1
        n = self._alloc()
        self.index[pos] = <int32_t>n
        self.rows[n].hi = hi
        self.rows[n].lo = lo
        self.rows[n].sched = sched
        self.rows[n].due = due
        self.rows[n].group = <int32_t>group
        self.rows[n].shard = <int32_t>shard
        self.count += 1
        return n

    def add_many(self, ids, scheduled_us, due_us, group, shards, allowed=None):
        """Store many rows of one group: ``ids`` holds 16 big-endian bytes per row (a
        UUID's ``bytes``), the other columns one int64 per row. Rows whose id is here
        already, and with ``allowed``, rows whose shard ``s`` has no nonzero
        ``allowed[s]``, are skipped. Returns the new rows' handles and their due times
        in ms (``due_us // 1000``, at least 0): what the wheel's ``add_many`` takes."""
        cdef const unsigned char[:] iv = ids
        cdef const int64_t[:] sv = scheduled_us
        cdef const int64_t[:] dv = due_us
        cdef const int64_t[:] hv = shards
        cdef const unsigned char[:] av
        cdef Py_ssize_t n = sv.shape[0]
        cdef Py_ssize_t i, k, done = 0
        cdef Py_ssize_t nallowed = -1
        cdef int64_t shard, due, h
        cdef uint64_t hi, lo, pos
        cdef int32_t g
        cdef array handles, dues
        if iv.shape[0] != 16 * n or dv.shape[0] != n or hv.shape[0] != n:
            raise ValueError("add_many: ids must hold 16 bytes per row and columns one int")
        if isinstance(group, bool) or not isinstance(group, int) or not 0 <= group <= 0x7FFFFFFF:
            check_row(0, 0, 0, group, 0)
        g = group
        if allowed is not None:
            av = allowed
            nallowed = av.shape[0]
        for i in range(n):
            if hv[i] < 0 or hv[i] > 0x7FFFFFFF:
                raise ValueError(f"shard must be in [0, 2147483647], got {hv[i]}")
        handles = clone(_template, n, False)
        dues = clone(_template, n, False)
        while (<uint64_t>(self.count + n)) * 10 > (self.index_mask + 1) * 7:
            self._grow_index()
        for i in range(n):
            shard = hv[i]
            if nallowed >= 0 and (shard >= nallowed or av[shard] == 0):
                continue
            hi = 0
            lo = 0
            for k in range(8):
                hi = (hi << 8) | iv[16 * i + k]
                lo = (lo << 8) | iv[16 * i + 8 + k]
            pos = self._lookup(hi, lo)
            if self.index[pos] >= 0:
                continue
            h = self._alloc()
            self.index[pos] = <int32_t>h
            self.rows[h].hi = hi
            self.rows[h].lo = lo
            self.rows[h].sched = sv[i]
            self.rows[h].due = dv[i]
            self.rows[h].group = g
            self.rows[h].shard = <int32_t>shard
            self.count += 1
            due = dv[i] // 1000 if dv[i] > 0 else 0
            handles.data.as_longlongs[done] = h
            dues.data.as_longlongs[done] = due
            done += 1
        resize(handles, done)
        resize(dues, done)
        return handles, dues

    def find(self, task_id):
        """The handle of ``task_id``'s row, or -1."""
        cdef uint64_t hi, lo
        cdef int32_t e
        if not PyLong_CheckExact(task_id) or task_id < 0 or (task_id >> _U128_SHIFT):
            return -1
        lo = PyLong_AsUnsignedLongLongMask(task_id)
        hi = PyLong_AsUnsignedLongLongMask(task_id >> _U64)
        e = self.index[self._lookup(hi, lo)]
        return e

    def __contains__(self, task_id):
        return self.find(task_id) >= 0

    def get(self, handle):
        """The row of ``handle``; ``KeyError`` if there is none."""
        cdef int64_t h = self._valid(handle)
        if h < 0:
            raise KeyError(handle)
        return self._row(h)

    def due_us(self, handle):
        """The row's due time in µs; ``KeyError`` if there is none."""
        cdef int64_t h = self._valid(handle)
        if h < 0:
            raise KeyError(handle)
        return self.rows[h].due

    def pop(self, handle):
        """Remove and return the row of ``handle``; ``KeyError`` if there is none."""
        cdef int64_t h = self._valid(handle)
        if h < 0:
            raise KeyError(handle)
        row = self._row(h)
        self._remove(h)
        return row

    def pop_many(self, handles):
        """Remove and return the rows of ``handles`` (those that exist), in order."""
        out = []
        cdef int64_t h
        for handle in handles:
            h = self._valid(handle)
            if h >= 0:
                out.append(self._row(h))
                self._remove(h)
        return out

    def discard(self, handle):
        """Remove the row of ``handle``; whether there was one."""
        cdef int64_t h = self._valid(handle)
        if h < 0:
            return False
        self._remove(h)
        return True

    def in_shards(self, shards):
        """Handles of the rows whose shard is in ``shards``."""
        wanted = set(shards)
        cdef int64_t n
        cdef array out = clone(_template, 0, False)
        for n in range(self.used):
            if self.rows[n].group >= 0 and self.rows[n].shard in wanted:
                out.append(n)
        return out

    def clear(self):
        """Drop every row (handles start again at 0)."""
        self._release()
        self._allocate()

    def __len__(self):
        return self.count

    def memory_bytes(self):
        """Bytes of C memory held: the row array and the id index."""
        return self.cap * sizeof(TRow) + (self.index_mask + 1) * sizeof(int32_t)
