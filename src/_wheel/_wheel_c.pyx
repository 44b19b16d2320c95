# cython: language_level=3
"""Hierarchical timing wheel of 64-bit integer keys, in C (Cython).

The twin of ``_wheel_py`` (same API, same semantics, same placement rule); the module
docstring there explains the placement. Everything on the hot path is C: nodes live in
one array pool (32 bytes each), keys are found through an open-addressing hash table of
packed int32 entries (linear probing, backward-shift deletion, no tombstones), each slot
is an unordered array of pool indices with O(1) swap-removal (a firing slot is sorted by
``(due_ms, seq)`` unless already in order), every level has an occupancy bitmap so
``advance()`` jumps over empty slots, and timers beyond the levels wait in a binary
min-heap ordered by ``(due_ms, seq)``. See ``docs/wheel.md``.
"""

cimport cython
from cpython.array cimport array, clone
from libc.stdint cimport int32_t, int64_t, uint64_t
from libc.stdlib cimport calloc, free, malloc, qsort, realloc
from libc.string cimport memcpy, memset

from array import array as _pyarray
from operator import index as _index

from ._wheel_py import MAX_DUE_MS as _PY_MAX_DUE_MS
from ._wheel_py import check_config


cdef extern from "Python.h":
    # Declared without an exception spec on purpose: the callers check PyErr_Occurred
    # and turn OverflowError into ValueError.
    long long PyLong_AsLongLong(object o)
    bint PyLong_CheckExact(object o)
    void* PyErr_Occurred()
    void PyErr_Clear()

cdef extern from *:
    int __builtin_clzll(unsigned long long x) nogil
    int __builtin_ctzll(unsigned long long x) nogil
    void __builtin_prefetch(const void* addr) nogil

# A key-index entry: node index in the low bits, probe distance above (see _lookup).
cdef enum:
    _IDX_BITS = 26
    _IDX_MASK = (1 << 26) - 1
    _DIST_SAT = 31

cdef int64_t MAX_DUE = _PY_MAX_DUE_MS
cdef array _template = _pyarray("q")
cdef Node* _sort_pool = NULL

MAX_DUE_MS = _PY_MAX_DUE_MS


# -- argument conversion ---------------------------------------------------------------

cdef int64_t _exact(object o, str what) except? -1:
    cdef long long v = PyLong_AsLongLong(o)
    if v == -1 and PyErr_Occurred() != NULL:
        PyErr_Clear()
        raise ValueError(f"{what} {o} is outside the signed 64-bit range")
    return v


cdef int64_t _slow_int(object o, str what) except? -1:
    if isinstance(o, bool):
        raise TypeError(f"{what} must be an int, not bool")
    try:
        v = _index(o)
    except TypeError:
        raise TypeError(f"{what} must be an int, not {type(o).__name__}") from None
    return _exact(v, what)


cdef inline int64_t _as_key(object o) except? -1:
    if PyLong_CheckExact(o):
        return _exact(o, "key")
    return _slow_int(o, "key")


cdef int64_t _as_ms(object o, str what) except? -1:
    cdef int64_t v
    if PyLong_CheckExact(o):
        v = _exact(o, what)
    else:
        v = _slow_int(o, what)
    if v < 0 or v > MAX_DUE:
        raise ValueError(f"{what} must be in [0, {MAX_DUE}], got {v}")
    return v


cdef const int64_t[:] _as_buffer(object obj, str what):
    cdef const int64_t[:] view
    try:
        view = obj
    except (TypeError, ValueError, BufferError) as exc:
        raise TypeError(
            f"{what} must be a 1-D buffer of signed 64-bit ints (array('q'), memoryview), "
            f"not {type(obj).__name__} ({exc})"
        ) from None
    return view


cdef int _cmp_due_seq(const void* a, const void* b) noexcept nogil:
    cdef Node* na = &_sort_pool[(<const int32_t*>a)[0]]
    cdef Node* nb = &_sort_pool[(<const int32_t*>b)[0]]
    if na.due != nb.due:
        return -1 if na.due < nb.due else 1
    if na.seq != nb.seq:
        return -1 if na.seq < nb.seq else 1
    return 0


@cython.final
cdef class TimingWheel:
    """Hierarchical timing wheel of integer keys (C implementation).

    See the docstring of :mod:`scheduler.wheel` for the full contract.
    """

    cdef Node* pool
    cdef int32_t pool_cap
    cdef int32_t pool_used
    cdef int32_t free_head
    cdef int32_t nsent
    cdef int32_t nwheel
    cdef int32_t ready

    cdef Vec* vecs
    cdef int32_t nvecs
    cdef int64_t vec_bytes

    cdef int32_t* table
    cdef int64_t table_mask
    cdef int table_shift

    cdef uint64_t* bitmaps
    cdef int words

    cdef int32_t* heap
    cdef int32_t heap_len
    cdef int32_t heap_cap

    cdef int32_t* scratch
    cdef Py_ssize_t scratch_cap

    cdef int64_t tick
    cdef int bits
    cdef int nlevels
    cdef int64_t mask
    cdef int total_bits
    cdef int64_t cur
    cdef int64_t seq
    cdef Py_ssize_t count
    cdef int64_t next_due
    cdef bint next_due_valid

    def __cinit__(self):
        self.pool = NULL
        self.table = NULL
        self.bitmaps = NULL
        self.heap = NULL
        self.scratch = NULL
        self.vecs = NULL
        self.nvecs = 0

    def __init__(self, *, tick_ms=1, slots_per_level=256, levels=None, start_ms=0):
        tick, bits, nlevels = check_config(tick_ms, slots_per_level, levels)
        cdef int64_t start = _as_ms(start_ms, "start_ms")
        self.tick = tick
        self.bits = bits
        self.nlevels = nlevels
        self.mask = (<int64_t>1 << self.bits) - 1
        self.total_bits = self.bits * self.nlevels
        self.cur = start // self.tick
        self.seq = 0
        self.words = max(1, (1 << self.bits) >> 6)
        self.nwheel = self.nlevels << self.bits
        self.ready = self.nwheel
        self.nsent = self.nwheel + 1
        self._release()
        self._allocate()

    def __dealloc__(self):
        self._release()

    cdef void _release(self) noexcept:
        cdef int32_t i
        if self.vecs != NULL:
            for i in range(self.nvecs):
                free(self.vecs[i].items)
            free(self.vecs)
        self.vecs = NULL
        self.nvecs = 0
        free(self.pool)
        free(self.table)
        free(self.bitmaps)
        free(self.heap)
        free(self.scratch)
        self.pool = NULL
        self.table = NULL
        self.bitmaps = NULL
        self.heap = NULL
        self.scratch = NULL

    cdef int _allocate(self) except -1:
        cdef int32_t i
        cdef int64_t table_size = 1024
        self.pool_cap = 1024
        self.pool = <Node*>malloc(self.pool_cap * sizeof(Node))
        self.vecs = <Vec*>calloc(self.nsent, sizeof(Vec))
        self.nvecs = self.nsent
        self.vec_bytes = 0
        self.table = <int32_t*>malloc(table_size * sizeof(int32_t))
        self.bitmaps = <uint64_t*>malloc(self.nlevels * self.words * sizeof(uint64_t))
        self.heap_cap = 16
        self.heap = <int32_t*>malloc(self.heap_cap * sizeof(int32_t))
        self.scratch_cap = 256
        self.scratch = <int32_t*>malloc(self.scratch_cap * sizeof(int32_t))
        if (self.pool == NULL or self.table == NULL or self.bitmaps == NULL
                or self.heap == NULL or self.scratch == NULL or self.vecs == NULL):
            self._release()
            raise MemoryError()
        self.pool_used = 0
        self.free_head = -1
        memset(self.table, 0xFF, table_size * sizeof(int32_t))
        self.table_mask = table_size - 1
        self.table_shift = 64 - 10
        memset(self.bitmaps, 0, self.nlevels * self.words * sizeof(uint64_t))
        self.heap_len = 0
        self.count = 0
        self.next_due_valid = False
        return 0

    # -- small helpers ----------------------------------------------------------------

    cdef inline int64_t _tick_of(self, int64_t due) noexcept nogil:
        if self.tick == 1:
            return due
        return (due + self.tick - 1) // self.tick

    cdef inline int64_t _home(self, int64_t key) noexcept nogil:
        return <int64_t>((<uint64_t>key * <uint64_t>0x9E3779B97F4A7C15ULL) >> self.table_shift)

    cdef inline int64_t _lookup(self, int64_t key) noexcept nogil:
        """Table position holding ``key``'s node, or the empty position where it would go.

        An entry packs the node index (low 26 bits) with its probe distance (5 bits,
        31 = "31 or more"), so only entries that share the key's home slot cost a read of
        their node.
        """
        cdef int64_t i = self._home(key)
        cdef int32_t e
        cdef int32_t d = 0
        while True:
            e = self.table[i]
            if e < 0:
                return i
            if (e >> _IDX_BITS) == d and self.pool[e & _IDX_MASK].key == key:
                return i
            i = (i + 1) & self.table_mask
            if d < _DIST_SAT:
                d += 1

    cdef inline int32_t _entry(self, int32_t n, int64_t pos, int64_t home) noexcept nogil:
        cdef int64_t dist = (pos - home) & self.table_mask
        if dist > _DIST_SAT:
            dist = _DIST_SAT
        return <int32_t>((dist << _IDX_BITS) | n)

    cdef inline int64_t _dist(self, int32_t e, int64_t pos) noexcept nogil:
        cdef int64_t dist = e >> _IDX_BITS
        if dist == _DIST_SAT:
            dist = (pos - self._home(self.pool[e & _IDX_MASK].key)) & self.table_mask
        return dist

    cdef void _delete_at(self, int64_t i) noexcept nogil:
        """Empty table position ``i``, shifting later cluster members back (no tombstones)."""
        cdef int64_t j = i
        cdef int64_t dist, gap
        cdef int32_t e
        while True:
            j = (j + 1) & self.table_mask
            e = self.table[j]
            if e < 0:
                break
            dist = self._dist(e, j)
            gap = (j - i) & self.table_mask
            # An entry whose home lies cyclically in (i, j] must not move before its home.
            if dist < gap:
                continue
            self.table[i] = self._entry(e & _IDX_MASK, i, (j - dist) & self.table_mask)
            i = j
        self.table[i] = -1

    cdef int _grow_table(self) except -1:
        cdef int64_t size = (self.table_mask + 1) * 2
        cdef int32_t* table = <int32_t*>malloc(size * sizeof(int32_t))
        cdef int64_t j, home
        cdef int32_t n
        if table == NULL:
            raise MemoryError()
        memset(table, 0xFF, size * sizeof(int32_t))
        free(self.table)
        self.table = table
        self.table_mask = size - 1
        self.table_shift -= 1
        # Walk the pool, not the old table: sequential reads instead of one miss per key.
        for n in range(self.pool_used):
            if self.pool[n].slot == -1:
                continue
            home = self._home(self.pool[n].key)
            j = home
            while table[j] >= 0:
                j = (j + 1) & self.table_mask
            table[j] = self._entry(n, j, home)
        return 0

    cdef int32_t _alloc_node(self) except -1:
        cdef int32_t n = self.free_head
        cdef int64_t cap
        cdef Node* pool
        if n >= 0:
            self.free_head = self.pool[n].pos
            return n
        if self.pool_used == self.pool_cap:
            # x1.25 keeps the slack (and so the bytes per timer) small; realloc of a big
            # block is an mremap, so growing often costs little.
            cap = <int64_t>self.pool_cap + (self.pool_cap >> 2)
            if cap > _IDX_MASK + 1:
                cap = _IDX_MASK + 1
            if cap <= self.pool_cap:
                raise MemoryError(f"timing wheel is full ({_IDX_MASK + 1} timers)")
            pool = <Node*>realloc(self.pool, cap * sizeof(Node))
            if pool == NULL:
                raise MemoryError()
            self.pool = pool
            self.pool_cap = <int32_t>cap
        n = self.pool_used
        self.pool_used += 1
        return n

    cdef inline void _free_node(self, int32_t n) noexcept nogil:
        self.pool[n].slot = -1
        self.pool[n].pos = self.free_head
        self.free_head = n

    # -- slots and bitmaps ------------------------------------------------------------

    cdef inline void _set_bit(self, int32_t s) noexcept nogil:
        cdef int64_t slot = s & self.mask
        self.bitmaps[(s >> self.bits) * self.words + (slot >> 6)] |= (<uint64_t>1) << (slot & 63)

    cdef inline void _clear_bit(self, int32_t s) noexcept nogil:
        cdef int64_t slot = s & self.mask
        self.bitmaps[(s >> self.bits) * self.words + (slot >> 6)] &= ~((<uint64_t>1) << (slot & 63))

    cdef inline int _push(self, int32_t s, int32_t n) except -1:
        cdef Vec* v = &self.vecs[s]
        cdef int32_t cap
        cdef int32_t* items
        if v.len == v.cap:
            cap = 8 if v.cap == 0 else v.cap + (v.cap >> 1)
            items = <int32_t*>realloc(v.items, <size_t>cap * sizeof(int32_t))
            if items == NULL:
                raise MemoryError()
            self.vec_bytes += <int64_t>(cap - v.cap) * sizeof(int32_t)
            v.items = items
            v.cap = cap
        v.items[v.len] = n
        self.pool[n].slot = s
        self.pool[n].pos = v.len
        v.len += 1
        if s < self.nwheel:
            self._set_bit(s)
        return 0

    cdef inline void _unslot(self, int32_t n) noexcept nogil:
        """Remove ``n`` from its slot array in O(1): the last item takes its place."""
        cdef int32_t s = self.pool[n].slot
        cdef Vec* v = &self.vecs[s]
        cdef int32_t last
        v.len -= 1
        last = v.items[v.len]
        if last != n:
            v.items[self.pool[n].pos] = last
            self.pool[last].pos = self.pool[n].pos
        if v.len == 0 and s < self.nwheel:
            self._clear_bit(s)

    cdef inline int32_t* _detach(self, int32_t s, int32_t* length) noexcept nogil:
        """Empty slot ``s``; return its items, which the caller hands to ``_reattach``."""
        cdef Vec* v = &self.vecs[s]
        cdef int32_t* items = v.items
        length[0] = v.len
        v.items = NULL
        v.len = 0
        v.cap = 0
        if s < self.nwheel:
            self._clear_bit(s)
        return items

    cdef inline void _reattach(self, int32_t s, int32_t* items, int32_t cap) noexcept nogil:
        """Give a drained buffer back to slot ``s`` if it is still empty and small."""
        cdef Vec* v = &self.vecs[s]
        if v.items == NULL and cap <= 256:
            v.items = items
            v.cap = cap
        else:
            # A burst's buffer goes back to the allocator rather than sitting idle.
            self.vec_bytes -= <int64_t>cap * sizeof(int32_t)
            free(items)

    cdef inline int64_t _next_slot(self, int level, int64_t start) noexcept nogil:
        """First occupied slot >= ``start`` at ``level``, or -1."""
        cdef uint64_t* base
        cdef uint64_t word
        cdef int64_t w
        if start > self.mask:
            return -1
        base = self.bitmaps + level * self.words
        w = start >> 6
        word = base[w] & (~(<uint64_t>0) << (start & 63))
        while True:
            if word:
                return (w << 6) + __builtin_ctzll(word)
            w += 1
            if w >= self.words:
                return -1
            word = base[w]

    # -- overflow heap ----------------------------------------------------------------

    cdef inline bint _less(self, int32_t a, int32_t b) noexcept nogil:
        cdef Node* pool = self.pool
        if pool[a].due != pool[b].due:
            return pool[a].due < pool[b].due
        return pool[a].seq < pool[b].seq

    cdef void _sift_up(self, int32_t pos) noexcept nogil:
        cdef int32_t n = self.heap[pos]
        cdef int32_t parent, p
        while pos > 0:
            parent = (pos - 1) >> 1
            p = self.heap[parent]
            if not self._less(n, p):
                break
            self.heap[pos] = p
            self.pool[p].pos = pos
            pos = parent
        self.heap[pos] = n
        self.pool[n].slot = -2
        self.pool[n].pos = pos

    cdef void _sift_down(self, int32_t pos) noexcept nogil:
        cdef int32_t n = self.heap[pos]
        cdef int32_t child, c
        while True:
            child = 2 * pos + 1
            if child >= self.heap_len:
                break
            if child + 1 < self.heap_len and self._less(self.heap[child + 1], self.heap[child]):
                child += 1
            c = self.heap[child]
            if not self._less(c, n):
                break
            self.heap[pos] = c
            self.pool[c].pos = pos
            pos = child
        self.heap[pos] = n
        self.pool[n].slot = -2
        self.pool[n].pos = pos

    cdef int _heap_push(self, int32_t n) except -1:
        cdef int32_t* heap
        cdef int64_t cap
        if self.heap_len == self.heap_cap:
            cap = <int64_t>self.heap_cap * 2
            heap = <int32_t*>realloc(self.heap, cap * sizeof(int32_t))
            if heap == NULL:
                raise MemoryError()
            self.heap = heap
            self.heap_cap = <int32_t>cap
        self.heap[self.heap_len] = n
        self.heap_len += 1
        self._sift_up(self.heap_len - 1)
        return 0

    cdef void _heap_remove(self, int32_t pos) noexcept nogil:
        cdef int32_t last
        self.heap_len -= 1
        if pos == self.heap_len:
            return
        last = self.heap[self.heap_len]
        self.heap[pos] = last
        self._sift_down(pos)
        if self.heap[pos] == last:
            self._sift_up(pos)

    # -- placement --------------------------------------------------------------------

    cdef inline int _place(self, int32_t n, int64_t tk) except -1:
        """Put node ``n`` (due at tick ``tk >= cur``) in its slot or the overflow heap."""
        cdef uint64_t x = <uint64_t>(tk ^ self.cur)
        cdef int level = 0
        if x:
            level = (63 - __builtin_clzll(x)) // self.bits
        if level >= self.nlevels:
            return self._heap_push(n)
        return self._push(
            <int32_t>((level << self.bits) | ((tk >> (self.bits * level)) & self.mask)), n
        )

    cdef inline void _remove(self, int32_t n) noexcept nogil:
        cdef int32_t slot = self.pool[n].slot
        if slot >= 0:
            self._unslot(n)
        elif slot == -2:
            self._heap_remove(self.pool[n].pos)

    cdef int _insert(self, int64_t key, int64_t due) except -1:
        """Schedule a new key; return 1 (and change nothing) when it is already there."""
        cdef int64_t pos, tk
        cdef int32_t n
        if (self.count + 1) * 10 > (self.table_mask + 1) * 7:
            self._grow_table()
        pos = self._lookup(key)
        if self.table[pos] >= 0:
            return 1
        n = self._alloc_node()
        self.table[pos] = self._entry(n, pos, self._home(key))
        self.pool[n].key = key
        self.pool[n].due = due
        self.pool[n].seq = self.seq
        self.seq += 1
        self.count += 1
        tk = self._tick_of(due)
        if tk <= self.cur:
            self._push(self.ready, n)
        else:
            self._place(n, tk)
        if self.count == 1:
            self.next_due = due
            self.next_due_valid = True
        elif self.next_due_valid and due < self.next_due:
            self.next_due = due
        return 0

    cdef bint _cancel(self, int64_t key) noexcept nogil:
        cdef int64_t pos = self._lookup(key)
        cdef int32_t n = self.table[pos]
        if n < 0:
            return False
        n &= _IDX_MASK
        self._remove(n)
        self._delete_at(pos)
        self._free_node(n)
        self.count -= 1
        if self.pool[n].due == self.next_due:
            self.next_due_valid = False
        return True

    # -- time -------------------------------------------------------------------------

    cdef int _reserve_scratch(self, Py_ssize_t need) except -1:
        cdef Py_ssize_t cap = self.scratch_cap
        cdef int32_t* scratch
        if need <= cap:
            return 0
        while cap < need:
            cap *= 2
        scratch = <int32_t*>realloc(self.scratch, cap * sizeof(int32_t))
        if scratch == NULL:
            raise MemoryError()
        self.scratch = scratch
        self.scratch_cap = cap
        return 0

    cdef Py_ssize_t _collect(self, int32_t s, Py_ssize_t length) except -1:
        """Append slot ``s`` to the scratch buffer in (due, seq) order; return the new length."""
        global _sort_pool
        cdef int32_t count = 0
        cdef int32_t cap = self.vecs[s].cap
        cdef int32_t* items = self._detach(s, &count)
        cdef Py_ssize_t start = length
        cdef Py_ssize_t i
        cdef bint ordered = True
        if count == 0:
            self._reattach(s, items, cap)
            return length
        self._reserve_scratch(length + count)
        memcpy(&self.scratch[length], items, count * sizeof(int32_t))
        self._reattach(s, items, cap)
        length += count
        _sort_pool = self.pool
        for i in range(start, length):
            if i + 8 < length:
                __builtin_prefetch(&self.pool[self.scratch[i + 8]])
            if i > start and _cmp_due_seq(&self.scratch[i - 1], &self.scratch[i]) > 0:
                ordered = False
        # Cancellation moves items inside a slot, so a firing slot is sorted unless it
        # happens to be in order already (the common case).
        if not ordered:
            qsort(&self.scratch[start], length - start, sizeof(int32_t), _cmp_due_seq)
        return length

    cdef int64_t _next_event_tick(self, int* where) noexcept nogil:
        """Earliest tick at which the wheel has work (a level-0 slot or a cascade), or -1.

        ``where`` receives the level of that slot (``nlevels`` for the overflow heap).
        """
        cdef int level, above
        cdef int64_t slot, digit
        for level in range(self.nlevels):
            digit = (self.cur >> (self.bits * level)) & self.mask
            slot = self._next_slot(level, digit + 1)
            if slot >= 0:
                where[0] = level
                above = self.bits * (level + 1)
                return ((self.cur >> above) << above) | (slot << (self.bits * level))
        where[0] = self.nlevels
        if self.heap_len:
            return self._tick_of(self.pool[self.heap[0]].due)
        return -1

    cdef int _move_to(self, int64_t tk) except -1:
        """Set the current tick; nothing may be due strictly between the old one and ``tk``."""
        cdef uint64_t x = <uint64_t>(self.cur ^ tk)
        cdef int level
        cdef int32_t s, n, i, cap
        cdef int32_t count = 0
        cdef int32_t* items
        cdef int64_t top, ntk
        self.cur = tk
        if not x:
            return 0
        level = (63 - __builtin_clzll(x)) // self.bits
        if level >= self.nlevels:
            # A new top-level block: the wheel is empty, pull this block's timers in.
            top = tk >> self.total_bits
            while self.heap_len:
                n = self.heap[0]
                ntk = self._tick_of(self.pool[n].due)
                if (ntk >> self.total_bits) != top:
                    break
                self._heap_remove(0)
                self._place(n, ntk)
            return 0
        s = <int32_t>((level << self.bits) | ((tk >> (self.bits * level)) & self.mask))
        cap = self.vecs[s].cap
        items = self._detach(s, &count)
        # Cascade: every node lands strictly below ``level``, so never back in ``s``.
        for i in range(count):
            if i + 8 < count:
                __builtin_prefetch(&self.pool[items[i + 8]])
            n = items[i]
            self._place(n, self._tick_of(self.pool[n].due))
        self._reattach(s, items, cap)
        return 0

    def advance(self, now_ms):
        """Move time to ``now_ms``; return the expired keys as ``array('q')``.

        Order is ``(due_ms, insertion sequence)``. Timers added in the past fire here
        whatever ``now_ms`` is; time never moves backwards (an earlier ``now_ms`` only
        fires those).
        """
        cdef int64_t now = _as_ms(now_ms, "now_ms") // self.tick
        cdef Py_ssize_t length = 0
        cdef Py_ssize_t i
        cdef int64_t t, end
        cdef int32_t s, n
        cdef int level = 0
        cdef array out
        cdef long long* data
        length = self._collect(self.ready, length)
        while True:
            t = self._next_event_tick(&level)
            if t < 0 or t > now:
                break
            if 0 < level < self.nlevels:
                end = t + ((<int64_t>1 << (self.bits * level)) - 1)
                if end <= now:
                    # The whole slot is due: fire it sorted instead of cascading it down.
                    s = <int32_t>((level << self.bits) | ((t >> (self.bits * level)) & self.mask))
                    length = self._collect(s, length)
                    self._move_to(end)
                    continue
            self._move_to(t)
            s = <int32_t>(t & self.mask)
            if self.vecs[s].len:
                length = self._collect(s, length)
        if now > self.cur:
            self._move_to(now)
        out = clone(_template, length, False)
        if length == 0:
            return out
        data = out.data.as_longlongs
        for i in range(length):
            if i + 8 < length:
                __builtin_prefetch(&self.table[self._home(self.pool[self.scratch[i + 8]].key)])
            n = self.scratch[i]
            data[i] = self.pool[n].key
            self._delete_at(self._lookup(self.pool[n].key))
            self._free_node(n)
        self.count -= length
        self.next_due_valid = False
        if self.scratch_cap > 65536:
            # Give back the buffer a big burst needed.
            free(self.scratch)
            self.scratch_cap = 256
            self.scratch = <int32_t*>malloc(self.scratch_cap * sizeof(int32_t))
            if self.scratch == NULL:
                self.scratch_cap = 0
        return out

    cdef int64_t _slot_min(self, int32_t s) noexcept nogil:
        cdef Vec* v = &self.vecs[s]
        cdef int64_t best = self.pool[v.items[0]].due
        cdef int32_t i
        for i in range(1, v.len):
            if self.pool[v.items[i]].due < best:
                best = self.pool[v.items[i]].due
        return best

    def next_due_ms(self):
        """Earliest ``due_ms`` among scheduled timers, or ``None`` when empty."""
        cdef int level
        cdef int64_t slot
        if self.count == 0:
            return None
        if self.next_due_valid:
            return self.next_due
        if self.vecs[self.ready].len:
            self.next_due = self._slot_min(self.ready)
        else:
            for level in range(self.nlevels):
                slot = self._next_slot(level, ((self.cur >> (self.bits * level)) & self.mask) + 1)
                if slot >= 0:
                    self.next_due = self._slot_min(<int32_t>((level << self.bits) | slot))
                    break
            else:
                self.next_due = self.pool[self.heap[0]].due
        self.next_due_valid = True
        return self.next_due

    # -- public mutation --------------------------------------------------------------

    def add(self, key, due_ms):
        """Schedule ``key`` at ``due_ms``; ``ValueError`` if ``key`` is already scheduled."""
        cdef int64_t k = _as_key(key)
        if self._insert(k, _as_ms(due_ms, "due_ms")):
            raise ValueError(f"key {k} is already scheduled (use reschedule() to move it)")

    def add_many(self, keys, dues):
        """Schedule ``keys[i]`` at ``dues[i]`` from two int64 buffers: all or nothing."""
        cdef const int64_t[:] kv = _as_buffer(keys, "keys")
        cdef const int64_t[:] dv = _as_buffer(dues, "dues")
        cdef Py_ssize_t i, j, n = kv.shape[0]
        cdef int64_t due
        if dv.shape[0] != n:
            raise ValueError(f"keys and dues differ in length ({n} != {dv.shape[0]})")
        for i in range(n):
            due = dv[i]
            if due < 0 or due > MAX_DUE:
                raise ValueError(f"due_ms must be in [0, {MAX_DUE}], got {due} at index {i}")
        while (self.count + n) * 10 > (self.table_mask + 1) * 7:
            self._grow_table()
        for i in range(n):
            if self._insert(kv[i], dv[i]):
                for j in range(i):
                    self._cancel(kv[j])
                raise ValueError(
                    f"key {kv[i]} is already scheduled (index {i}; add_many rolled back)"
                ) from None

    def cancel(self, key):
        """Unschedule ``key``; return whether it was scheduled. O(1)."""
        return self._cancel(_as_key(key))

    def cancel_many(self, keys):
        """Cancel every key in an int64 buffer; return how many were scheduled."""
        cdef const int64_t[:] kv = _as_buffer(keys, "keys")
        cdef Py_ssize_t i, done = 0
        for i in range(kv.shape[0]):
            done += self._cancel(kv[i])
        return done

    def reschedule(self, key, due_ms):
        """Move ``key`` to ``due_ms`` (a new insertion for tie order); ``KeyError`` if absent."""
        cdef int64_t k = _as_key(key)
        cdef int64_t due = _as_ms(due_ms, "due_ms")
        cdef int32_t n = self.table[self._lookup(k)]
        cdef int64_t tk
        if n < 0:
            raise KeyError(k)
        n &= _IDX_MASK
        self._remove(n)
        if self.pool[n].due == self.next_due:
            self.next_due_valid = False
        elif self.next_due_valid and due < self.next_due:
            self.next_due = due
        self.pool[n].due = due
        self.pool[n].seq = self.seq
        self.seq += 1
        tk = self._tick_of(due)
        if tk <= self.cur:
            self._push(self.ready, n)
        else:
            self._place(n, tk)

    def clear(self):
        """Drop every timer (the current time is kept)."""
        self._release()
        self._allocate()

    # -- introspection ----------------------------------------------------------------

    def __len__(self):
        return self.count

    def __contains__(self, key):
        cdef int64_t k
        try:
            k = _as_key(key)
        except (TypeError, ValueError):
            return False
        return self.table[self._lookup(k)] >= 0

    def memory_bytes(self):
        """Bytes of C memory held: node pool, key index, slot arrays, bitmaps, heap, scratch."""
        return (
            <Py_ssize_t>self.pool_cap * sizeof(Node)
            + (self.table_mask + 1) * sizeof(int32_t)
            + self.nlevels * self.words * sizeof(uint64_t)
            + <Py_ssize_t>self.heap_cap * sizeof(int32_t)
            + self.scratch_cap * sizeof(int32_t)
            + self.nvecs * sizeof(Vec)
            + self.vec_bytes
        )

    @property
    def tick_ms(self):
        """Length of one tick in milliseconds."""
        return self.tick

    @property
    def slots_per_level(self):
        """Slots in each level."""
        return 1 << self.bits

    @property
    def levels(self):
        """Number of wheel levels (timers beyond them go to the overflow heap)."""
        return self.nlevels

    @property
    def horizon_ms(self):
        """Span the levels cover, in ms (``tick_ms * slots_per_level ** levels``)."""
        return (<object>self.tick) << self.total_bits

    @property
    def now_ms(self):
        """Start of the last processed tick, in ms."""
        return self.cur * self.tick

    def __repr__(self):
        return (
            f"<TimingWheel c tick_ms={self.tick} slots_per_level={1 << self.bits} "
            f"levels={self.nlevels} now_ms={self.now_ms} len={self.count}>"
        )
