"""The worker's native reader of a push (``scheduler.worker._pushed_c``) makes the
tuples the general path makes: the generated class and ``_pushed.pushed_of``.

The reader may leave any message to the general path; what it must never do is read
a push differently, or take one the general path cannot read.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import pytest
from google.protobuf import timestamp_pb2
from hypothesis import example, given, settings
from hypothesis import strategies as st

import _wheel
from scheduler._errors import Unavailable
from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from scheduler.client import _convert as conv
from scheduler.engine import AssignmentBatch
from scheduler.server._worker import event_to_proto
from scheduler.types import RawJSON, TaskKey
from scheduler.worker import _pushed
from scheduler.worker._pushed import pushed_of, read_pushed, server_message
from tests.support.protos import messages, native_fields
from tests.support.records import assignment
from tests.unit.server.test_stream_wire import untraced

pytestmark = pytest.mark.skipif(
    _wheel.NO_EXTENSIONS, reason="TICKWHEEL_NO_EXTENSIONS is set: no native reader"
)
# Not built, or built for another interpreter: test_native_reader_is_built fails.

TP = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def _general(data: bytes) -> Any:
    """What the general path makes of ``data``: the tuples of a push, "other" for
    another kind of message, or the type of what it raises."""
    try:
        msg = server_message(data)
        if msg.WhichOneof("kind") != "assignments":
            return "other"
        return [
            pushed_of(a, uuid.UUID(a.task_id), conv.trace_from_proto(a.trace_context))
            for a in msg.assignments.tasks
        ]
    except Exception as exc:
        return type(exc)


def _check(data: bytes) -> list[Any] | None:
    """The reader's tuples for ``data``, checked against the general path's."""
    read = read_pushed(data)
    if read is None:
        return None
    want = _general(data)
    assert isinstance(want, list), want
    # The ref's bytes are kept as they came (the general path writes them anew): the
    # same TaskRef, byte for byte when the push was written canonically.
    assert [p[:14] for p in read] == [p[:14] for p in want]
    for got, general in zip(read, want, strict=True):
        assert pb.TaskRef.FromString(got[14]) == got[12] == pb.TaskRef.FromString(general[14])
        assert [type(v) for v in got] == [type(v) for v in general]
        assert got[12].SerializeToString() == general[12].SerializeToString()  # the ref
    return read


def test_native_reader_is_built() -> None:
    assert _pushed.PUSHED_DECODER == "c", _pushed.PUSHED_DECODER_ERROR
    assert _pushed.PUSHED_DECODER_ERROR is None


def test_what_the_server_pushes_takes_the_native_path() -> None:
    batch = [
        assignment(),
        assignment(payload=RawJSON('{"to": "ü", "n": [1, 2.5, null]}'), checkpoint={"step": 2}),
        assignment(fencing_token=2**40, attempt=3, max_retries=0, timeout_s=2.5),
        assignment(payload={}, key=TaskKey(uuid.uuid4(), datetime(1970, 1, 1, tzinfo=UTC))),
    ]
    with untraced():  # another test may have installed a recording tracer
        data = event_to_proto(AssignmentBatch(tuple(batch)), "w", json_bytes=True)
    assert isinstance(data, bytes)
    read = _check(data)
    assert read is not None
    assert [p[0] for p in read] == [a.key.id for a in batch]
    assert read[1][4] == {"to": "ü", "n": [1, 2.5, None]}
    assert read[1][6] == {"step": 2}
    assert read[3][4] == {}
    assert read[3][6] is None
    assert read[0][1] is read[1][1]  # one type: one str


def test_a_submitters_trace_context_is_read_natively() -> None:
    a = pb.Assignment(task_id=str(uuid.uuid4()), tenant_id=str(uuid.uuid4()), type="t")
    a.scheduled_at.seconds = 10
    a.trace_context.traceparent = TP
    a.trace_context.tracestate = "k=v"
    read = _check(pb.ServerMessage(assignments=pb.Assignments(tasks=[a])).SerializeToString())
    assert read is not None
    assert read[0][7] == {"traceparent": TP, "tracestate": "k=v"}


def test_other_messages_and_unusual_pushes_take_the_general_path() -> None:
    plain = pb.Assignment(task_id=str(uuid.uuid4()), type="t")
    plain.scheduled_at.seconds = 10
    cases = {
        "welcome": pb.ServerMessage(welcome=pb.Welcome(session_id="s")),
        "result": pb.ServerMessage(result=pb.Result(request_id=1)),
        "struct payload": pb.Assignment(payload={"fields": {}}),
        "dispatch trace": pb.Assignment(dispatch_trace_context=pb.TraceContext(traceparent=TP)),
        "upper-case id": pb.Assignment(task_id=str(uuid.uuid4()).upper()),
        "no scheduled_at": pb.Assignment(task_id=str(uuid.uuid4())),
    }
    for name, msg in cases.items():
        if isinstance(msg, pb.Assignment):
            a = pb.Assignment()
            a.CopyFrom(plain)
            a.MergeFrom(msg)
            if name == "no scheduled_at":
                a.ClearField("scheduled_at")
            msg = pb.ServerMessage(assignments=pb.Assignments(tasks=[a]))
        assert read_pushed(msg.SerializeToString()) is None, name


def test_a_ref_keeps_its_bytes_as_they_came() -> None:
    """A Timestamp written with an explicit zero field (valid, not canonical): the ref
    written back holds the same bytes, and reads as the same TaskRef."""
    task_id = str(uuid.uuid4()).encode()
    a = b"\x0a\x24" + task_id + b"\x42\x02\x08\x00"  # task_id; scheduled_at{seconds: 0}
    push = b"\x12" + bytes([len(a) + 2]) + b"\x0a" + bytes([len(a)]) + a
    read = _check(push)
    assert read is not None
    assert read[0][14] == b"\x0a\x24" + task_id + b"\x1a\x02\x08\x00"


def test_bytes_that_are_no_server_message_break_the_stream() -> None:
    with pytest.raises(Unavailable, match="not a ServerMessage"):
        server_message(b"\xff\xff")


def _ts(seconds: int, nanos: int) -> timestamp_pb2.Timestamp:
    return timestamp_pb2.Timestamp(seconds=seconds, nanos=nanos)


timestamps = st.one_of(
    st.none(),
    st.builds(_ts, st.integers(0, 2**34), st.integers(0, 999_999_999)),
    st.builds(
        _ts,
        st.integers(-(2**63), 2**63 - 1),
        st.one_of(st.integers(0, 999_999_999), st.integers(-(2**31), 2**31 - 1)),
    ),
)
ids = st.one_of(
    st.uuids().map(str), st.uuids().map(str), st.uuids().map(lambda u: str(u).upper()), st.text()
)
jsons = st.one_of(
    st.just(b""),
    st.just(b'{"a": [1, 2.5, null], "s": "\\u00fc"}'),
    st.sampled_from([b"[]", b"1", b"{"]),
    st.binary(max_size=8),
)


ASSIGNMENT = "tickwheel.v1.Assignment"
NATIVE_FIELDS = native_fields(
    _pushed._native.WIRE_FIELDS if _pushed._native else {ASSIGNMENT: ({}, ())}, ASSIGNMENT
)
"""The Assignment fields the reader declares it reads: the plain assignments set only
these."""
traces = st.builds(
    pb.TraceContext, traceparent=st.sampled_from(["", TP]), tracestate=st.text(max_size=8)
)
plain_times = st.builds(_ts, st.integers(0, 2**34), st.integers(0, 999_999_999))

# Every field of Assignment is drawn (tests/support/protos.py, from the descriptor); these
# are the values that reach the reader's edges.
assignments = messages(
    pb.Assignment,
    {
        "task_id": ids,
        "tenant_id": st.one_of(st.just(str(uuid.uuid4())), st.text(max_size=8)),
        "type": st.one_of(st.sampled_from(["t", "email"]), st.text(max_size=8)),
        "pool": st.integers(0, 3),
        "scheduled_at": timestamps,
        "due_at": timestamps,
        "lease_expires_at": timestamps,
        "timeout_s": st.floats(allow_nan=False),
        "payload_json": jsons,
        "checkpoint_json": jsons,
        "trace_context": traces,
    },
    rare=("payload", "checkpoint", "dispatch_trace_context"),
)
plain_assignments = messages(
    pb.Assignment,
    {
        "task_id": st.uuids().map(str),
        "tenant_id": st.just(str(uuid.uuid4())),
        "type": st.sampled_from(["t", "email"]),
        "pool": st.integers(0, 3),
        "scheduled_at": plain_times,
        "due_at": plain_times,
        "lease_expires_at": plain_times,
        "timeout_s": st.floats(allow_nan=False),
        "payload_json": st.sampled_from(
            [b"", b'{"i": 1}', b'{"a": [1, 2.5, null], "s": "\\u00fc"}']
        ),
        "checkpoint_json": st.sampled_from([b"", b'{"step": 2}']),
        "trace_context": traces,
    },
    only=NATIVE_FIELDS,
    always=("task_id", "tenant_id", "type", "scheduled_at"),
)
"""Assignments the reader takes: so that the tuples it makes are compared often."""
pushes = st.lists(st.one_of(plain_assignments, plain_assignments, assignments), max_size=4).map(
    lambda ts: pb.ServerMessage(assignments=pb.Assignments(tasks=ts)).SerializeToString()
)


@settings(max_examples=500, deadline=None)
@given(pushes, st.binary(max_size=8), st.integers(0, 60))
def test_reader_agrees_with_the_general_path(data: bytes, tail: bytes, cut: int) -> None:
    _check(data)
    _check(data + tail)
    _check(data[: max(0, len(data) - cut)])


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=400))
def test_reader_on_random_bytes(data: bytes) -> None:
    _check(data)


def _one_push(**fields: Any) -> bytes:
    """A push of one assignment with ``fields`` (new ids, type ``t``, an empty payload)."""
    task = pb.Assignment(
        task_id=str(uuid.uuid4()),
        tenant_id=str(uuid.uuid4()),
        type="t",
        payload_json=b"{}",
        **fields,
    )
    return pb.ServerMessage(assignments=pb.Assignments(tasks=[task])).SerializeToString()


@settings(max_examples=500, deadline=None)
@given(st.integers(-62_135_596_800, 253_402_300_799), st.integers(0, 999_999_999))
@example(-62_135_596_800, 0)  # 0001-01-01T00:00:00
@example(253_402_300_799, 999_999_999)  # 9999-12-31T23:59:59.999999999
@example(-1, 0)  # the second before the epoch
@example(951_782_400, 0)  # 2000-02-29
@example(-2_203_891_200, 0)  # 1900-03-01 (1900 is not a leap year)
@example(4_107_542_400, 1)  # 2100-03-01
def test_times_over_the_whole_range_are_read_as_the_general_path(seconds: int, nanos: int) -> None:
    """The reader makes a datetime from a Timestamp itself (no cache of instants): at
    every second of years 1-9999 it is the one the general path makes."""
    when = timestamp_pb2.Timestamp(seconds=seconds, nanos=nanos)
    data = _one_push(
        fencing_token=1, attempt=1, scheduled_at=when, due_at=when, lease_expires_at=when
    )
    read = _check(data)
    assert read is not None
    (p,) = read
    assert p[12].scheduled_at == when


@pytest.mark.parametrize("seconds", [-62_135_596_801, 253_402_300_800])
def test_a_time_outside_years_1_to_9999_is_left_to_the_general_path(seconds: int) -> None:
    data = _one_push(due_at=timestamp_pb2.Timestamp(seconds=seconds))
    assert read_pushed(data) is None
    assert _general(data) is OverflowError
