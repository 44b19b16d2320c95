# cython: language_level=3
"""The values the native readers make from protobuf's wire format: a UUID from its
canonical text, an aware UTC datetime from a Timestamp, UTF-8 text, and a trace
context (declared in ``_pbread.pxd`` beside the inline primitives; cimported by the
server's ``_stream_c`` and ``_submit_c``, the client's ``_tasks_c`` and the worker's
``_pushed_c``). Each answers None (``read_trace``: False) for what it does not take,
and the caller leaves the message to the general path."""

from cpython.object cimport PyObject_GenericSetAttr
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport int64_t, uint64_t

import uuid

from scheduler._wellknown import _utc_at
from scheduler.limits import MAX_TIMESTAMP_SECONDS, MIN_TIMESTAMP_SECONDS

cdef object _UUID = uuid.UUID
cdef object _UNKNOWN = uuid.SafeUUID.unknown
cdef object _utc = _utc_at
cdef int64_t _MIN_S = MIN_TIMESTAMP_SECONDS
cdef int64_t _MAX_S = MAX_TIMESTAMP_SECONDS
cdef str _S_INT = "int"
cdef str _S_IS_SAFE = "is_safe"
cdef str _S_TRACEPARENT = "traceparent"
cdef str _S_TRACESTATE = "tracestate"
cdef str _EMPTY_TEXT = ""


cdef object read_uuid(const unsigned char* p):
    """A ``uuid.UUID`` from 36 bytes of lowercase 8-4-4-4-12 hex, or None."""
    cdef uint64_t hi = 0
    cdef uint64_t lo = 0
    if not _uuid_parts(p, &hi, &lo):
        return None
    u = _UUID.__new__(_UUID)
    PyObject_GenericSetAttr(u, _S_INT, ((<object>hi) << 64) | (<object>lo))
    PyObject_GenericSetAttr(u, _S_IS_SAFE, _UNKNOWN)
    return u


cdef object read_time(Reader* r, Py_ssize_t stop, bint bounded):
    """The Timestamp from the reader up to ``stop`` as an aware UTC datetime (its
    nanos cut to microseconds, as ``scheduler._wellknown.utc_datetime``), or None
    when malformed, its nanos out of range, or (``bounded``) its time outside the
    range the server accepts (``scheduler.limits``)."""
    cdef uint64_t tag
    cdef int64_t seconds = 0, nanos = 0
    cdef bint has_s = False, has_n = False
    while r.pos < stop:
        tag = _varint(r)
        if r.bad:
            return None
        if tag == 0x08 and not has_s:
            seconds = <int64_t>_varint(r)
            has_s = True
        elif tag == 0x10 and not has_n:
            nanos = <int64_t>_varint(r)  # an int32's varint sign-extends
            has_n = True
        else:
            return None
        if r.bad:
            return None
    if r.pos != stop or not (0 <= nanos < 1_000_000_000):
        return None
    if bounded and not (_MIN_S <= seconds < _MAX_S):
        return None
    try:
        return _utc(seconds, nanos // 1000)
    except (OverflowError, ValueError):  # outside years 1-9999
        return None


cdef object read_text(Reader* r, Py_ssize_t n):
    """The next ``n`` bytes as UTF-8 text (the reader moves past them), or None when
    they are not UTF-8 (the reader stays)."""
    cdef object text
    if n == 0:
        return _EMPTY_TEXT
    try:
        text = PyUnicode_DecodeUTF8(<const char*>(r.buf + r.pos), n, NULL)
    except UnicodeDecodeError:
        return None
    r.pos += n
    return text


cdef object read_trace(Reader* r, Py_ssize_t stop):
    """The TraceContext from the reader up to ``stop`` as the SDKs' dict
    (``{"traceparent", "tracestate"}``; None when its traceparent is empty), or False
    when malformed."""
    cdef uint64_t tag
    cdef Py_ssize_t n
    cdef object parent = _EMPTY_TEXT
    cdef object state = _EMPTY_TEXT
    cdef bint has_p = False, has_s = False
    while r.pos < stop:
        tag = _varint(r)
        if r.bad or not (tag == 0x0A and not has_p or tag == 0x12 and not has_s):
            return False
        n = _length(r)
        if n < 0 or r.pos + n > stop:
            return False
        text = read_text(r, n)
        if text is None:
            return False
        if tag == 0x0A:
            parent = text
            has_p = True
        else:
            state = text
            has_s = True
    if r.pos != stop:
        return False
    if not parent:
        return None
    return {_S_TRACEPARENT: parent, _S_TRACESTATE: state}
