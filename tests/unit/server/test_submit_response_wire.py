"""The server writes a SubmitTasks answer's bytes directly (``server/_submit_wire.py``):
they parse to the message the generated classes build, field for field."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from google.protobuf import struct_pb2

from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from scheduler.server import _convert as conv
from scheduler.server._submit_wire import encode_submit_response
from scheduler.states import TaskState
from scheduler.types import InsertResult, Pool, RetryPolicy, TaskRecord
from tests.support.records import NOW, task_record

TP = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
TENANT = uuid.uuid4()


def _record(**kw: Any) -> TaskRecord:
    """A new row of the one tenant (the batch's shared parts are per tenant)."""
    return task_record(**{"tenant_id": TENANT, **kw})


def _struct(**values: Any) -> struct_pb2.Struct:
    s = struct_pb2.Struct()
    s.update(values)
    return s


def _reference(
    results: list[InsertResult], given: list[pb.TaskSpec], json_bytes: bool
) -> pb.SubmitTasksResponse:
    """The answer as the generated classes build it (the path before the encoder)."""
    out = pb.SubmitTasksResponse()
    for result, spec in zip(results, given, strict=True):
        payload = (spec.payload_json or spec.payload) if result.created else None
        out.results.add(
            task=conv.task_to_proto(result.task, payload, json_bytes=json_bytes),
            created=result.created,
        )
    return out


# (record fields, created, the request's TaskSpec)
CASES: list[tuple[dict[str, Any], bool, pb.TaskSpec]] = [
    ({}, True, pb.TaskSpec(type="email", payload_json=b'{"a": 1}')),
    ({"shard_id": 0, "idempotency_key": "order-7"}, True, pb.TaskSpec(payload_json=b"{}")),
    ({"due_at": NOW + timedelta(seconds=3, microseconds=1)}, True, pb.TaskSpec()),  # empty Struct
    ({}, True, pb.TaskSpec(payload=_struct(n=1.5, s="x", nested={"l": [1, None]}))),
    ({"scheduled_at": datetime(1970, 1, 1, tzinfo=UTC)}, True, pb.TaskSpec(payload_json=b"{}")),
    ({"trace_context": {"traceparent": TP, "tracestate": "k=v"}}, True, pb.TaskSpec()),
    (
        {"retry_policy": RetryPolicy(initial_backoff_s=1.5, max_attempts=4), "max_retries": 3},
        True,
        pb.TaskSpec(payload_json=b'{"b": [1, 2]}'),
    ),
    ({"strict_timing": True, "pool": Pool.CRITICAL, "type": "other"}, True, pb.TaskSpec()),
    ({"idempotency_key": "ü-" + "k" * 120}, True, pb.TaskSpec(payload_json=b'{"x": "y"}')),
    # An existing task (its key named it): the stored row, whatever it holds.
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
        pb.TaskSpec(payload_json=b'{"ignored": 1}'),
    ),
    # Created, yet holding something a new task does not (the whole path).
    ({"last_error": "x"}, True, pb.TaskSpec(payload_json=b"{}")),
]


@pytest.mark.parametrize("json_bytes", [True, False])
def test_the_bytes_parse_to_the_generated_answer(json_bytes: bool) -> None:
    results = [InsertResult(task=_record(**kw), created=c) for kw, c, _ in CASES]
    given = [spec for _, _, spec in CASES]
    # Twice over: the second round of each shape finds its shared part cached.
    results, given = (
        results + [InsertResult(task=_record(**kw), created=c) for kw, c, _ in CASES],
        given + given,
    )
    data = encode_submit_response(results, [s.payload_json or s.payload for s in given], json_bytes)
    got = pb.SubmitTasksResponse.FromString(data)
    want = _reference(results, given, json_bytes)
    for i, (g, w) in enumerate(zip(got.results, want.results, strict=True)):
        assert g.SerializeToString(deterministic=True) == w.SerializeToString(deterministic=True), (
            f"item {i}: {g} != {w}"
        )
    assert len(got.results) == len(want.results) == 2 * len(CASES)


def test_an_empty_answer_is_empty_bytes() -> None:
    assert encode_submit_response([], [], True) == b""


def test_a_long_payload_and_a_far_timestamp_encode_their_lengths() -> None:
    """Lengths of 4,096 bytes and more take the varint path that is not looked up."""
    big = b'{"b": "' + b"x" * 70_000 + b'"}'
    rec = _record(due_at=datetime(9999, 12, 30, tzinfo=UTC))
    data = encode_submit_response([InsertResult(task=rec, created=True)], [big], True)
    (item,) = pb.SubmitTasksResponse.FromString(data).results
    assert item.task.payload_json == big
    assert item.task.due_at.ToDatetime(tzinfo=UTC) == rec.due_at
    assert item.created
