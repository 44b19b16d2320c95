"""The worker stream's native reader (``scheduler.server._stream_c``) agrees with the
general decoder on every message it takes, and Results and Assignments written as
bytes are the bytes the generated classes write.

The reader may decline any message (the general path then decides); what it must
never do is accept a message differently: other items, another kind or request id,
or a message the general path refuses.
"""

from __future__ import annotations

import contextlib
import functools
import uuid
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta, timezone
from typing import Any
from unittest import mock

import pytest
from google.protobuf import timestamp_pb2
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import _wheel
from scheduler._errors import InvalidArgument, TickwheelError
from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from scheduler.client import _convert as cconv
from scheduler.engine import AssignmentBatch
from scheduler.limits import MAX_RESULT_BYTES, MAX_TIMESTAMP_SECONDS, MIN_TIMESTAMP_SECONDS
from scheduler.server import _convert as conv
from scheduler.server import _stream_wire, _worker
from scheduler.server._decode import decode
from scheduler.server._stream_wire import (
    Writes,
    decode_worker_message,
    encode_assignments,
    encode_result,
)
from scheduler.server._worker import _traced_assignment, event_to_proto
from scheduler.server._worker_messages import _parse, handle_messages
from scheduler.types import (
    Assignment,
    Completion,
    FencedWrite,
    Outcome,
    Pool,
    RawJSON,
    TaskKey,
)
from tests.support.protos import messages as proto_messages
from tests.support.records import assignment

pytestmark = pytest.mark.skipif(
    _wheel.NO_EXTENSIONS, reason="TICKWHEEL_NO_EXTENSIONS is set: no native reader"
)
# Not built, or built for another interpreter: test_native_reader_is_built fails.

NOW = datetime(2030, 1, 1, 12, 0, 0, 123456, tzinfo=UTC)
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
KINDS = ("ack", "heartbeat", "completions")


def _general(data: bytes) -> Any:
    """What the general path makes of ``data``: (request_id, kind, items) for a
    batchable message it accepts, else a tag saying why not."""
    try:
        msg = decode(pb.WorkerMessage, data)
    except InvalidArgument:
        return "undecodable"
    kind = msg.WhichOneof("kind")
    if kind not in KINDS:
        return ("other kind", kind)
    try:
        return (msg.request_id, kind, _parse(msg, kind))
    except TickwheelError as exc:
        return ("refused", getattr(exc, "field", ""))


def _check(data: bytes) -> Writes | None:
    """The native reader's answer for ``data``, checked against the general path."""
    read = decode_worker_message(data) if _fast_takes(data) else None
    if read is None:
        return None
    assert isinstance(read, Writes)
    general = _general(data)
    assert general == (read.request_id, read.kind, read.items)
    for item, general_item in zip(read.items, general[2], strict=True):
        assert type(item) is type(general_item)
        assert type(item.key) is TaskKey
        assert isinstance(item.key.id, uuid.UUID)
        assert type(item.key.id) is type(general_item.key.id)
        assert item.key.id.is_safe == general_item.key.id.is_safe
        if isinstance(item, Completion):
            assert type(item.result) is type(general_item.result)
    assert read.ids == [str(i.key.id).encode() for i in read.items]
    return read


def _fast_takes(data: bytes) -> bool:
    from scheduler.server import _stream_c

    return _stream_c.decode_writes(data) is not None


def _ref(task_id: str, token: int = 1, ts: timestamp_pb2.Timestamp | None = None) -> pb.TaskRef:
    """A ref due at NOW (or ``ts``; None and no ``ts``: without ``scheduled_at``)."""
    ref = pb.TaskRef(task_id=task_id, fencing_token=token)
    ref.scheduled_at.CopyFrom(cconv.to_timestamp(NOW) if ts is None else ts)
    return ref


def test_native_reader_is_built() -> None:
    assert _stream_wire.STREAM_DECODER == "c", _stream_wire.STREAM_DECODER_ERROR
    assert _stream_wire.STREAM_DECODER_ERROR is None


def test_what_the_worker_sdk_sends_takes_the_native_path() -> None:
    ids = [uuid.uuid4() for _ in range(3)]
    refs = [_ref(str(i), token=k + 1) for k, i in enumerate(ids)]
    ack = pb.WorkerMessage(request_id=9, ack=pb.Ack(tasks=refs))
    beat = pb.WorkerMessage(heartbeat=pb.Heartbeat(tasks=refs))
    done = pb.WorkerMessage(
        request_id=2**64 - 1,
        completions=pb.Completions(
            items=[
                pb.Completion(task=refs[0], result_json=b'{"ok": true}'),
                pb.Completion(task=refs[1]),
                pb.Completion(task=refs[2], result_json=b"{}"),
            ]
        ),
    )
    empty = pb.WorkerMessage(request_id=3, ack=pb.Ack())
    for msg in (ack, beat, done, empty):
        read = _check(msg.SerializeToString())
        assert read is not None, msg
    read = _check(ack.SerializeToString())
    assert read is not None
    assert read.items == [FencedWrite(key=TaskKey(i, NOW), token=k + 1) for k, i in enumerate(ids)]
    read = _check(done.SerializeToString())
    assert read is not None
    assert [c.result for c in read.items] == ['{"ok": true}', {}, "{}"]
    assert all(c.acked_at is None for c in read.items)


@pytest.mark.parametrize(
    "msg",
    [
        # another kind, or none
        pb.WorkerMessage(credit=pb.Credit(slots=1)),
        pb.WorkerMessage(request_id=1),
        pb.WorkerMessage(completion=pb.Completion(task=_ref(str(uuid.uuid4())))),
        # an id the general path accepts in another form, or refuses
        pb.WorkerMessage(ack=pb.Ack(tasks=[_ref(str(uuid.uuid4()).upper())])),
        pb.WorkerMessage(ack=pb.Ack(tasks=[_ref("")])),
        pb.WorkerMessage(ack=pb.Ack(tasks=[_ref("x" * 36)])),
        # a token or a time out of range, a time missing
        pb.WorkerMessage(ack=pb.Ack(tasks=[_ref(str(uuid.uuid4()), token=0)])),
        pb.WorkerMessage(ack=pb.Ack(tasks=[_ref(str(uuid.uuid4()), token=-1)])),
        pb.WorkerMessage(
            ack=pb.Ack(tasks=[pb.TaskRef(task_id=str(uuid.uuid4()), fencing_token=1)])
        ),
        # a Struct result, JSON bytes that are no object, or over the limit
        pb.WorkerMessage(
            completions=pb.Completions(
                items=[pb.Completion(task=_ref(str(uuid.uuid4())), result={"fields": {}})]
            )
        ),
        pb.WorkerMessage(
            completions=pb.Completions(
                items=[pb.Completion(task=_ref(str(uuid.uuid4())), result_json=b"[1]")]
            )
        ),
        pb.WorkerMessage(
            completions=pb.Completions(
                items=[
                    pb.Completion(
                        task=_ref(str(uuid.uuid4())),
                        result_json=b'{"a":"' + b"x" * MAX_RESULT_BYTES + b'"}',
                    )
                ]
            )
        ),
    ],
)
def test_the_general_path_decides_what_the_reader_does_not_take(msg: pb.WorkerMessage) -> None:
    data = msg.SerializeToString()
    assert not _fast_takes(data)
    assert isinstance(decode_worker_message(data), pb.WorkerMessage)


def test_unknown_and_repeated_fields_go_the_general_way() -> None:
    ref = _ref(str(uuid.uuid4())).SerializeToString()
    good = pb.WorkerMessage(request_id=4, ack=pb.Ack(tasks=[_ref(str(uuid.uuid4()))]))
    data = good.SerializeToString()
    assert _fast_takes(data)
    for extra in (
        b"\x08\x05",  # request_id twice (the last one wins in protobuf)
        b"\x22\x00",  # a second ack: merged in protobuf
        b"\x62\x00",  # completions as well: the last oneof field wins
        b"\xf8\x01\x01",  # an unknown field
    ):
        assert not _fast_takes(data + extra)
        _general(data + extra)  # decides, whatever it decides
    # a TaskRef with its id twice, or an unknown field inside it
    for inner in (ref + b"\x0a\x00", ref + b"\x20\x01"):
        msg = b"\x22" + bytes([len(inner) + 2]) + b"\x0a" + bytes([len(inner)]) + inner
        assert not _fast_takes(msg)


timestamps = st.one_of(
    st.none(),
    st.builds(
        lambda s, n: timestamp_pb2.Timestamp(seconds=s, nanos=n),
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
            st.integers(0, 999_999_999),
        ),
    ),
)


task_ids = st.one_of(
    st.uuids().map(str),
    st.uuids().map(lambda u: str(u).upper()),
    st.uuids().map(lambda u: u.hex),
    st.text(max_size=40),
    st.just(""),
)
# TaskRef and Completion are drawn field by field from their descriptors
# (tests/support/protos.py): a field added to either is drawn here too.
refs = proto_messages(
    pb.TaskRef,
    {
        "task_id": task_ids,
        "fencing_token": st.one_of(
            st.integers(-(2**63), 2**63 - 1), st.integers(1, 100), st.just(0)
        ),
        "scheduled_at": timestamps,
    },
)
valid_refs = proto_messages(
    pb.TaskRef,
    {
        "task_id": st.uuids().map(str),
        "fencing_token": st.integers(1, 2**63 - 1),
        "scheduled_at": st.builds(
            lambda s, n: timestamp_pb2.Timestamp(seconds=s, nanos=n),
            st.integers(MIN_TIMESTAMP_SECONDS, MAX_TIMESTAMP_SECONDS - 1),
            st.integers(0, 999_999_999),
        ),
    },
    always=("task_id", "fencing_token", "scheduled_at"),
)
some_refs = st.one_of(valid_refs, valid_refs, refs)
"""Mostly refs the reader takes, so that the items it makes are compared often."""
results = st.one_of(
    st.just(b""),
    st.just(b'{"ok": true}'),
    st.sampled_from([b"[]", b"1", b"{", b'{"a": "\\u0000"}', b"\xff", b'{"a":' * 40]),
    st.binary(max_size=30),
)
completions = proto_messages(
    pb.Completion,
    {"task": some_refs, "result_json": st.one_of(st.just(b'{"n": 1}'), results)},
    rare=("result",),
    always=("task",),
)
messages = st.one_of(
    st.builds(
        lambda rid, rs: pb.WorkerMessage(request_id=rid, ack=pb.Ack(tasks=rs)),
        st.integers(0, 2**64 - 1),
        st.lists(some_refs, max_size=4),
    ),
    st.builds(
        lambda rid, rs: pb.WorkerMessage(request_id=rid, heartbeat=pb.Heartbeat(tasks=rs)),
        st.integers(0, 2**64 - 1),
        st.lists(some_refs, max_size=4),
    ),
    st.builds(
        lambda rid, cs: pb.WorkerMessage(request_id=rid, completions=pb.Completions(items=cs)),
        st.integers(0, 2**64 - 1),
        st.lists(completions, max_size=4),
    ),
)


@settings(max_examples=500, deadline=None)
@given(messages, st.binary(max_size=6), st.integers(0, 40))
def test_the_reader_agrees_with_the_general_path(
    msg: pb.WorkerMessage, tail: bytes, cut: int
) -> None:
    data = msg.SerializeToString()
    _check(data)
    _check(data + tail)  # unknown, repeated or broken fields after it
    _check(data[: max(0, len(data) - cut)])  # cut short


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=200))
def test_random_bytes_are_taken_only_as_the_general_path_takes_them(data: bytes) -> None:
    _check(data)
    with contextlib.suppress(InvalidArgument):  # the general path's answer to non-messages
        decode_worker_message(data)


@pytest.mark.parametrize("request_id", [0, 1, 127, 128, 2**32, 2**64 - 1])
def test_results_as_bytes_parse_to_the_generated_message(request_id: int) -> None:
    ids = [uuid.uuid4() for _ in range(4)]
    outcomes = [Outcome.OK, Outcome.STALE, Outcome.NOT_FOUND, Outcome.OK]
    data = encode_result(request_id, [str(i).encode() for i in ids], outcomes)
    reasons = {Outcome.OK: "", Outcome.STALE: "stale_fencing_token", Outcome.NOT_FOUND: "not_found"}
    built = pb.ServerMessage(
        result=pb.Result(
            request_id=request_id,
            results=[
                pb.TaskResult(task_id=str(i), ok=o is Outcome.OK, reason=reasons[o])
                for i, o in zip(ids, outcomes, strict=True)
            ],
        )
    )
    assert pb.ServerMessage.FromString(data) == built
    assert data == built.SerializeToString()  # the same bytes, field for field
    empty = encode_result(request_id, [], [])
    assert empty == pb.ServerMessage(result=pb.Result(request_id=request_id)).SerializeToString()
    with pytest.raises(ValueError, match="2 ids, 1 outcomes"):
        encode_result(request_id, [b"a" * 36, b"b" * 36], [Outcome.OK])


class _Session:
    def __init__(self) -> None:
        self.calls: list[tuple[str, list[Any]]] = []

    async def ack(self, items: Sequence[Any]) -> list[Outcome]:
        self.calls.append(("ack", list(items)))
        return [Outcome.OK, Outcome.STALE][: len(items)]

    async def complete(self, items: Sequence[Any]) -> list[Outcome]:
        self.calls.append(("complete", list(items)))
        return [Outcome.NOT_FOUND, Outcome.OK][: len(items)]


@pytest.mark.parametrize("kind", ["ack", "completions"])
async def test_a_read_message_is_applied_and_answered_as_the_generated_one(kind: str) -> None:
    refs = [_ref(str(uuid.uuid4()), token=3) for _ in range(2)]
    msgs = [
        pb.WorkerMessage(request_id=5, ack=pb.Ack(tasks=refs))
        if kind == "ack"
        else pb.WorkerMessage(
            request_id=5,
            completions=pb.Completions(
                items=[pb.Completion(task=r, result_json=b'{"n": 1}') for r in refs]
            ),
        ),
        pb.WorkerMessage(request_id=6, **{kind: type(getattr(pb.WorkerMessage(), kind))()}),
    ]
    read = [decode_worker_message(m.SerializeToString()) for m in msgs]
    assert all(isinstance(m, Writes) for m in read)
    fast, general = _Session(), _Session()
    fast_replies = await handle_messages(fast, read)  # type: ignore[arg-type]
    general_replies = await handle_messages(general, msgs)  # type: ignore[arg-type]
    assert fast.calls == general.calls
    assert len(fast.calls) == 1
    assert fast_replies == general_replies
    answer = pb.ServerMessage.FromString(fast_replies[0])  # type: ignore[arg-type]
    assert [(r.task_id, r.ok) for r in answer.result.results] == [
        (ref.task_id, ok)
        for ref, ok in zip(refs, [True, False] if kind == "ack" else [False, True], strict=True)
    ]


# -- assignments, written --------------------------------------------------------------

TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
instants = st.one_of(
    st.integers(-(10**6), 10**15).map(lambda us: EPOCH + timedelta(microseconds=us)),
    st.sampled_from([EPOCH, NOW, datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)]),
    # The whole range, and an offset other than UTC (written by the general path).
    st.datetimes(
        min_value=datetime(1, 1, 2),
        max_value=datetime(9999, 12, 30),
        timezones=st.sampled_from([UTC, timezone(timedelta(hours=5, minutes=30))]),
    ),
)
json_objects = st.one_of(
    st.just(RawJSON("{}")),
    st.builds(lambda n: RawJSON(f'{{"n": {n}, "s": "ü"}}'), st.integers()),
    st.dictionaries(
        st.text(max_size=5),
        st.one_of(st.integers(-(2**63), 2**63 - 1), st.text(max_size=8)),
        max_size=3,
    ),
)
assignments = st.builds(
    lambda task_id, tenant, typ, times, token, attempt, retries, payload, checkpoint, pool, t, tr: (
        Assignment(
            key=TaskKey(task_id, times[0]),
            tenant_id=tenant,
            type=typ,
            payload=payload,
            fencing_token=token,
            attempt=attempt,
            max_retries=retries,
            due_at=times[1],
            lease_expires_at=times[2],
            checkpoint=checkpoint,
            trace_context={"traceparent": TRACEPARENT} if tr else None,
            pool=pool,
            worker_id="w",
            timeout_s=t,
        )
    ),
    st.uuids(),
    st.uuids(),
    st.text(min_size=1, max_size=20),
    st.tuples(instants, instants, instants),
    st.integers(1, 2**63 - 1),
    st.integers(0, 100),
    st.integers(0, 100),
    json_objects,
    st.one_of(st.none(), json_objects),
    st.sampled_from(list(Pool)),
    st.one_of(st.just(0.0), st.floats(0, 86_400, allow_nan=False)),
    st.sampled_from([False, False, False, True]),
)


def _generated(batch: Sequence[Assignment], now_us: int = 0) -> bytes:
    tasks = [conv.assignment_to_proto(a, json_bytes=True, now_us=now_us) for a in batch]
    return pb.ServerMessage(assignments=pb.Assignments(tasks=tasks)).SerializeToString()


@contextlib.contextmanager
def untraced() -> Iterator[None]:
    """No dispatch span recorded (another test may have installed a process-wide SDK
    tracer provider): a traced assignment's bytes are then deterministic."""
    with mock.patch.object(_worker, "_tracer", trace.NoOpTracer()):
        yield


@settings(max_examples=300, deadline=None)
@given(st.lists(assignments, max_size=5), st.one_of(st.just(0), st.integers(1, 2**62)))
def test_assignments_are_written_as_the_generated_class_writes_them(
    batch: list[Assignment], now_us: int
) -> None:
    """Byte for byte, whatever the fields (a traced assignment and a time before the
    epoch go through the generated class inside the same message), and whatever the
    push's instant on a stream that holds early pushes (``start_in_us``)."""
    expected = _generated(batch, now_us)
    with untraced():
        batch_event = AssignmentBatch(tuple(batch))
        assert event_to_proto(batch_event, "w", json_bytes=True, now_us=now_us) == expected
        one = functools.partial(_traced_assignment, worker_id="w", now_us=now_us)
        assert encode_assignments(batch, one, now_us) == expected


def test_a_push_ahead_of_due_says_how_long_until_due() -> None:
    """``start_in_us``: the time from the push to the due instant, by the server's
    clock; 0 (unset) once due, and never without ``now_us``."""
    a = _assignment()
    due_us = (a.due_at - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1)
    for now_us, left in [(due_us - 20_000, 20_000), (due_us - 1, 1), (due_us, 0), (due_us + 5, 0)]:
        data = event_to_proto(AssignmentBatch((a,)), "w", json_bytes=True, now_us=now_us)
        assert isinstance(data, bytes)
        (task,) = pb.ServerMessage.FromString(data).assignments.tasks
        assert task.start_in_us == left
    data = event_to_proto(AssignmentBatch((a,)), "w", json_bytes=True)
    assert isinstance(data, bytes)
    assert pb.ServerMessage.FromString(data).assignments.tasks[0].start_in_us == 0


def test_a_traced_assignment_carries_its_dispatch_span() -> None:
    """With a recording tracer the native path records the dispatch span, as the
    generated path does, and hands its context on in ``dispatch_trace_context``."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    a = _assignment(trace_context={"traceparent": TRACEPARENT})
    with mock.patch.object(_worker, "_tracer", provider.get_tracer("test")):
        data = event_to_proto(AssignmentBatch((a, _assignment())), "w", json_bytes=True)
    assert isinstance(data, bytes)
    traced, plain = pb.ServerMessage.FromString(data).assignments.tasks
    (span,) = exporter.get_finished_spans()
    assert span.name == "tickwheel.dispatch t"
    assert traced.dispatch_trace_context.traceparent.split("-")[1] == TRACEPARENT.split("-")[1]
    assert traced.dispatch_trace_context.traceparent.split("-")[2] == (
        f"{span.context.span_id:016x}"
    )
    traced.ClearField("dispatch_trace_context")
    assert traced == conv.assignment_to_proto(a, json_bytes=True)
    assert not plain.HasField("dispatch_trace_context")


def _assignment(**changes: Any) -> Assignment:
    """An assignment with every optional part set (checkpoint, a pool, a timeout)."""
    return assignment(
        **{"fencing_token": 2, "checkpoint": {"step": 2}, "pool": Pool.CRITICAL, "timeout_s": 2.5}
        | changes
    )


def test_without_the_extension_assignments_are_the_same_bytes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    batch = [_assignment(), _assignment(trace_context={"traceparent": TRACEPARENT})]
    monkeypatch.setattr(_stream_wire, "_encode_assignments", None)
    one = functools.partial(_traced_assignment, worker_id="w")
    with untraced():
        assert encode_assignments(batch, one) == _generated(batch)
