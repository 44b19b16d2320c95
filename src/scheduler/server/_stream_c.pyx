# cython: language_level=3
"""The worker stream's fenced writes read straight from their wire bytes, and its
assignments written straight to them (Cython).

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
(``tests/unit/server/test_stream_wire.py`` checks the two against each other).

:func:`encode_assignments` writes a push of assignments field by field, in number
order, so its bytes are the generated class's (the same tests compare them byte for
byte); what it does not write itself (a traced assignment) it asks the caller for.
"""

cimport cython
from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.object cimport PyObject_GenericSetAttr
from libc.stdint cimport int32_t, int64_t, uint64_t
from libc.stdlib cimport free, realloc
from libc.string cimport memcpy

from scheduler._pbread cimport Reader, _length, _once, _varint, read_time, read_uuid_bytes, utc_parts

import dataclasses

from scheduler.ids import uuid_of_bytes as _uuid_of_bytes
from scheduler.jsonbytes import raw as _raw_json
from scheduler.jsonbytes import to_bytes as _json_bytes
from scheduler.limits import MAX_RESULT_BYTES
from scheduler.types import Completion, FencedWrite, RawJSON, TaskKey
from scheduler.wire import POOL_TO_PROTO as _POOLS
from scheduler.wire import timestamp_bytes as _timestamp_bytes

# The items are made without their __init__ (frozen dataclasses set each field through
# object.__setattr__, which is most of their cost). That is only right while these are
# all their fields: a field added to either class must be set here too.
if tuple(f.name for f in dataclasses.fields(FencedWrite)) != ("key", "token"):
    raise ImportError("FencedWrite's fields changed: update scheduler.server._stream_c")
if tuple(f.name for f in dataclasses.fields(Completion)) != (
    "key", "token", "result", "acked_at"
):
    raise ImportError("Completion's fields changed: update scheduler.server._stream_c")
# The fields this codec handles, checked against the proto's descriptors by
# tests/unit/test_native_fields.py: per message, {field: the tag the code reads or
# writes it with} and the fields it leaves to the generated classes (the general path).
# A field added to the proto must be added here, one side or the other.
WIRE_FIELDS = {
    # read: the fenced writes of a WorkerMessage
    "tickwheel.v1.WorkerMessage": (
        {"request_id": 0x08, "ack": 0x22, "heartbeat": 0x2A, "completions": 0x62},
        (
            "hello", "credit", "checkpoint", "completion", "failure", "release",
            "cancel_confirmed", "drain",
        ),
    ),
    "tickwheel.v1.Ack": ({"tasks": 0x0A}, ()),
    "tickwheel.v1.Heartbeat": ({"tasks": 0x0A}, ()),
    "tickwheel.v1.Completions": ({"items": 0x0A}, ()),
    "tickwheel.v1.Completion": ({"task": 0x0A, "result_json": 0x1A}, ("result",)),
    "tickwheel.v1.TaskRef": ({"task_id": 0x0A, "fencing_token": 0x10, "scheduled_at": 0x1A}, ()),
    # written: a push of assignments
    "tickwheel.v1.ServerMessage": (
        {"assignments": 0x12}, ("welcome", "cancel", "result", "backlog")
    ),
    "tickwheel.v1.Assignments": ({"tasks": 0x0A}, ()),
    "tickwheel.v1.Assignment": (
        {
            "task_id": 0x0A, "tenant_id": 0x12, "type": 0x1A, "fencing_token": 0x28,
            "attempt": 0x30, "max_retries": 0x38, "scheduled_at": 0x42, "due_at": 0x4A,
            "lease_expires_at": 0x52, "pool": 0x68, "timeout_s": 0x71,
            "payload_json": 130, "checkpoint_json": 138, "start_in_us": 144,
        },
        ("payload", "checkpoint", "trace_context", "dispatch_trace_context"),
    ),
    "google.protobuf.Timestamp": ({"seconds": 0x08, "nanos": 0x10}, ()),  # read and written
}


cdef object _FencedWrite = FencedWrite
cdef object _Completion = Completion
cdef object _TaskKey = TaskKey
cdef object _tuple_new = tuple.__new__
cdef object _raw = _raw_json
cdef object _RESULT_FIELD = "completions.items.result_json"
cdef Py_ssize_t _MAX_RESULT = MAX_RESULT_BYTES
cdef str _S_KEY = "key"
cdef str _S_TOKEN = "token"
cdef str _S_RESULT = "result"
cdef str _S_ACKED_AT = "acked_at"

KINDS = {4: "ack", 5: "heartbeat", 12: "completions"}
"""The WorkerMessage fields (oneof ``kind``) read here, by number."""


cdef object _ref(Reader* r, Py_ssize_t stop, list ids):
    """A TaskRef's (key, token) read up to ``stop``, its id text appended to ``ids``;
    None when the general path must decide."""
    cdef uint64_t tag
    cdef Py_ssize_t n
    cdef const unsigned char* id_at = NULL
    cdef int64_t token = 0
    cdef unsigned int seen = 0  # a bit per field number read (``_once``)
    cdef object when = None
    while r.pos < stop:
        tag = _once(r, &seen, 3)  # 0: malformed, unknown or repeated
        if tag == 0:
            return None
        if tag == 0x0A:  # 1: task_id, string
            n = _length(r)
            if n != 36 or r.pos + n > stop:
                return None
            id_at = r.buf + r.pos
            r.pos += n
        elif tag == 0x10:  # 2: fencing_token, int64
            token = <int64_t>_varint(r)
        elif tag == 0x1A:  # 3: scheduled_at, Timestamp
            n = _length(r)
            if n < 0 or r.pos + n > stop:
                return None
            when = read_time(r, r.pos + n, True)
            if when is None:
                return None
        else:
            return None
        if r.bad:
            return None
    if r.pos != stop or id_at == NULL or when is None or token <= 0:
        return None
    b = read_uuid_bytes(id_at)
    if b is None:
        return None
    u = _uuid_of_bytes(b)
    ids.append((<char*>id_at)[:36])
    key = _tuple_new(_TaskKey, (u, when))
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


# -- assignments, written ------------------------------------------------------------

cdef object _RawJSON = RawJSON
cdef object _timestamp = _timestamp_bytes
cdef object _to_json = _json_bytes
cdef dict _POOL = dict(_POOLS)
cdef const char* _HEX = b"0123456789abcdef"


cdef struct Out:
    char* buf
    Py_ssize_t len
    Py_ssize_t cap


cdef int _grow(Out* o, Py_ssize_t need) except -1:
    cdef Py_ssize_t cap = o.cap
    cdef char* buf
    if o.len + need <= cap:
        return 0
    while cap < o.len + need:
        cap = cap * 2 if cap else 4096
    buf = <char*>realloc(o.buf, cap)
    if buf == NULL:
        raise MemoryError()
    o.buf = buf
    o.cap = cap
    return 0


cdef inline int _put_varint(Out* o, uint64_t v) except -1:
    _grow(o, 10)
    while v >= 0x80:
        o.buf[o.len] = <char>((v & 0x7F) | 0x80)
        o.len += 1
        v >>= 7
    o.buf[o.len] = <char>v
    o.len += 1
    return 0


cdef inline int _put_bytes(Out* o, const char* p, Py_ssize_t n) except -1:
    _grow(o, n)
    memcpy(o.buf + o.len, p, n)
    o.len += n
    return 0


cdef int _put_field_bytes(Out* o, unsigned char tag, bytes data) except -1:
    cdef Py_ssize_t n = len(data)
    _put_varint(o, tag)
    _put_varint(o, <uint64_t>n)
    _put_bytes(o, <char*>data, n)
    return 0


cdef int _put_uuid(Out* o, unsigned char tag, object u) except -1:
    """``tag``, 36, and the UUID's canonical text (lowercase 8-4-4-4-12)."""
    cdef object value = u.int
    cdef uint64_t hi = <uint64_t>(value >> 64)
    cdef uint64_t lo = <uint64_t>(value & 0xFFFFFFFFFFFFFFFF)
    cdef char* p
    cdef int i, shift
    _grow(o, 38)
    o.buf[o.len] = <char>tag
    o.buf[o.len + 1] = 36
    p = o.buf + o.len + 2
    # hi: 16 hex digits -> positions 0-7, 9-12, 14-17; lo: 19-22, 24-35
    shift = 60
    for i in range(36):
        if i == 8 or i == 13 or i == 18 or i == 23:
            p[i] = 45
            continue
        if i < 18:
            p[i] = _HEX[(hi >> shift) & 0xF]
        else:
            p[i] = _HEX[(lo >> shift) & 0xF]
        shift -= 4
        if shift < 0:
            shift = 60
    o.len += 38
    return 0


cdef int _put_timestamp(Out* o, unsigned char tag, object dt) except -1:
    """``tag`` and the Timestamp of ``dt`` (``scheduler.wire.timestamp_bytes``, length
    first; ValueError for a time before the epoch). A UTC datetime at or after the
    epoch is written here; anything else by ``timestamp_bytes``."""
    cdef int64_t seconds
    cdef int micros
    cdef uint64_t nanos
    cdef Py_ssize_t n
    cdef bytes data
    if utc_parts(dt, &seconds, &micros) and seconds >= 0:
        nanos = <uint64_t>micros * 1000
        n = 0
        if seconds:
            n += 1 + _varint_len(<uint64_t>seconds)
        if nanos:
            n += 1 + _varint_len(nanos)
        _put_varint(o, tag)
        _put_varint(o, <uint64_t>n)
        if seconds:
            _put_varint(o, 0x08)
            _put_varint(o, <uint64_t>seconds)
        if nanos:
            _put_varint(o, 0x10)
            _put_varint(o, nanos)
        return 0
    data = _timestamp(dt)
    _put_varint(o, tag)
    _put_bytes(o, <char*>data, len(data))
    return 0


cdef inline Py_ssize_t _varint_len(uint64_t v) noexcept:
    cdef Py_ssize_t n = 1
    while v >= 0x80:
        v >>= 7
        n += 1
    return n


cdef int _put_assignment(Out* body, object a, int64_t now_us) except -1:
    """Assignment ``a`` (no trace context), JSON as bytes, field by field in number
    order, into ``body`` (without its own tag and length); with ``now_us`` (epoch
    microseconds, 0: none) the time left to its due instant, once it is ahead."""
    cdef object key = a.key
    cdef bytes text
    cdef double timeout
    cdef int64_t token, seconds, left
    cdef int micros
    cdef object pool
    _put_uuid(body, 0x0A, key[0])  # 1: task_id
    _put_uuid(body, 0x12, a.tenant_id)  # 2: tenant_id
    text = (<str>a.type).encode("utf-8")
    if text:
        _put_field_bytes(body, 0x1A, text)  # 3: type
    token = a.fencing_token
    if token:
        _put_varint(body, 0x28)  # 5: fencing_token
        _put_varint(body, <uint64_t>token)
    if a.attempt:
        _put_varint(body, 0x30)  # 6: attempt
        _put_varint(body, <uint64_t>a.attempt)
    if a.max_retries:
        _put_varint(body, 0x38)  # 7: max_retries
        _put_varint(body, <uint64_t>a.max_retries)
    _put_timestamp(body, 0x42, key[1])  # 8: scheduled_at
    _put_timestamp(body, 0x4A, a.due_at)  # 9: due_at
    _put_timestamp(body, 0x52, a.lease_expires_at)  # 10: lease_expires_at
    pool = _POOL[a.pool]
    if pool:
        _put_varint(body, 0x68)  # 13: pool
        _put_varint(body, <uint64_t>pool)
    timeout = a.timeout_s
    if timeout != 0.0:
        _put_varint(body, 0x71)  # 14: timeout_s, fixed64
        _grow(body, 8)
        memcpy(body.buf + body.len, &timeout, 8)  # little-endian, as the wire is
        body.len += 8
    payload = a.payload
    text = (<str>payload).encode("utf-8") if type(payload) is _RawJSON else _to_json(payload)
    if text:
        _put_field_bytes(body, 130, text)  # 16: payload_json (tag 0x82 0x01)
    checkpoint = a.checkpoint
    if checkpoint is not None:
        text = _to_json(checkpoint)
        if text:
            _put_field_bytes(body, 138, text)  # 17: checkpoint_json (tag 0x8a 0x01)
    if now_us:
        if not utc_parts(a.due_at, &seconds, &micros):
            raise ValueError("due_at is not a UTC datetime")  # the general path's then
        left = seconds * 1000000 + micros - now_us
        if left > 0:
            if left > 0xFFFFFFFF:
                left = 0xFFFFFFFF
            _put_varint(body, 144)  # 18: start_in_us, uint32 (tag 0x90 0x01)
            _put_varint(body, <uint64_t>left)
    return 0


def encode_assignments(assignments, one, int64_t now_us=0):
    """``ServerMessage{assignments: Assignments{tasks}}`` as bytes, the payloads and
    checkpoints as JSON bytes. An assignment with a trace context (or a time before
    the epoch) is written by ``one(a)``, which returns its serialised
    ``Assignment``; every other one here, field by field as the generated class would
    write it."""
    cdef Out body
    cdef Out item
    cdef bytes data
    cdef Py_ssize_t mark
    body.buf = NULL
    body.len = 0
    body.cap = 0
    item.buf = NULL
    item.len = 0
    item.cap = 0
    try:
        for a in assignments:
            item.len = 0
            if a.trace_context:
                data = one(a)
                _put_field_bytes(&body, 0x0A, data)
                continue
            try:
                _put_assignment(&item, a, now_us)
            except ValueError:
                data = one(a)
                _put_field_bytes(&body, 0x0A, data)
                continue
            _put_varint(&body, 0x0A)  # Assignments.tasks
            _put_varint(&body, <uint64_t>item.len)
            _put_bytes(&body, item.buf, item.len)
        # ServerMessage.assignments (2) around Assignments
        item.len = 0
        _put_varint(&item, 0x12)
        _put_varint(&item, <uint64_t>body.len)
        _put_bytes(&item, body.buf, body.len)
        return PyBytes_FromStringAndSize(item.buf, item.len)
    finally:
        free(body.buf)
        free(item.buf)
