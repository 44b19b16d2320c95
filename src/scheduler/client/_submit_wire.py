"""A ``SubmitTasks`` call on the wire: the client's submit hot path. The request's
bytes are written directly (:func:`encode_tasks`), and the answer is read natively
(:func:`decode_submit_answer`).

**The request.**

Building a 10,000-task request through the generated classes costs a Python call per
field of every task (``add()``, each setter, the payload Struct's every value) and
took about 100 ms with Struct payloads (45 ms with ``payload_json``); this module
writes the same protobuf wire format with a few concatenations per task:

- everything a batch's tasks usually share (type, pool, retries, timeout, jitter,
  trace context, retry policy) is encoded once per distinct combination by the
  generated class itself (:func:`~scheduler.client._convert.spec_into_proto`) and
  reused as bytes;
- per task only ``payload_json`` (orjson), ``scheduled_at`` (cached per instant: a
  batch repeats a few) and ``idempotency_key`` are appended.

Fields may come in any order in protobuf's wire format, so the bytes parse to exactly
the message ``spec_into_proto`` builds (a unit test compares the two).

**The answer.** Each of its ``Task`` messages read through the generated class and
``task_from_proto`` cost about 7.5 µs of the caller's CPU. The Cython reader of
``scheduler.client._tasks_c`` makes each ``Task`` straight from the bytes; an item it
does not take plainly (a ``Struct``, a retry policy, anything unusual) is read the
general way. Without the extension (not built, or ``TICKWHEEL_NO_EXTENSIONS=1``, read
by ``_wheel`` as for the timing wheel) every item is read the general way;
``ANSWER_DECODER`` says which is in use.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any, Literal

import orjson
from google.protobuf import timestamp_pb2

from scheduler import jsonbytes
from scheduler._native import extension
from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from scheduler._wellknown import timestamp_parts
from scheduler.client._convert import spec_into_proto, task_from_proto
from scheduler.client._types import Task, TaskSpec
from scheduler.wire import SMALL_VARINTS, shared_part, varint

_native, ANSWER_DECODER_ERROR = extension("scheduler.client._tasks_c")
"""The native reader, or None and why it is not in use."""
_decode_answer: Callable[[bytes, Callable[[list[bytes]], list[Task]]], list[Task] | None] | None = (
    _native.decode_submit_answer if _native is not None else None
)
ANSWER_DECODER: Literal["c", "python"] = "c" if _native is not None else "python"

_TASKS = b"\x0a"  # SubmitTasksRequest.tasks: field 1, length-delimited
_PAYLOAD_JSON = b"\x6a"  # TaskSpec.payload_json: field 13
_SCHEDULED_AT = b"\x1a"  # TaskSpec.scheduled_at: field 3
_IDEMPOTENCY_KEY = b"\x22"  # TaskSpec.idempotency_key: field 4


_PAYLOAD_HEAD = [_PAYLOAD_JSON + v for v in SMALL_VARINTS]
_TASK_HEAD = [_TASKS + v for v in SMALL_VARINTS]


@functools.lru_cache(maxsize=4096)
def _scheduled_at(dt: datetime) -> bytes:
    seconds, nanos = timestamp_parts(dt)
    ts = timestamp_pb2.Timestamp(seconds=seconds, nanos=nanos).SerializeToString()
    return _SCHEDULED_AT + varint(len(ts)) + ts


def _shared(spec: TaskSpec) -> bytes:
    """The bytes of every field but payload, scheduled_at and idempotency_key."""
    msg = pb.TaskSpec()
    spec_into_proto(
        TaskSpec(
            type=spec.type,
            pool=spec.pool,
            strict_timing=spec.strict_timing,
            jitter_mode=spec.jitter_mode,
            max_retries=spec.max_retries,
            timeout_s=spec.timeout_s,
            trace_context=spec.trace_context,
            retry_policy=spec.retry_policy,
            debounce=spec.debounce,
            throttle=spec.throttle,
            idempotency_ttl_s=spec.idempotency_ttl_s,
            idempotency_scope=spec.idempotency_scope,
            concurrency_key=spec.concurrency_key,
            rate_limit_key=spec.rate_limit_key,
        ),
        msg,
    )
    return msg.SerializeToString()


def encode_tasks(specs: Iterable[TaskSpec]) -> bytes:
    """The serialised ``SubmitTasksRequest`` of ``specs`` (TypeError/ValueError for a
    payload JSON cannot hold, as ``spec_into_proto``)."""
    shared: dict[Any, bytes] = {}
    dumps = orjson.dumps
    refuse, options = jsonbytes.refuse, jsonbytes.DUMPS_OPTIONS
    payload_head, task_head = _PAYLOAD_HEAD, _TASK_HEAD
    out: list[bytes] = []
    append = out.append
    last_key: Any = None
    last_body = b""
    join = b"".join
    for s in specs:
        trace = s.trace_context
        key: Any = (
            s.type,
            s.pool,
            s.strict_timing,
            s.jitter_mode,
            s.max_retries,
            s.timeout_s,
            (trace.get("traceparent"), trace.get("tracestate")) if trace else None,
            s.retry_policy,
            s.debounce,
            s.throttle,
            s.idempotency_ttl_s,
            s.idempotency_scope,
            s.concurrency_key,
            s.rate_limit_key,
        )
        # A batch's tasks mostly share these: the same objects compare by identity,
        # without hashing (an enum's hash is a Python call).
        if key == last_key:
            body = last_body
        else:
            body = last_body = shared_part(shared, key, _shared, s)
            last_key = key
        # One join per task: orjson's output (a buffer of its own size class) is copied
        # at once and freed for the next dumps; keeping 10,000 of them alive until the
        # final join cost 3x the whole encoding in fresh memory.
        payload = s.payload
        if payload:
            # jsonbytes.dumps inlined (a Python call per task is a quarter of the cost).
            try:
                p = dumps(payload, default=refuse, option=options)
            except orjson.JSONEncodeError as exc:
                raise TypeError(str(exc)) from None
            if b"null" in p:
                jsonbytes.dumps(payload)  # NaN and the infinities: ValueError there
            n = len(p)
            head = payload_head[n] if n < 4096 else _PAYLOAD_JSON + varint(n)
            size = len(body) + len(head) + n
        else:
            p = head = b""
            size = len(body)
        when = _scheduled_at(s.scheduled_at) if s.scheduled_at is not None else b""
        size += len(when)
        if s.idempotency_key:
            k = s.idempotency_key.encode()
            key_field = _IDEMPOTENCY_KEY + varint(len(k)) + k
            size += len(key_field)
        else:
            key_field = b""
        tag = task_head[size] if size < 4096 else _TASKS + varint(size)
        append(join((tag, body, head, p, when, key_field)))
    return join(out)


def _general(items: list[bytes]) -> list[Task]:
    """The tasks of serialised ``SubmitTaskResponse``s, read the general way: each
    parsed before any is converted, as the whole answer is."""
    parsed = [pb.SubmitTaskResponse.FromString(item) for item in items]
    return [
        task_from_proto(r.task, created=r.created, debounced=r.debounced, throttled=r.throttled)
        for r in parsed
    ]


def decode_submit_answer(data: bytes) -> list[Task]:
    """The tasks of a serialised ``SubmitTasksResponse``, in order (DecodeError for
    bytes that are not one, as the generated class)."""
    if _decode_answer is not None:
        tasks = _decode_answer(data, _general)
        if tasks is not None:
            return tasks
    answer = pb.SubmitTasksResponse.FromString(data)
    return [
        task_from_proto(r.task, created=r.created, debounced=r.debounced, throttled=r.throttled)
        for r in answer.results
    ]
