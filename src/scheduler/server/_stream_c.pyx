# cython: language_level=3
"""The worker stream's fenced writes read straight from their wire bytes (Cython).

A worker's ``Ack``, ``Heartbeat`` and ``Completions`` messages carry one ``TaskRef``
per task, and a busy stream carries thousands a second. Read through the generated
classes, each ref costs a Python object per field and a pass of the validation in
``scheduler.server._convert``; here the bytes go straight to the engine's items
(``FencedWrite``, ``Completion``), with the same checks.

Only what is plainly valid is read here: a message with anything the fast path does
not take (an unknown or repeated field, a task id not in lowercase canonical form, a
token or a time out of range, a ``Struct`` result, JSON bytes the checker refuses, a
malformed varint) returns None, and the caller decodes it the general way, which
accepts or refuses it with the error that names the field. So the fast path never
decides a refusal: it may only agree with the general path on what it accepts
(``tests/unit/transport/test_stream_wire.py`` checks the two against each other).
"""

cimport cython
from cpython.object cimport PyObject_GenericSetAttr
from libc.stdint cimport int32_t, int64_t, uint64_t

import dataclasses
import uuid

from scheduler._wellknown import _utc_at
from scheduler.jsonbytes import raw as _raw_json
from scheduler.limits import MAX_RESULT_BYTES, MAX_TIMESTAMP_SECONDS, MIN_TIMESTAMP_SECONDS
from scheduler.types import Completion, FencedWrite, TaskKey

# The items are made without their __init__ (frozen dataclasses set each field through
# object.__setattr__, which is most of their cost). That is only right while these are
# all their fields: a field added to either class must be set here too.
if tuple(f.name for f in dataclasses.fields(FencedWrite)) != ("key", "token"):
    raise ImportError("FencedWrite's fields changed: update scheduler.server._stream_c")
if tuple(f.name for f in dataclasses.fields(Completion)) != (
    "key", "token", "result", "acked_at"
):
    raise ImportError("Completion's fields changed: update scheduler.server._stream_c")

cdef object _UUID = uuid.UUID
cdef object _UNKNOWN = uuid.SafeUUID.unknown
cdef object _FencedWrite = FencedWrite
cdef object _Completion = Completion
cdef object _TaskKey = TaskKey
cdef object _tuple_new = tuple.__new__
cdef object _utc = _utc_at
cdef object _raw = _raw_json
cdef object _RESULT_FIELD = "completions.items.result_json"
cdef int64_t _MIN_S = MIN_TIMESTAMP_SECONDS
cdef int64_t _MAX_S = MAX_TIMESTAMP_SECONDS
cdef Py_ssize_t _MAX_RESULT = MAX_RESULT_BYTES
cdef str _S_INT = "int"
cdef str _S_IS_SAFE = "is_safe"
cdef str _S_KEY = "key"
cdef str _S_TOKEN = "token"
cdef str _S_RESULT = "result"
cdef str _S_ACKED_AT = "acked_at"

KINDS = {4: "ack", 5: "heartbeat", 12: "completions"}
"""The WorkerMessage fields (oneof ``kind``) read here, by number."""


cdef struct Reader:
    const unsigned char* buf
    Py_ssize_t pos
    Py_ssize_t end
    bint bad


@cython.cdivision(True)
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


cdef object _task_id(const unsigned char* p):
    """A UUID from 36 bytes of lowercase 8-4-4-4-12 hex, or None."""
    cdef uint64_t hi = 0
    cdef uint64_t lo = 0
    cdef int i, d, n = 0
    for i in range(36):
        if i == 8 or i == 13 or i == 18 or i == 23:
            if p[i] != 45:  # '-'
                return None
            continue
        d = _hex(p[i])
        if d < 0:
            return None
        if n < 16:
            hi = (hi << 4) | <uint64_t>d
        else:
            lo = (lo << 4) | <uint64_t>d
        n += 1
    u = _UUID.__new__(_UUID)
    PyObject_GenericSetAttr(u, _S_INT, ((<object>hi) << 64) | (<object>lo))
    PyObject_GenericSetAttr(u, _S_IS_SAFE, _UNKNOWN)
    return u


cdef object _ref(Reader* r, Py_ssize_t stop, list ids):
    """A TaskRef's (key, token) read up to ``stop``, its id text appended to ``ids``;
    None when the general path must decide."""
    cdef uint64_t tag, v
    cdef Py_ssize_t n, ts_stop
    cdef const unsigned char* id_at = NULL
    cdef int64_t token = 0, seconds = 0
    cdef int64_t nanos = 0
    cdef bint has_id = False, has_token = False, has_ts = False
    cdef bint has_s = False, has_n = False
    while r.pos < stop:
        tag = _varint(r)
        if r.bad:
            return None
        if tag == 0x0A and not has_id:  # 1: task_id, string
            n = _length(r)
            if n != 36 or r.pos + n > stop:
                return None
            id_at = r.buf + r.pos
            r.pos += n
            has_id = True
        elif tag == 0x10 and not has_token:  # 2: fencing_token, int64
            token = <int64_t>_varint(r)
            has_token = True
        elif tag == 0x1A and not has_ts:  # 3: scheduled_at, Timestamp
            n = _length(r)
            if n < 0 or r.pos + n > stop:
                return None
            ts_stop = r.pos + n
            has_ts = True
            while r.pos < ts_stop:
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
            if r.bad or r.pos != ts_stop:
                return None
        else:
            return None
        if r.bad:
            return None
    if r.pos != stop or not has_id or not has_ts or token <= 0:
        return None
    if not (0 <= nanos < 1_000_000_000) or not (_MIN_S <= seconds < _MAX_S):
        return None
    u = _task_id(id_at)
    if u is None:
        return None
    ids.append((<char*>id_at)[:36])
    key = _tuple_new(_TaskKey, (u, _utc(seconds, nanos // 1000)))
    return (key, token)


cdef object _write(object ref):
    w = _FencedWrite.__new__(_FencedWrite)
    PyObject_GenericSetAttr(w, _S_KEY, ref[0])
    PyObject_GenericSetAttr(w, _S_TOKEN, ref[1])
    return w


cdef object _completion(Reader* r, Py_ssize_t stop, list ids):
    """One Completion item read up to ``stop``, or None."""
    cdef uint64_t tag
    cdef Py_ssize_t n
    cdef object ref = None
    cdef object data = None
    while r.pos < stop:
        tag = _varint(r)
        if r.bad:
            return None
        if tag == 0x0A and ref is None:  # 1: task, TaskRef
            n = _length(r)
            if n < 0 or r.pos + n > stop:
                return None
            ref = _ref(r, r.pos + n, ids)
            if ref is None:
                return None
        elif tag == 0x1A and data is None:  # 3: result_json, bytes
            n = _length(r)
            if n < 0 or r.pos + n > stop:
                return None
            data = (<char*>(r.buf + r.pos))[:n]
            r.pos += n
        else:  # 2: a Struct result, or anything else: the general path
            return None
    if r.pos != stop or ref is None:
        return None
    if data:
        if len(data) > _MAX_RESULT:
            return None
        try:
            result = _raw(data, _RESULT_FIELD, _MAX_RESULT)
        except Exception:
            return None  # refused: the general path names the item's field
    else:
        result = {}
    c = _Completion.__new__(_Completion)
    PyObject_GenericSetAttr(c, _S_KEY, ref[0])
    PyObject_GenericSetAttr(c, _S_TOKEN, ref[1])
    PyObject_GenericSetAttr(c, _S_RESULT, result)
    PyObject_GenericSetAttr(c, _S_ACKED_AT, None)
    return c


def decode_writes(bytes data):
    """``(request_id, kind, items, ids)`` of a WorkerMessage holding an ack, heartbeat
    or completions (``kind`` its field name; ``items`` FencedWrite or Completion, one
    per task in order; ``ids`` each task id's 36 bytes of text), or None when the
    message is another kind or anything the general decoder must judge."""
    cdef Reader r
    cdef uint64_t tag
    cdef uint64_t request_id = 0
    cdef bint has_request = False
    cdef Py_ssize_t n, body = -1, body_stop = -1, item_stop
    cdef int field = 0
    cdef list items = []
    cdef list ids = []
    r.buf = <const unsigned char*>(<char*>data)
    r.pos = 0
    r.end = len(data)
    r.bad = False
    while r.pos < r.end:
        tag = _varint(&r)
        if r.bad:
            return None
        if tag == 0x08 and not has_request:  # 1: request_id, uint64
            request_id = _varint(&r)
            has_request = True
        elif (tag == 0x22 or tag == 0x2A or tag == 0x62) and field == 0:  # 4, 5, 12
            field = <int>(tag >> 3)
            n = _length(&r)
            if n < 0:
                return None
            body = r.pos
            body_stop = r.pos + n
            r.pos = body_stop
        else:
            return None
        if r.bad:
            return None
    if field == 0:
        return None
    r.pos = body
    while r.pos < body_stop:
        tag = _varint(&r)
        if r.bad or tag != 0x0A:  # 1: the repeated tasks / items
            return None
        n = _length(&r)
        if n < 0 or r.pos + n > body_stop:
            return None
        item_stop = r.pos + n
        if field == 12:
            item = _completion(&r, item_stop, ids)
        else:
            ref = _ref(&r, item_stop, ids)
            item = None if ref is None else _write(ref)
        if item is None:
            return None
        items.append(item)
    if r.pos != body_stop:
        return None
    return (request_id, KINDS[field], items, ids)
