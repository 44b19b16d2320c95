# cython: language_level=3
"""Reading protobuf's wire format from a buffer: what the native readers share (the
server's ``_stream_c`` and ``_submit_c``, the client's ``_tasks_c``, the worker's
``_pushed_c``). The inline primitives here never raise: a malformed varint or a
length past the end sets ``bad``, and the caller gives the message to the general
path. The values made from the bytes (ids, times, text, trace contexts) are read by
``_pbread.pyx``'s functions declared at the end, which answer None (or False) for
anything the general path must judge."""

from libc.stdint cimport int64_t, uint64_t


cdef struct Reader:
    const unsigned char* buf
    Py_ssize_t pos
    Py_ssize_t end
    bint bad


cdef inline uint64_t _varint(Reader* r) noexcept:
    cdef uint64_t result = 0
    cdef int shift = 0
    cdef unsigned char b
    while True:
        if r.pos >= r.end or shift > 63:
            r.bad = True
            return 0
        b = r.buf[r.pos]
        r.pos += 1
        result |= (<uint64_t>(b & 0x7F)) << shift
        if not (b & 0x80):
            return result
        shift += 7


cdef inline Py_ssize_t _length(Reader* r) noexcept:
    """A length-delimited field's length, checked against what is left (-1: bad)."""
    cdef uint64_t n = _varint(r)
    if r.bad or n > <uint64_t>(r.end - r.pos):
        r.bad = True
        return -1
    return <Py_ssize_t>n


cdef inline Py_ssize_t _within(Reader* r, Py_ssize_t stop) noexcept:
    """A length-delimited field's length, checked against ``stop`` (the end of the
    message it is in; -1: bad)."""
    cdef Py_ssize_t n = _length(r)
    if n < 0 or r.pos + n > stop:
        return -1
    return n


cdef inline uint64_t _once(Reader* r, unsigned int* seen, uint64_t max_field) noexcept:
    """The next field's tag; 0 when it is malformed, its number is 0 or over
    ``max_field`` (at most 31), or it came before (``seen``: a bit per number). A
    repeated field is the general path's to read: it keeps the last."""
    cdef uint64_t tag = _varint(r)
    cdef uint64_t number = tag >> 3
    cdef unsigned int bit
    if r.bad or number == 0 or number > max_field:
        return 0
    bit = 1u << <unsigned int>number
    if seen[0] & bit:
        return 0
    seen[0] |= bit
    return tag


cdef inline int _hex(unsigned char c) noexcept:
    if 48 <= c <= 57:
        return c - 48
    if 97 <= c <= 102:
        return c - 87
    return -1


cdef inline bint _uuid_parts(const unsigned char* p, uint64_t* hi, uint64_t* lo) noexcept:
    """The two halves of a UUID written as 36 bytes of lowercase 8-4-4-4-12 hex;
    False for anything else (upper case included: the general path decides it)."""
    cdef uint64_t h = 0
    cdef uint64_t l = 0
    cdef int i, d, n = 0
    for i in range(36):
        if i == 8 or i == 13 or i == 18 or i == 23:
            if p[i] != 45:  # '-'
                return False
            continue
        d = _hex(p[i])
        if d < 0:
            return False
        if n < 16:
            h = (h << 4) | <uint64_t>d
        else:
            l = (l << 4) | <uint64_t>d
        n += 1
    hi[0] = h
    lo[0] = l
    return True


# -- values (_pbread.pyx) -------------------------------------------------------------

cdef object read_uuid(const unsigned char* p)
cdef object read_uuid_bytes(const unsigned char* p)
cdef object read_time(Reader* r, Py_ssize_t stop, bint bounded)
cdef object utc_at(int64_t seconds, int micros)
cdef bint utc_parts(object dt, int64_t* seconds, int* micros) except -1
cdef object read_text(Reader* r, Py_ssize_t n)
cdef object read_trace(Reader* r, Py_ssize_t stop)
