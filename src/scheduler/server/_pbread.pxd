# cython: language_level=3
"""Reading protobuf's wire format from a buffer: the primitives the native readers
(``_stream_c``, ``_submit_c``) share. Every function is inline and never raises: a
malformed varint or a length past the end sets ``bad``, and the caller gives the
message to the general path."""

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
