"""The native ``SubmitTasks`` reader (``scheduler.server._submit_c``) agrees with the
general path on every request it takes.

The reader may decline any request (the general path then decides); what it must
never do is accept a request differently: other specs, other payload echoes, or a
request the general path refuses.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

import pytest
from google.protobuf import struct_pb2, timestamp_pb2
from hypothesis import given, settings
from hypothesis import strategies as st

import _wheel
from scheduler._errors import TickwheelError
from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from scheduler.client import Pool as ClientPool
from scheduler.client import TaskSpec
from scheduler.client._submit_wire import encode_tasks
from scheduler.engine import SubmitSpec
from scheduler.jitter import JitterMode
from scheduler.limits import (
    MAX_IDEMPOTENCY_KEY_CHARS,
    MAX_RETRIES,
    MAX_SUBMIT_BATCH,
    MAX_TIMEOUT_S,
    MAX_TIMESTAMP_SECONDS,
    MAX_TYPE_CHARS,
    MIN_TIMESTAMP_SECONDS,
)
from scheduler.server import _convert as conv
from scheduler.server import _submit_wire
from scheduler.server._decode import decode
from scheduler.server._submit_wire import encode_submit_response, read_submit
from scheduler.types import InsertResult, RawJSON
from tests.support.protos import messages, native_fields
from tests.support.records import task_record

pytestmark = pytest.mark.skipif(
    _wheel.NO_EXTENSIONS, reason="TICKWHEEL_NO_EXTENSIONS is set: no native reader"
)
# Not built, or built for another interpreter: test_native_reader_is_built fails.

LIMIT = 1024
TRACE = {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "tracestate": ""}
WHEN = datetime(2030, 1, 1, 12, 0, 0, 123456, tzinfo=UTC)


def _general(data: bytes, trace: Any = None) -> Any:
    """What the general path makes of ``data``: (specs, echoes), or a text saying why
    it refuses (the checks of ``SchedulerService.SubmitTasks``, in its order)."""
    try:
        given = decode(pb.SubmitTasksRequest, data).tasks
    except TickwheelError:
        return "undecodable"
    if not given or len(given) > MAX_SUBMIT_BATCH:
        return "count"
    try:
        specs = [
            conv.spec_from_proto(t, f"tasks[{i}]", max_payload_bytes=LIMIT, default_trace=trace)
            for i, t in enumerate(given)
        ]
    except TickwheelError as exc:
        return f"refused: {getattr(exc, 'field', '')}"
    return specs, [t.payload_json or t.payload for t in given]


def _check(data: bytes, trace: Any = None) -> list[SubmitSpec] | None:
    """The native reader's answer for ``data``, checked against the general path."""
    read = read_submit(data, LIMIT, trace)
    if read is None:
        return None
    specs, echoes = read
    general = _general(data, trace)
    assert isinstance(general, tuple), general  # never accepts what the general path refuses
    want_specs, want_echoes = general
    assert specs == want_specs
    for got, want in zip(specs, want_specs, strict=True):
        assert type(got.payload) is type(want.payload)
        assert type(got.max_retries) is int
        assert type(got.timeout_s) is float
        assert math.copysign(1, got.timeout_s) == math.copysign(1, want.timeout_s)
        assert got.trace_context is trace
    assert [type(e) for e in echoes] == [type(e) for e in want_echoes]
    assert echoes == want_echoes
    return specs


def _task(**kw: Any) -> bytes:
    return pb.SubmitTasksRequest(tasks=[pb.TaskSpec(**{"type": "t", **kw})]).SerializeToString()


def _ts(seconds: int, nanos: int = 0) -> timestamp_pb2.Timestamp:
    return timestamp_pb2.Timestamp(seconds=seconds, nanos=nanos)


def test_native_reader_is_built() -> None:
    assert _submit_wire.SUBMIT_DECODER == "c", _submit_wire.SUBMIT_DECODER_ERROR
    assert _submit_wire.SUBMIT_DECODER_ERROR is None


def test_what_the_client_sdk_sends_takes_the_native_path() -> None:
    specs = [
        TaskSpec(type="email", payload={"to": "a@b.c", "n": [1, 2.5, None]}),
        TaskSpec(type="email", payload={}, scheduled_at=WHEN, idempotency_key="order-ü-7"),
        TaskSpec(type="report", pool=ClientPool.CRITICAL, strict_timing=True, timeout_s=2.5),
        TaskSpec(type="report", pool=ClientPool.BULK, jitter_mode=JitterMode.SYMMETRIC),
        TaskSpec(type="x", max_retries=0, jitter_mode=JitterMode.LATE_ONLY),
        TaskSpec(type="x", max_retries=MAX_RETRIES, timeout_s=float(MAX_TIMEOUT_S)),
    ]
    read = _check(encode_tasks(specs), TRACE)
    assert read is not None
    assert [s.type for s in read] == ["email", "email", "report", "report", "x", "x"]
    assert read[0].payload == RawJSON('{"to":"a@b.c","n":[1,2.5,null]}')
    assert read[1].payload == {}
    assert read[1].idempotency_key == "order-ü-7"
    assert read[1].scheduled_at == WHEN
    assert read[2].jitter_mode is JitterMode.NONE  # strict timing
    assert read[4].max_retries == 0
    assert read[5].max_retries == MAX_RETRIES
    # A batch's tasks of one type share one str.
    assert read[0].type is read[1].type


def test_the_generated_class_and_its_defaults_take_the_native_path() -> None:
    assert _check(_task()) is not None
    assert _check(_task(payload_json=b"{}", no_retries=True)) is not None
    assert _check(_task(scheduled_at=_ts(MIN_TIMESTAMP_SECONDS))) is not None
    assert _check(_task(scheduled_at=_ts(MAX_TIMESTAMP_SECONDS - 1, 999_999_999))) is not None
    assert _check(_task(type="a" * MAX_TYPE_CHARS)) is not None
    assert _check(_task(idempotency_key="ü" * MAX_IDEMPOTENCY_KEY_CHARS)) is not None
    assert _check(_task(timeout_s=-0.0)) is not None
    assert _check(_task(payload_json=b'{"a": "' + b"x" * (LIMIT - 9) + b'"}')) is not None
    many = pb.SubmitTasksRequest(tasks=[pb.TaskSpec(type="t")] * MAX_SUBMIT_BATCH)
    assert len(_check(many.SerializeToString()) or []) == MAX_SUBMIT_BATCH


REFUSED_OR_GENERAL = {
    # the general path's own fields
    "struct payload": _task(
        payload=struct_pb2.Struct(fields={"a": struct_pb2.Value(number_value=1)})
    ),
    "trace context": _task(trace_context=pb.TraceContext(traceparent=TRACE["traceparent"])),
    "retry policy": _task(retry_policy=pb.RetryPolicy(max_attempts=2)),
    # refusals, each named by the general path
    "no type": pb.SubmitTasksRequest(tasks=[pb.TaskSpec()]).SerializeToString(),
    "type with a space": _task(type="a b"),
    "type too long": _task(type="a" * (MAX_TYPE_CHARS + 1)),
    "non-ASCII type": _task(type="é"),
    "key too long": _task(idempotency_key="k" * (MAX_IDEMPOTENCY_KEY_CHARS + 1)),
    "unknown pool": _task(pool=9),
    "unknown jitter": _task(jitter_mode=9),
    "too many retries": _task(max_retries=MAX_RETRIES + 1),
    "retries and no retries": _task(max_retries=2, no_retries=True),
    "negative timeout": _task(timeout_s=-1.0),
    "NaN timeout": _task(timeout_s=float("nan")),
    "infinite timeout": _task(timeout_s=float("inf")),
    "timeout too long": _task(timeout_s=MAX_TIMEOUT_S + 1.0),
    "time before the range": _task(scheduled_at=_ts(MIN_TIMESTAMP_SECONDS - 1)),
    "time after the range": _task(scheduled_at=_ts(MAX_TIMESTAMP_SECONDS)),
    "bad nanos": _task(scheduled_at=_ts(0, -1)),
    "JSON not an object": _task(payload_json=b"[1]"),
    "JSON not JSON": _task(payload_json=b"{"),
    "JSON with NUL": _task(payload_json=b'{"a": "\\u0000"}'),
    "JSON too deep": _task(payload_json=b'{"a":' * 40 + b"1" + b"}" * 40),
    "JSON over the limit": _task(payload_json=b'{"a": "' + b"x" * LIMIT + b'"}'),
    "no task": b"",
    "too many tasks": pb.SubmitTasksRequest(
        tasks=[pb.TaskSpec(type="t")] * (MAX_SUBMIT_BATCH + 1)
    ).SerializeToString(),
    # well-formed and accepted by the general path, yet not plain enough for the reader:
    # a field this version does not know (20, a varint), a field given twice (the last
    # wins), a bool written as 2 (any non-zero is true)
    "unknown field": bytes([0x0A, 0x06, 0x0A, 0x01, ord("t"), 0xA0, 0x01, 0x01]),
    "repeated type": bytes([0x0A, 0x06, 0x0A, 0x01, ord("a"), 0x0A, 0x01, ord("b")]),
    "non-canonical bool": bytes([0x0A, 0x05, 0x0A, 0x01, ord("t"), 0x30, 0x02]),
    "truncated": _task(payload_json=b'{"a": 1}')[:-2],
}
ACCEPTED_THERE = {
    "struct payload",
    "trace context",
    "retry policy",
    "unknown field",
    "repeated type",
    "non-canonical bool",
}


@pytest.mark.parametrize("name", sorted(REFUSED_OR_GENERAL))
def test_the_reader_leaves_to_the_general_path(name: str) -> None:
    data = REFUSED_OR_GENERAL[name]
    assert read_submit(data, LIMIT, None) is None
    assert isinstance(_general(data), tuple) == (name in ACCEPTED_THERE), _general(data)


def test_an_answer_from_native_echoes_is_the_general_answer() -> None:
    specs = [TaskSpec(type="t", payload={"i": i}) for i in range(3)] + [TaskSpec(type="t")]
    data = encode_tasks(specs)
    read = read_submit(data, LIMIT, None)
    assert read is not None
    general = _general(data)
    assert isinstance(general, tuple)
    results = [InsertResult(task_record(payload=s.payload), True) for s in read[0]]
    for json_bytes in (True, False):
        assert encode_submit_response(results, read[1], json_bytes) == encode_submit_response(
            results, general[1], json_bytes
        )


# -- generated requests ----------------------------------------------------------------

timestamps = st.one_of(
    st.none(),
    st.builds(
        _ts,
        st.one_of(
            st.sampled_from(
                [0, MIN_TIMESTAMP_SECONDS, MAX_TIMESTAMP_SECONDS - 1, MAX_TIMESTAMP_SECONDS, -1]
            ),
            st.integers(-(2**63), 2**63 - 1),
            st.integers(MIN_TIMESTAMP_SECONDS, MAX_TIMESTAMP_SECONDS - 1),
        ),
        st.one_of(
            st.sampled_from([0, 999_999_999, 1_000_000_000, -1]),
            st.integers(-(2**31), 2**31 - 1),
        ),
    ),
)
payloads = st.one_of(
    st.just(b""),
    st.just(b'{"ok": true, "n": [1, 2]}'),
    st.sampled_from([b"[]", b"1", b"{", b'{"a": "\\u0000"}', b"\xff", b'{"a":' * 40]),
    st.binary(max_size=30),
    st.builds(lambda n: b'{"s": "' + b"x" * n + b'"}', st.integers(LIMIT - 20, LIMIT + 5)),
)


_NATIVE = _submit_wire._native
TASK_SPEC = "tickwheel.v1.TaskSpec"
NATIVE_FIELDS = native_fields(_NATIVE.WIRE_FIELDS if _NATIVE else {TASK_SPEC: ({}, ())}, TASK_SPEC)
"""The TaskSpec fields the reader declares it reads (the others send it to the general
path): the plain specs set only these."""

# Every field of TaskSpec is drawn (tests/support/protos.py, from the descriptor); these
# are the values that reach the reader's edges: limits, unknown enum numbers, bad JSON.
specs = messages(
    pb.TaskSpec,
    {
        "type": st.one_of(
            st.sampled_from(["t", "email", "a" * MAX_TYPE_CHARS]), st.text(max_size=70)
        ),
        "payload_json": st.one_of(payloads, st.just(b'{"i": 1}')),
        "scheduled_at": timestamps,
        "idempotency_key": st.one_of(st.just(""), st.text(max_size=MAX_IDEMPOTENCY_KEY_CHARS + 2)),
        "pool": st.one_of(st.integers(0, 3), st.integers(-5, 2**31 - 1)),
        "jitter_mode": st.one_of(st.integers(0, 3), st.integers(-5, 2**31 - 1)),
        "max_retries": st.one_of(st.integers(0, MAX_RETRIES + 1), st.integers(0, 2**32 - 1)),
        "timeout_s": st.one_of(
            st.just(0.0),
            st.floats(allow_nan=True, allow_infinity=True),
            st.floats(0, MAX_TIMEOUT_S + 1),
        ),
    },
    rare=("payload", "trace_context", "retry_policy"),
)
plain_specs = messages(
    pb.TaskSpec,
    {
        "type": st.sampled_from(["t", "email", "a" * MAX_TYPE_CHARS]),
        "payload_json": st.sampled_from(
            [b"", b'{"i": 1}', b'{"s": "\xc3\xbc", "l": [1, 2.5, null]}']
        ),
        "scheduled_at": st.builds(
            _ts,
            st.integers(MIN_TIMESTAMP_SECONDS, MAX_TIMESTAMP_SECONDS - 1),
            st.integers(0, 999_999_999),
        ),
        "idempotency_key": st.one_of(st.just(""), st.text(max_size=MAX_IDEMPOTENCY_KEY_CHARS)),
        "pool": st.integers(0, 3),
        "jitter_mode": st.integers(0, 3),
        "max_retries": st.integers(0, MAX_RETRIES),
        "no_retries": st.just(False),
        "timeout_s": st.floats(0, MAX_TIMEOUT_S),
    },
    only=NATIVE_FIELDS,
    always=("type",),
)
"""Specs the reader takes (unless a text holds what the wire cannot): so that the
specs it makes are compared often."""
requests = st.lists(st.one_of(plain_specs, plain_specs, specs), min_size=0, max_size=4).map(
    lambda ts: pb.SubmitTasksRequest(tasks=ts).SerializeToString()
)


@settings(max_examples=500, deadline=None)
@given(requests, st.binary(max_size=8), st.integers(0, 60), st.sampled_from([None, TRACE]))
def test_reader_agrees_with_the_general_path(
    data: bytes, tail: bytes, cut: int, trace: Any
) -> None:
    _check(data, trace)
    _check(data + tail, trace)
    _check(data[: max(0, len(data) - cut)], trace)


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=400))
def test_reader_on_random_bytes(data: bytes) -> None:
    _check(data)


def test_a_spec_read_natively_is_a_submit_spec() -> None:
    read = read_submit(_task(payload_json=b'{"a": 1}'), LIMIT, None)
    assert read is not None
    (spec,), _ = read
    assert type(spec) is SubmitSpec
    assert spec == SubmitSpec(type="t", payload=RawJSON('{"a": 1}'))
