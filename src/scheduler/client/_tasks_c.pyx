# cython: language_level=3
"""A ``SubmitTasksResponse`` read straight from its wire bytes into the client's
``Task`` items (Cython).

A submit of 10,000 tasks is answered with 10,000 ``Task`` messages. Read through the
generated classes and ``scheduler.client._convert.task_from_proto``, each costs a
Python object per field (about 7.5 µs a task in the caller's process); here the bytes
go straight to the ``Task``, with the same values.

Only what is plainly in its usual form is read here: an item holding a ``Struct``
(payload, result or checkpoint), a retry policy, an unknown or repeated field, an id
not in lowercase canonical form, a state this client does not know, a value out of its
type's range or a malformed time is handed back (its bytes), to be read the general
way, which raises what the general path raises.
``tests/unit/client/test_submit_answer_read.py`` checks the two paths against each other.
"""

from cpython.object cimport PyObject_GenericSetAttr
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport int64_t, uint64_t
from libc.string cimport memcmp

from scheduler._pbread cimport (
    Reader,
    _length,
    _once,
    _varint,
    _within,
    read_text,
    read_time,
    read_trace,
    read_uuid,
    utc_at,
)

import dataclasses

from scheduler.client._types import Task
from scheduler.jsonbytes import loads as _json_loads
from scheduler.types import Pool
from scheduler.wire import POOL_FROM_PROTO, STATE_FROM_PROTO

# Tasks are made without their __init__ (each field set through its slot), which is
# only right while these are all the fields: a field added must be set here too.
_FIELDS = (
    "id", "tenant_id", "type", "state", "scheduled_at", "due_at", "idempotency_key",
    "pool", "fencing_token", "retry_count", "max_retries", "payload", "result",
    "last_error", "checkpoint", "worker_id", "cancel_requested", "shard_id",
    "strict_timing", "trace_context", "created_at", "updated_at", "created",
    "retry_policy", "last_error_type", "last_traceback", "workflow_id", "schedule_id",
    "debounced", "throttled",
)
if tuple(f.name for f in dataclasses.fields(Task)) != _FIELDS:
    raise ImportError("Task's fields changed: update scheduler.client._tasks_c")
# The fields this codec handles, checked against the proto's descriptors by
# tests/unit/test_native_fields.py: per message, {field: the tag the code reads or
# writes it with} and the fields it leaves to the generated classes (the general path).
# A field added to the proto must be added here, one side or the other. (Timestamps and
# trace contexts inside these are read by scheduler._pbread, which declares them.)
WIRE_FIELDS = {
    "tickwheel.v1.SubmitTasksResponse": ({"results": 0x0A}, ()),
    # An answer with `debounced` or `throttled` set takes the general path.
    "tickwheel.v1.SubmitTaskResponse": (
        {"task": 0x0A, "created": 0x10}, ("debounced", "throttled"),
    ),
    "tickwheel.v1.Task": (
        {
            "id": 0x0A, "tenant_id": 0x12, "type": 0x1A, "state": 0x20, "scheduled_at": 0x2A,
            "due_at": 0x32, "idempotency_key": 0x3A, "pool": 0x40, "fencing_token": 0x48,
            "retry_count": 0x50, "max_retries": 0x58, "last_error": 0x72, "worker_id": 130,
            "cancel_requested": 136, "shard_id": 144, "created_at": 154, "updated_at": 162,
            "strict_timing": 168, "trace_context": 178, "payload_json": 194,
            "result_json": 202, "checkpoint_json": 210, "last_error_type": 218,
            "last_traceback": 226, "workflow_id": 234, "schedule_id": 242,
        },
        ("payload", "result", "checkpoint", "retry_policy", "concurrency_key"),
    ),
}


cdef object _Task = Task
cdef object _loads = _json_loads
cdef object _STANDARD = Pool.STANDARD
cdef dict _POOLS = dict(POOL_FROM_PROTO)
cdef dict _STATES = dict(STATE_FROM_PROTO)
cdef tuple _NAMES = _FIELDS
cdef str _EMPTY_TEXT = ""


cdef class _Seen:
    """What the previous item held, reused when the next holds the same bytes: a
    batch's tasks share a tenant and mostly a type."""
    cdef bytes tenant_bytes
    cdef object tenant
    cdef bytes type_bytes
    cdef object type_text


cdef object _bytes(Reader* r, Py_ssize_t stop):
    cdef Py_ssize_t n = _length(r)
    if n < 0 or r.pos + n > stop:
        return None
    data = (<char*>(r.buf + r.pos))[:n]
    r.pos += n
    return data


cdef object _task(Reader* r, Py_ssize_t stop, bint created, _Seen seen):
    """One Task read up to ``stop``, or None."""
    cdef uint64_t tag, v
    cdef Py_ssize_t n
    cdef const unsigned char* p
    cdef int64_t token = 0
    cdef uint64_t retry_count = 0, max_retries = 0, shard_id = 0
    cdef bint cancel = False, strict = False
    cdef unsigned int seen_fields = 0
    task_id = tenant = type_text = state = None
    scheduled_at = due_at = created_at = updated_at = None
    key = last_error = worker_id = error_type = traceback = _EMPTY_TEXT
    workflow_id = schedule_id = None
    pool = _STANDARD
    payload = result = checkpoint = trace = None
    while r.pos < stop:
        tag = _once(r, &seen_fields, 30)
        if tag == 0:
            return None
        if tag == 0x0A or tag == 0x12:  # 1: id, 2: tenant_id
            n = _length(r)
            if n != 36 or r.pos + n > stop:
                return None
            p = r.buf + r.pos
            if tag == 0x0A:
                task_id = read_uuid(p)
                if task_id is None:
                    return None
            elif seen.tenant_bytes is not None and memcmp(<const char*>seen.tenant_bytes, p, 36) == 0:
                tenant = seen.tenant
            else:
                tenant = read_uuid(p)
                if tenant is None:
                    return None
                seen.tenant_bytes = (<char*>p)[:36]
                seen.tenant = tenant
            r.pos += n
        elif tag == 0x1A:  # 3: type
            n = _length(r)
            if n < 0 or r.pos + n > stop:
                return None
            p = r.buf + r.pos
            if (
                seen.type_bytes is not None
                and len(seen.type_bytes) == n
                and memcmp(<const char*>seen.type_bytes, p, n) == 0
            ):
                type_text = seen.type_text
                r.pos += n
            else:
                try:
                    type_text = PyUnicode_DecodeUTF8(<const char*>p, n, NULL)
                except UnicodeDecodeError:
                    return None
                seen.type_bytes = (<char*>p)[:n]
                seen.type_text = type_text
                r.pos += n
        elif tag == 0x20:  # 4: state
            v = _varint(r)
            if r.bad or v > 0x7FFFFFFF:
                return None
            state = _STATES.get(<int>v)
            if state is None:
                return None  # unknown here: the general path names it
        elif tag == 0x2A or tag == 0x32 or tag == 154 or tag == 162:  # 5, 6, 19, 20
            n = _within(r, stop)
            when = read_time(r, r.pos + n, False) if n >= 0 else None
            if when is None:
                return None
            if tag == 0x2A:
                scheduled_at = when
            elif tag == 0x32:
                due_at = when
            elif tag == 154:
                created_at = when
            else:
                updated_at = when
        elif tag == 0x3A or tag == 0x72 or tag == 130:  # 7: key, 14: last_error, 16: worker
            n = _within(r, stop)
            text = read_text(r, n) if n >= 0 else None
            if text is None:
                return None
            if tag == 0x3A:
                key = text
            elif tag == 0x72:
                last_error = text
            else:
                worker_id = text
        elif tag == 218 or tag == 226:  # 27: last_error_type, 28: last_traceback
            n = _within(r, stop)
            text = read_text(r, n) if n >= 0 else None
            if text is None:
                return None
            if tag == 218:
                error_type = text
            else:
                traceback = text
        elif tag == 234 or tag == 242:  # 29: workflow_id, 30: schedule_id (may be empty)
            n = _length(r)
            if n < 0 or r.pos + n > stop:
                return None
            if n:
                if n != 36:
                    return None
                link = read_uuid(r.buf + r.pos)
                if link is None:
                    return None
                if tag == 234:
                    workflow_id = link
                else:
                    schedule_id = link
            r.pos += n
        elif tag == 0x40:  # 8: pool
            v = _varint(r)
            if r.bad or v > 0x7FFFFFFF:
                return None
            pool = _POOLS.get(<int>v, _STANDARD)
        elif tag == 0x48:  # 9: fencing_token, int64
            token = <int64_t>_varint(r)
        elif tag == 0x50 or tag == 0x58 or tag == 144:  # 10, 11, 18: uint32
            v = _varint(r)
            if r.bad or v > 0xFFFFFFFF:
                return None
            if tag == 0x50:
                retry_count = v
            elif tag == 0x58:
                max_retries = v
            else:
                shard_id = v
        elif tag == 136 or tag == 168:  # 17: cancel_requested, 21: strict_timing
            v = _varint(r)
            if r.bad or v > 1:
                return None
            if tag == 136:
                cancel = v == 1
            else:
                strict = v == 1
        elif tag == 178:  # 22: trace_context
            n = _within(r, stop)
            trace = read_trace(r, r.pos + n) if n >= 0 else False
            if trace is False:
                return None
        elif tag == 194 or tag == 202 or tag == 210:  # 24, 25, 26: JSON as bytes
            data = _bytes(r, stop)
            if data is None:
                return None
            if data:
                try:
                    value = _loads(data)
                except Exception:
                    return None  # the general path raises what it raises
            else:
                value = None
            if tag == 194:
                payload = value
            elif tag == 202:
                result = value
            else:
                checkpoint = value
        else:  # a Struct, a retry policy, or anything else
            return None
        if r.bad:
            return None
    if r.pos != stop:
        return None
    if task_id is None or tenant is None or state is None:
        return None  # unusual (the server always sets them): the general path
    if type_text is None:
        type_text = _EMPTY_TEXT
    epoch = None
    if scheduled_at is None or due_at is None or created_at is None or updated_at is None:
        epoch = utc_at(0, 0)
    t = _Task.__new__(_Task)
    names = _NAMES
    PyObject_GenericSetAttr(t, names[0], task_id)
    PyObject_GenericSetAttr(t, names[1], tenant)
    PyObject_GenericSetAttr(t, names[2], type_text)
    PyObject_GenericSetAttr(t, names[3], state)
    PyObject_GenericSetAttr(t, names[4], scheduled_at if scheduled_at is not None else epoch)
    PyObject_GenericSetAttr(t, names[5], due_at if due_at is not None else epoch)
    PyObject_GenericSetAttr(t, names[6], key)
    PyObject_GenericSetAttr(t, names[7], pool)
    PyObject_GenericSetAttr(t, names[8], token)
    PyObject_GenericSetAttr(t, names[9], <object>retry_count)
    PyObject_GenericSetAttr(t, names[10], <object>max_retries)
    PyObject_GenericSetAttr(t, names[11], payload if payload else {})
    PyObject_GenericSetAttr(t, names[12], result)
    PyObject_GenericSetAttr(t, names[13], last_error or None)
    PyObject_GenericSetAttr(t, names[14], checkpoint)
    PyObject_GenericSetAttr(t, names[15], worker_id or None)
    PyObject_GenericSetAttr(t, names[16], cancel)
    PyObject_GenericSetAttr(t, names[17], <object>shard_id)
    PyObject_GenericSetAttr(t, names[18], strict)
    PyObject_GenericSetAttr(t, names[19], trace)
    PyObject_GenericSetAttr(t, names[20], created_at if created_at is not None else epoch)
    PyObject_GenericSetAttr(t, names[21], updated_at if updated_at is not None else epoch)
    PyObject_GenericSetAttr(t, names[22], created)
    PyObject_GenericSetAttr(t, names[23], None)
    PyObject_GenericSetAttr(t, names[24], error_type or None)
    PyObject_GenericSetAttr(t, names[25], traceback or None)
    PyObject_GenericSetAttr(t, names[26], workflow_id)
    PyObject_GenericSetAttr(t, names[27], schedule_id)
    PyObject_GenericSetAttr(t, names[28], False)
    PyObject_GenericSetAttr(t, names[29], False)
    return t


cdef object _item(Reader* r, Py_ssize_t stop, _Seen seen):
    """One SubmitTaskResponse read up to ``stop`` as a Task, or None."""
    cdef uint64_t tag, v
    cdef Py_ssize_t n, task_at = -1, task_stop = -1
    cdef bint created = False, has_created = False
    while r.pos < stop:
        tag = _varint(r)
        if r.bad:
            return None
        if tag == 0x0A and task_at < 0:  # 1: task
            n = _length(r)
            if n < 0 or r.pos + n > stop:
                return None
            task_at = r.pos
            task_stop = r.pos + n
            r.pos = task_stop
        elif tag == 0x10 and not has_created:  # 2: created
            v = _varint(r)
            if r.bad or v > 1:
                return None
            created = v == 1
            has_created = True
        else:
            return None
    if r.pos != stop or task_at < 0:
        return None
    r.pos = task_at
    t = _task(r, task_stop, created, seen)
    r.pos = stop
    r.bad = False
    return t


def decode_submit_answer(bytes data, rest):
    """The ``Task`` of each result of a ``SubmitTasksResponse``, in order. The items
    this reader does not take are read by ``rest(items)`` (their serialised
    ``SubmitTaskResponse``s, in order; it returns their tasks), called once the whole
    message was walked. None when the message itself is malformed (the general path
    raises)."""
    cdef Reader r
    cdef uint64_t tag
    cdef Py_ssize_t n, stop, start, i
    cdef list out = []
    cdef list at = []
    cdef list items = []
    cdef _Seen seen = _Seen()
    r.buf = <const unsigned char*>(<char*>data)
    r.pos = 0
    r.end = len(data)
    r.bad = False
    while r.pos < r.end:
        tag = _varint(&r)
        if r.bad or tag != 0x0A:  # 1: results
            return None
        n = _length(&r)
        if n < 0:
            return None
        start = r.pos
        stop = start + n
        t = _item(&r, stop, seen)
        if t is None:
            at.append(len(out))
            items.append((<char*>(r.buf + start))[:n])
            r.pos = stop
        out.append(t)
    if items:
        for i, t in zip(at, rest(items), strict=True):
            out[i] = t
    return out
