"""The client's native reader of a SubmitTasks answer (``scheduler.client._tasks_c``)
makes the tasks the general path makes: the generated class and ``task_from_proto``.

The reader may hand any item to the general path; what it must never do is read an
item differently, or return tasks where the general path raises.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from google.protobuf import timestamp_pb2
from hypothesis import given, settings
from hypothesis import strategies as st

import _wheel
from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from scheduler.client import _convert as cconv
from scheduler.client import _submit_wire
from scheduler.client._submit_wire import decode_submit_answer
from scheduler.server._submit_wire import encode_submit_response
from scheduler.states import TaskState
from scheduler.types import InsertResult, Pool, RetryPolicy
from tests.support.protos import messages, native_fields
from tests.support.records import NOW, task_record

pytestmark = pytest.mark.skipif(
    _wheel.NO_EXTENSIONS, reason="TICKWHEEL_NO_EXTENSIONS is set: no native reader"
)
# Not built, or built for another interpreter: test_native_reader_is_built fails.

TP = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
NOW_TENANT = task_record().tenant_id


def _general(data: bytes) -> Any:
    """The tasks the general path reads from ``data``, or the type of what it raises."""
    try:
        answer = pb.SubmitTasksResponse.FromString(data)
        return [cconv.task_from_proto(r.task, created=r.created) for r in answer.results]
    except Exception as exc:
        return type(exc)


def _native(data: bytes) -> Any:
    try:
        return decode_submit_answer(data)
    except Exception as exc:
        return type(exc)


def _check(data: bytes) -> Any:
    """The reader's tasks for ``data``, checked against the general path's."""
    got, want = _native(data), _general(data)
    if isinstance(want, type) and issubclass(want, Exception):
        assert got is want
        return None
    assert got == want
    for g, w in zip(got, want, strict=True):
        for name in ("retry_count", "max_retries", "shard_id", "fencing_token"):
            assert type(getattr(g, name)) is int
        assert type(g.payload) is type(w.payload)
    return got


def test_native_reader_is_built() -> None:
    assert _submit_wire.ANSWER_DECODER == "c", _submit_wire.ANSWER_DECODER_ERROR
    assert _submit_wire.ANSWER_DECODER_ERROR is None


# (record fields, created): the shapes a server answers with
SHAPES: list[tuple[dict[str, Any], bool]] = [
    ({}, True),
    ({"shard_id": 0, "idempotency_key": "order-ü-7"}, True),
    ({"due_at": NOW + timedelta(seconds=3, microseconds=1)}, True),
    ({"scheduled_at": datetime(1970, 1, 1, tzinfo=UTC)}, True),
    ({"trace_context": {"traceparent": TP, "tracestate": "k=v"}}, True),
    ({"retry_policy": RetryPolicy(initial_backoff_s=1.5, max_attempts=4)}, True),
    ({"strict_timing": True, "pool": Pool.CRITICAL, "type": "other"}, True),
    ({"pool": Pool.BULK, "max_retries": 0}, True),
    (
        {
            "status": TaskState.COMPLETED,
            "result_payload": {"ok": True},
            "checkpoint": {"step": 2},
            "last_error": "boom",
            "worker_id": "w1",
            "fencing_token": 3,
            "retry_count": 1,
            "cancel_requested": True,
            "idempotency_key": "again",
        },
        False,
    ),
    (
        {
            "status": TaskState.RETRYING,
            "last_error": "card declined",
            "last_error_type": "billing.CardDeclined",
            "last_traceback": "Traceback (most recent call last):\n  ...\nCardDeclined",
            "workflow_id": uuid.UUID("0190b5d2-7c1e-7a3b-9c4d-5e6f7a8b9c0d"),
            "schedule_id": uuid.UUID("0190b5d2-7c1e-7a3b-9c4d-5e6f7a8b9c0e"),
        },
        False,
    ),
]


@pytest.mark.parametrize("json_bytes", [True, False])
def test_every_shape_of_answer_reads_as_the_general_path_reads_it(json_bytes: bool) -> None:
    tenant = task_record().tenant_id
    results = [InsertResult(task_record(tenant_id=tenant, **kw), c) for kw, c in SHAPES] * 2
    sent = [b'{"a": 1}'] * len(results)
    got = _check(encode_submit_response(results, sent, json_bytes))
    assert got is not None
    assert len(got) == len(results)
    assert got[0].tenant_id is got[1].tenant_id  # one tenant: one UUID object


def test_a_big_answer_takes_the_native_path() -> None:
    tenant = task_record().tenant_id
    results = [InsertResult(task_record(tenant_id=tenant), True) for _ in range(3)]
    data = encode_submit_response(results, [b'{"i": 1}'] * 3, True)
    from scheduler.client import _tasks_c

    def rest(items: list[bytes]) -> Any:
        raise AssertionError("no item should take the general path")

    got = _tasks_c.decode_submit_answer(data, rest)
    assert got == _general(data)


def _ts(seconds: int, nanos: int) -> timestamp_pb2.Timestamp:
    return timestamp_pb2.Timestamp(seconds=seconds, nanos=nanos)


timestamps = st.one_of(
    st.none(),
    st.builds(
        _ts,
        st.one_of(st.integers(0, 253402300799), st.integers(-(2**63), 2**63 - 1)),
        st.one_of(st.integers(0, 999_999_999), st.integers(-(2**31), 2**31 - 1)),
    ),
)
ids = st.one_of(
    st.uuids().map(str),
    st.uuids().map(str),
    st.uuids().map(lambda u: str(u).upper()),
    st.text(max_size=40),
)
json_bytes = st.one_of(
    st.just(b""), st.just(b'{"a": [1, 2.5, null]}'), st.just(b"[]"), st.binary(max_size=12)
)


TASK = "tickwheel.v1.Task"
NATIVE_FIELDS = native_fields(
    _submit_wire._native.WIRE_FIELDS if _submit_wire._native else {TASK: ({}, ())}, TASK
)
"""The Task fields the reader declares it reads: the plain tasks set only these."""
traces = st.builds(
    pb.TraceContext, traceparent=st.sampled_from(["", TP]), tracestate=st.text(max_size=8)
)
plain_times = st.builds(_ts, st.integers(0, 2**34), st.integers(0, 999_999_999))
texts = st.one_of(st.just(""), st.text(max_size=8))

# Every field of Task is drawn (tests/support/protos.py, from the descriptor); these are
# the values that reach the reader's edges.
task_messages = messages(
    pb.Task,
    {
        "id": ids,
        "tenant_id": ids,
        "type": st.one_of(st.just("email"), st.text(max_size=10)),
        "state": st.one_of(st.integers(0, 10), st.integers(-(2**31), 2**31 - 1)),
        "scheduled_at": timestamps,
        "due_at": timestamps,
        "created_at": timestamps,
        "updated_at": timestamps,
        "idempotency_key": texts,
        "last_error": texts,
        "worker_id": texts,
        "pool": st.one_of(st.integers(0, 4), st.integers(-(2**31), 2**31 - 1)),
        "payload_json": json_bytes,
        "result_json": json_bytes,
        "checkpoint_json": json_bytes,
        "trace_context": traces,
        "last_error_type": texts,
        "last_traceback": texts,
        "workflow_id": st.one_of(st.just(""), ids),
        "schedule_id": st.one_of(st.just(""), ids),
    },
    rare=("payload", "result", "checkpoint", "retry_policy"),
)
plain_task_messages = messages(
    pb.Task,
    {
        "id": st.uuids().map(str),
        "tenant_id": st.sampled_from([str(NOW_TENANT)]),
        "type": st.sampled_from(["email", "report"]),
        "state": st.sampled_from(sorted(pb.TaskState.values())[1:]),
        "scheduled_at": plain_times,
        "due_at": plain_times,
        "created_at": plain_times,
        "updated_at": plain_times,
        "idempotency_key": texts,
        "last_error": texts,
        "worker_id": texts,
        "pool": st.integers(0, 3),
        "payload_json": st.sampled_from([b"", b'{"a": [1, 2.5, null]}', b'{"s": "\xc3\xbc"}']),
        "result_json": st.sampled_from([b"", b'{"a": [1, 2.5, null]}', b'{"s": "\xc3\xbc"}']),
        "checkpoint_json": st.sampled_from([b"", b'{"a": [1, 2.5, null]}', b'{"s": "\xc3\xbc"}']),
        "trace_context": traces,
        "last_error_type": texts,
        "last_traceback": texts,
        "workflow_id": st.one_of(st.just(""), st.uuids().map(str)),
        "schedule_id": st.one_of(st.just(""), st.uuids().map(str)),
    },
    only=NATIVE_FIELDS,
    always=("id", "tenant_id", "type", "state"),
)
tasks = st.builds(pb.SubmitTaskResponse, task=task_messages, created=st.booleans())
plain_tasks = st.builds(pb.SubmitTaskResponse, task=plain_task_messages, created=st.booleans())
"""Items the reader takes: so that the tasks it makes are compared often."""
answers = st.lists(st.one_of(plain_tasks, plain_tasks, tasks), max_size=4).map(
    lambda rs: pb.SubmitTasksResponse(results=rs).SerializeToString()
)


@settings(max_examples=500, deadline=None)
@given(answers, st.binary(max_size=8), st.integers(0, 60))
def test_reader_agrees_with_the_general_path(data: bytes, tail: bytes, cut: int) -> None:
    _check(data)
    _check(data + tail)
    _check(data[: max(0, len(data) - cut)])


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=400))
def test_reader_on_random_bytes(data: bytes) -> None:
    _check(data)
