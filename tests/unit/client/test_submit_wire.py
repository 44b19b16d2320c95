"""The client's hand-written SubmitTasksRequest bytes parse to exactly the message the
generated classes build (``spec_into_proto``), whatever the specs."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from scheduler.client import _convert as conv
from scheduler.client._submit_wire import encode_tasks, varint
from scheduler.client._types import TaskSpec
from scheduler.jitter import JitterMode
from scheduler.types import Pool, RetryPolicy

T0 = datetime(2030, 1, 1, tzinfo=UTC)
TP = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def _built(specs: list[TaskSpec]) -> pb.SubmitTasksRequest:
    request = pb.SubmitTasksRequest()
    for spec in specs:
        conv.spec_into_proto(spec, request.tasks.add())
    return request


payloads = st.one_of(
    st.just({}),
    st.dictionaries(
        st.text(max_size=6).filter(lambda k: "\x00" not in k),
        st.one_of(st.integers(-(2**40), 2**40), st.text(max_size=20), st.booleans(), st.none()),
        max_size=4,
    ),
    st.builds(lambda n: {"blob": "x" * n}, st.integers(4000, 20_000)),  # long varints
)

specs = st.builds(
    TaskSpec,
    type=st.sampled_from(["email", "report", "t"]),
    payload=payloads,
    scheduled_at=st.one_of(
        st.none(), st.integers(0, 10**9).map(lambda us: T0 + timedelta(microseconds=us))
    ),
    idempotency_key=st.one_of(st.none(), st.text(min_size=1, max_size=30)),
    pool=st.sampled_from(list(Pool)),
    strict_timing=st.booleans(),
    jitter_mode=st.one_of(st.none(), st.sampled_from(list(JitterMode))),
    max_retries=st.one_of(st.none(), st.integers(0, 10)),
    timeout_s=st.sampled_from([0.0, 1.5, 30.0]),
    trace_context=st.one_of(st.none(), st.just({"traceparent": TP, "tracestate": "a=1"})),
    retry_policy=st.one_of(
        st.none(), st.just(RetryPolicy(initial_backoff_s=1.0, non_retryable=("ValueError",)))
    ),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(specs, min_size=1, max_size=8))
def test_the_bytes_are_the_generated_message(items: list[TaskSpec]) -> None:
    data = encode_tasks(items)
    assert pb.SubmitTasksRequest.FromString(data) == _built(items)


def test_a_batch_with_shared_options_reuses_them() -> None:
    items = [TaskSpec(type="t", payload={"i": i}, scheduled_at=T0) for i in range(300)]
    items.append(TaskSpec(type="u", pool=Pool.BULK))
    parsed = pb.SubmitTasksRequest.FromString(encode_tasks(items))
    assert parsed == _built(items)
    assert parsed.tasks[299].payload_json == b'{"i":299}'


@pytest.mark.parametrize(
    ("payload", "error"),
    [({"a": math.nan}, ValueError), ({"a": {1, 2}}, TypeError), ({"a": object()}, TypeError)],
)
def test_a_payload_json_cannot_hold_is_refused(payload: dict[str, Any], error: type) -> None:
    with pytest.raises(error):
        encode_tasks([TaskSpec(type="t", payload=payload)])


def test_varint() -> None:
    for n in (1, 127, 128, 300, 4095, 4096, 70_000):
        msg = pb.TaskSpec(payload_json=b"x" * n)
        assert msg.SerializeToString() == b"\x6a" + varint(n) + b"x" * n
    assert varint(0) == b"\x00"
    assert varint(300) == b"\xac\x02"
    assert varint(2**35) == bytes([0x80, 0x80, 0x80, 0x80, 0x80, 0x01])
