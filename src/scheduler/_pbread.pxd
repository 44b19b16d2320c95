# cython: language_level=3
"""Reading protobuf's wire format from a buffer: the primitives the native readers
share (the server's ``_stream_c`` and ``_submit_c``, the client's ``_tasks_c``).
Every function is inline and never raises: a malformed varint or a length past the
end sets ``bad``, and the caller gives the message to the general path."""

from libc.stdint cimport uint64_t


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
