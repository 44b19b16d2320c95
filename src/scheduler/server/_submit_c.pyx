# cython: language_level=3
"""A ``SubmitTasksRequest`` read straight from its wire bytes into the engine's
``SubmitSpec`` items (Cython).

A client submits up to 10,000 tasks a call. Read through the generated classes, each
task costs a Python object per field and a pass of the validation in
``scheduler.server._convert.spec_from_proto`` (about 4 µs a task); here the bytes go
straight to the ``SubmitSpec``, with the same checks.

Only what is plainly valid is read here: a request with anything the fast path does
not take returns None, and the caller decodes it the general way, which accepts or
refuses it with the error that names the field. That is a ``Struct`` payload, a trace
context or a retry policy; an unknown or repeated field; a type, key, pool, jitter
mode, retry count, timeout or time out of range or not in its plain form; JSON bytes
the checker refuses; no task or more than a call may carry; or malformed bytes. So the
fast path never decides a refusal (``tests/unit/server/test_submit_read.py`` checks
the two paths against each other).
"""

from cpython.object cimport PyObject_GenericSetAttr
from cpython.unicode cimport PyUnicode_DecodeASCII
from libc.math cimport isfinite
from libc.stdint cimport int64_t, uint64_t
from libc.string cimport memcmp, memcpy

from scheduler._pbread cimport Reader, _length, _once, _varint, read_text, read_time

import dataclasses

from google.protobuf import struct_pb2

from scheduler.engine import SubmitSpec
from scheduler.jitter import JitterMode
from scheduler.jsonbytes import raw as _raw_json
from scheduler.limits import (
    DEFAULT_MAX_RETRIES,
    MAX_IDEMPOTENCY_KEY_CHARS,
    MAX_RETRIES,
    MAX_SUBMIT_BATCH,
    MAX_TIMEOUT_S,
    MAX_TYPE_CHARS,
)
from scheduler.types import Pool
from scheduler.wire import JITTER_FROM_PROTO, POOL_FROM_PROTO

# The specs are made without their __init__ (each field set through its slot), which is
# only right while these are all the fields: a field added must be set here too.
_FIELDS = (
    "type", "payload", "scheduled_at", "idempotency_key", "pool", "strict_timing",
    "jitter_mode", "max_retries", "timeout_s", "trace_context", "retry_policy", "flow",
    "concurrency_key", "rate_limit_key",
)
if tuple(f.name for f in dataclasses.fields(SubmitSpec)) != _FIELDS:
    raise ImportError("SubmitSpec's fields changed: update scheduler.server._submit_c")

# The fields this codec handles, checked against the proto's descriptors by
# tests/unit/test_native_fields.py: per message, {field: the tag the code reads or
# writes it with} and the fields it leaves to the generated classes (the general path).
# A field added to the proto must be added here, one side or the other. (Timestamps and
# trace contexts inside these are read by scheduler._pbread, which declares them.)
WIRE_FIELDS = {
    "tickwheel.v1.SubmitTasksRequest": ({"tasks": 0x0A}, ()),
    "tickwheel.v1.TaskSpec": (
        {
            "type": 0x0A, "scheduled_at": 0x1A, "idempotency_key": 0x22, "pool": 0x28,
            "strict_timing": 0x30, "jitter_mode": 0x38, "max_retries": 0x40,
            "no_retries": 0x48, "timeout_s": 0x51, "payload_json": 0x6A,
        },
        # Flow options and the concurrency and rate limit keys (issue 43) send the task
        # down the general path.
        (
            "payload", "trace_context", "retry_policy", "debounce", "throttle",
            "idempotency_ttl_s", "idempotency_scope", "concurrency_key", "rate_limit_key",
        ),
    ),
}

EMPTY_PAYLOAD = struct_pb2.Struct()
"""What a task sent without a payload echoes in its answer (as the general path's
empty ``payload``); shared, never changed."""

cdef object _SubmitSpec = SubmitSpec
cdef object _raw = _raw_json
cdef object _EMPTY = EMPTY_PAYLOAD
cdef object _NONE = JitterMode.NONE
cdef object _STANDARD = Pool.STANDARD
cdef dict _POOLS = dict(POOL_FROM_PROTO)
cdef dict _JITTERS = dict(JITTER_FROM_PROTO)
cdef object _PAYLOAD_FIELD = "tasks.payload_json"
cdef Py_ssize_t _MAX_TYPE = MAX_TYPE_CHARS
cdef Py_ssize_t _MAX_KEY = MAX_IDEMPOTENCY_KEY_CHARS
cdef uint64_t _MAX_RETRIES = MAX_RETRIES
cdef uint64_t _DEFAULT_RETRIES = DEFAULT_MAX_RETRIES
cdef double _MAX_TIMEOUT = MAX_TIMEOUT_S
cdef Py_ssize_t _MAX_TASKS = MAX_SUBMIT_BATCH
cdef list _NAMES = [name for name in _FIELDS]
_POOLS[0] = _STANDARD  # POOL_UNSPECIFIED: the standard pool


cdef struct Last:
    # The previous task's type bytes: a batch's tasks mostly share one type, so its
    # text is decoded once and the same str reused.
    const unsigned char* at
    Py_ssize_t n


cdef object _spec(
    Reader* r, Py_ssize_t stop, Py_ssize_t limit, object trace, Last* last, list last_type,
    list echoes,
):
    """One TaskSpec read up to ``stop`` as a SubmitSpec (its echo appended to
    ``echoes``), or None."""
    cdef uint64_t tag, v
    cdef Py_ssize_t n, i
    cdef const unsigned char* type_at = NULL
    cdef Py_ssize_t type_n = 0
    cdef double timeout = 0.0
    cdef uint64_t retries = 0
    cdef unsigned int seen = 0  # a bit per field number read (``_once``)
    cdef bint strict = False, no_retries = False
    cdef object scheduled_at = None
    cdef object key = None
    cdef object pool = _STANDARD
    cdef object jitter = None
    cdef object payload_data = None
    while r.pos < stop:
        tag = _once(r, &seen, 13)  # 0: malformed, unknown or repeated
        if tag == 0:
            return None
        if tag == 0x0A:  # 1: type, string
            n = _length(r)
            if n <= 0 or n > _MAX_TYPE or r.pos + n > stop:
                return None
            type_at = r.buf + r.pos
            type_n = n
            for i in range(n):
                if not (0x21 <= type_at[i] <= 0x7E):  # printable ASCII, no space
                    return None
            r.pos += n
        elif tag == 0x1A:  # 3: scheduled_at, Timestamp
            n = _length(r)
            if n < 0 or r.pos + n > stop:
                return None
            scheduled_at = read_time(r, r.pos + n, True)
            if scheduled_at is None:
                return None
        elif tag == 0x22:  # 4: idempotency_key, string
            n = _length(r)
            if n < 0 or r.pos + n > stop or n > 4 * _MAX_KEY:
                return None
            if n:
                key = read_text(r, n)
                if key is None or len(key) > _MAX_KEY:
                    return None
        elif tag == 0x28:  # 5: pool, enum
            v = _varint(r)
            if r.bad or v > 0xFF:
                return None
            pool = _POOLS.get(<int>v)
            if pool is None:
                return None
        elif tag == 0x30:  # 6: strict_timing, bool
            v = _varint(r)
            if r.bad or v > 1:
                return None
            strict = v == 1
        elif tag == 0x38:  # 7: jitter_mode, enum
            v = _varint(r)
            if r.bad or v > 0xFF:
                return None
            if v:
                jitter = _JITTERS.get(<int>v)
                if jitter is None:
                    return None
        elif tag == 0x40:  # 8: max_retries, uint32
            retries = _varint(r)
            if r.bad or retries > _MAX_RETRIES:
                return None
        elif tag == 0x48:  # 9: no_retries, bool
            v = _varint(r)
            if r.bad or v > 1:
                return None
            no_retries = v == 1
        elif tag == 0x51:  # 10: timeout_s, double (fixed64)
            if r.pos + 8 > stop:
                return None
            memcpy(&timeout, r.buf + r.pos, 8)  # little-endian, as the wire is
            r.pos += 8
            if not isfinite(timeout) or not (0.0 <= timeout <= _MAX_TIMEOUT):
                return None
        elif tag == 0x6A:  # 13: payload_json, bytes
            n = _length(r)
            if n < 0 or r.pos + n > stop or n > limit:
                return None
            if n:
                payload_data = (<char*>(r.buf + r.pos))[:n]
            r.pos += n
        else:  # a Struct payload, a trace context, a retry policy, anything else
            return None
    if r.pos != stop or not (seen & (1u << 1)):  # no type
        return None
    if no_retries:
        if retries:
            return None  # refused: the general path names max_retries
    elif not retries:
        retries = _DEFAULT_RETRIES
    if payload_data is not None:
        try:
            payload = _raw(payload_data, _PAYLOAD_FIELD, limit)
        except Exception:
            return None  # refused: the general path names the task's field
        echoes.append(payload_data)
    else:
        payload = {}
        echoes.append(_EMPTY)
    if last.at != NULL and last.n == type_n and memcmp(last.at, type_at, type_n) == 0:
        type_text = last_type[0]
    else:
        type_text = PyUnicode_DecodeASCII(<const char*>type_at, type_n, NULL)
        last_type[0] = type_text
        last.at = type_at
        last.n = type_n
    s = _SubmitSpec.__new__(_SubmitSpec)
    names = _NAMES
    PyObject_GenericSetAttr(s, names[0], type_text)
    PyObject_GenericSetAttr(s, names[1], payload)
    PyObject_GenericSetAttr(s, names[2], scheduled_at)
    PyObject_GenericSetAttr(s, names[3], key)
    PyObject_GenericSetAttr(s, names[4], pool)
    PyObject_GenericSetAttr(s, names[5], strict)
    PyObject_GenericSetAttr(s, names[6], _NONE if strict else jitter)
    PyObject_GenericSetAttr(s, names[7], <int>retries)
    PyObject_GenericSetAttr(s, names[8], timeout)
    PyObject_GenericSetAttr(s, names[9], trace)
    PyObject_GenericSetAttr(s, names[10], None)
    PyObject_GenericSetAttr(s, names[11], None)  # flow options: the general path's
    PyObject_GenericSetAttr(s, names[12], None)  # concurrency key: the general path's
    PyObject_GenericSetAttr(s, names[13], "")  # a rate limit key: the general path's
    return s


def decode_submit(bytes data, Py_ssize_t max_payload_bytes, object default_trace):
    """``(specs, echoes)`` of a SubmitTasksRequest: a ``SubmitSpec`` per task in order
    (``default_trace`` as each one's trace context), and what each task sent as its
    payload, to echo in the answer (its JSON bytes, or :data:`EMPTY_PAYLOAD`); None
    when the general decoder must judge the request."""
    cdef Reader r
    cdef Last last
    cdef uint64_t tag
    cdef Py_ssize_t n
    cdef list specs = []
    cdef list echoes = []
    cdef list last_type = [None]
    r.buf = <const unsigned char*>(<char*>data)
    r.pos = 0
    r.end = len(data)
    r.bad = False
    last.at = NULL
    last.n = 0
    while r.pos < r.end:
        tag = _varint(&r)
        if r.bad or tag != 0x0A:  # 1: the repeated tasks
            return None
        n = _length(&r)
        if n < 0:
            return None
        spec = _spec(&r, r.pos + n, max_payload_bytes, default_trace, &last, last_type, echoes)
        if spec is None:
            return None
        specs.append(spec)
        if len(specs) > _MAX_TASKS:
            return None
    if not specs:
        return None
    return specs, echoes
