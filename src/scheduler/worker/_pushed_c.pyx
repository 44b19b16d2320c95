# cython: language_level=3
"""A push of assignments read straight from the wire bytes of its ``ServerMessage``
into the values the worker holds a task by (Cython).

A busy worker receives thousands of assignments a second. Read through the generated
classes, each costs a Python object per field, a ``uuid.UUID`` parse of its id, two
Timestamp conversions and a ``TaskRef`` built field by field; here the bytes go
straight to those values, the same ones the general path makes (the worker's
``HandlerRunner._held_from``).

Only a push whose every assignment is plainly in its usual form is read here: a
message of another kind, an assignment holding a ``Struct`` (payload or checkpoint), a
dispatch trace context, an unknown or repeated field, an id not in lowercase
canonical form, a value out of its type's range, a malformed time or JSON that does
not read as an object returns None, and the caller decodes the message the general
way. ``tests/unit/worker/test_pushed_read.py`` checks the two paths against each other.
"""

from libc.stdint cimport int64_t, uint64_t
from libc.string cimport memcmp, memcpy

from scheduler._pbread cimport (
    Reader,
    _length,
    _once,
    _varint,
    read_text,
    read_time,
    read_trace,
    read_uuid,
    utc_at,
)

from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from scheduler.jsonbytes import loads as _json_loads
# The fields this codec handles, checked against the proto's descriptors by
# tests/unit/test_native_fields.py: per message, {field: the tag the code reads or
# writes it with} and the fields it leaves to the generated classes (the general path).
# A field added to the proto must be added here, one side or the other. (Timestamps and
# trace contexts inside these are read by scheduler._pbread, which declares them.)
WIRE_FIELDS = {
    "tickwheel.v1.ServerMessage": (
        {"assignments": 0x12}, ("welcome", "cancel", "result", "backlog")
    ),
    "tickwheel.v1.Assignments": ({"tasks": 0x0A}, ()),
    "tickwheel.v1.Assignment": (
        {
            "task_id": 0x0A, "tenant_id": 0x12, "type": 0x1A, "fencing_token": 0x28,
            "attempt": 0x30, "max_retries": 0x38, "scheduled_at": 0x42, "due_at": 0x4A,
            "lease_expires_at": 0x52, "trace_context": 0x62, "pool": 0x68,
            "timeout_s": 0x71, "payload_json": 130, "checkpoint_json": 138,
            "start_in_us": 144,
        },
        ("payload", "checkpoint", "dispatch_trace_context"),
    ),
    # written: the TaskRef the worker answers with (its id's tag and length as one
    # b"\x0a\x24" prefix)
    "tickwheel.v1.TaskRef": ({"task_id": 0x0A, "fencing_token": 0x10, "scheduled_at": 0x1A}, ()),
}


cdef object _loads = _json_loads
cdef object _ref_of = pb.TaskRef.FromString
cdef str _EMPTY_TEXT = ""


cdef class _Seen:
    """The previous assignment's tenant and type: a push's tasks mostly share them."""
    cdef bytes tenant_bytes
    cdef object tenant
    cdef bytes type_bytes
    cdef object type_text


cdef object _cached(Reader* r, Py_ssize_t n, _Seen seen, bint tenant):
    """A tenant id or type, reusing the previous assignment's str when the bytes are
    the same; None when not UTF-8."""
    cdef const unsigned char* p = r.buf + r.pos
    cdef bytes last = seen.tenant_bytes if tenant else seen.type_bytes
    if last is not None and len(last) == n and memcmp(<const char*>last, p, n) == 0:
        r.pos += n
        return seen.tenant if tenant else seen.type_text
    text = read_text(r, n)
    if text is None:
        return None
    if tenant:
        seen.tenant_bytes = (<char*>p)[:n]
        seen.tenant = text
    else:
        seen.type_bytes = (<char*>p)[:n]
        seen.type_text = text
    return text


cdef object _assignment(Reader* r, Py_ssize_t stop, _Seen seen):
    """One Assignment up to ``stop`` as its ``Pushed`` tuple, or None."""
    cdef uint64_t tag, v
    cdef unsigned int seen_fields = 0
    cdef Py_ssize_t n, ts_at = -1, ts_n = 0
    cdef const unsigned char* id_at = NULL
    cdef int64_t token = 0
    cdef uint64_t attempt = 0, max_retries = 0, start_in = 0
    cdef double timeout = 0.0
    tenant = type_text = scheduled_at = due_at = trace = None
    payload = checkpoint = None
    while r.pos < stop:
        tag = _once(r, &seen_fields, 18)
        if tag == 0:
            return None
        if tag == 0x0A:  # 1: task_id
            n = _length(r)
            if n != 36 or r.pos + n > stop:
                return None
            id_at = r.buf + r.pos
            r.pos += n
        elif tag == 0x12 or tag == 0x1A:  # 2: tenant_id, 3: type
            n = _length(r)
            if n < 0 or r.pos + n > stop:
                return None
            text = _cached(r, n, seen, tag == 0x12)
            if text is None:
                return None
            if tag == 0x12:
                tenant = text
            else:
                type_text = text
        elif tag == 0x28:  # 5: fencing_token, int64
            token = <int64_t>_varint(r)
        elif tag == 0x30 or tag == 0x38:  # 6: attempt, 7: max_retries, uint32
            v = _varint(r)
            if r.bad or v > 0xFFFFFFFF:
                return None
            if tag == 0x30:
                attempt = v
            else:
                max_retries = v
        elif tag == 0x42 or tag == 0x4A or tag == 0x52:  # 8, 9, 10: Timestamps
            n = _length(r)
            if n < 0 or r.pos + n > stop:
                return None
            if tag == 0x42:
                ts_at = r.pos
                ts_n = n
            when = read_time(r, r.pos + n, False)
            if when is None:
                return None
            if tag == 0x42:
                scheduled_at = when
            elif tag == 0x4A:
                due_at = when
            # 10: lease_expires_at, not kept by the worker
        elif tag == 0x62:  # 12: trace_context (the submitter's)
            n = _length(r)
            if n < 0 or r.pos + n > stop:
                return None
            trace = read_trace(r, r.pos + n)
            if trace is False:
                return None
        elif tag == 0x68:  # 13: pool, not kept by the worker
            v = _varint(r)
            if r.bad or v > 0x7FFFFFFF:
                return None
        elif tag == 0x71:  # 14: timeout_s, double (fixed64)
            if r.pos + 8 > stop:
                return None
            memcpy(&timeout, r.buf + r.pos, 8)  # little-endian, as the wire is
            r.pos += 8
        elif tag == 130 or tag == 138:  # 16: payload_json, 17: checkpoint_json
            n = _length(r)
            if n < 0 or r.pos + n > stop:
                return None
            if n:
                try:
                    value = _loads((<char*>(r.buf + r.pos))[:n])
                except Exception:
                    return None  # the general path raises what it raises
            else:
                value = None
            r.pos += n
            if tag == 130:
                payload = value
            else:
                checkpoint = value
        elif tag == 144:  # 18: start_in_us, uint32
            start_in = _varint(r)
            if r.bad or start_in > 0xFFFFFFFF:
                return None
        else:  # a Struct, the dispatch trace context, or anything else
            return None
        if r.bad:
            return None
    if r.pos != stop or id_at == NULL or ts_at < 0:
        return None
    if tenant is None:
        tenant = _EMPTY_TEXT
    if type_text is None:
        type_text = _EMPTY_TEXT
    if due_at is None:
        due_at = utc_at(0, 0)
    task_id = read_uuid(id_at)
    if task_id is None:
        return None
    # The TaskRef the worker writes its acks and outcomes with: id, token, and the
    # scheduled_at Timestamp as it came.
    ref = bytearray(b"\x0a\x24")
    ref += (<char*>id_at)[:36]
    if token:
        ref.append(0x10)
        v = <uint64_t>token
        while v >= 0x80:
            ref.append((v & 0x7F) | 0x80)
            v >>= 7
        ref.append(v)
    ref.append(0x1A)
    ref.append(ts_n)  # a Timestamp's two varints are well under 128 bytes
    ref += (<char*>(r.buf + ts_at))[:ts_n]
    ref_bytes = bytes(ref)
    return (
        task_id,
        type_text,
        <object>attempt,
        <object>max_retries,
        payload if payload else {},
        token,
        checkpoint,
        trace,
        scheduled_at,
        due_at,
        timeout,
        tenant,
        _ref_of(ref_bytes),
        None,
        ref_bytes,
        <object>start_in,
    )


def decode_pushed(bytes data):
    """The assignments of a ``ServerMessage`` holding ``assignments``, each as the
    worker's ``Pushed`` tuple (``scheduler.worker._pushed``: ``(task_id, type,
    attempt, max_retries, payload, fencing_token, checkpoint, trace_context,
    scheduled_at, due_at, timeout_s, tenant_id, ref, dispatch_trace, ref_bytes,
    start_in_us)``);
    None for any other message, or one the general decoder must read."""
    cdef Reader r
    cdef uint64_t tag
    cdef Py_ssize_t n, body = -1, body_stop = -1, stop
    cdef list out = []
    cdef _Seen seen = _Seen()
    r.buf = <const unsigned char*>(<char*>data)
    r.pos = 0
    r.end = len(data)
    r.bad = False
    while r.pos < r.end:
        tag = _varint(&r)
        if r.bad or tag != 0x12 or body >= 0:  # 2: assignments, once
            return None
        n = _length(&r)
        if n < 0:
            return None
        body = r.pos
        body_stop = r.pos + n
        r.pos = body_stop
    if body < 0:
        return None
    r.pos = body
    while r.pos < body_stop:
        tag = _varint(&r)
        if r.bad or tag != 0x0A:  # Assignments.tasks
            return None
        n = _length(&r)
        if n < 0 or r.pos + n > body_stop:
            return None
        stop = r.pos + n
        item = _assignment(&r, stop, seen)
        if item is None:
            return None
        out.append(item)
    if r.pos != body_stop:
        return None
    return out
