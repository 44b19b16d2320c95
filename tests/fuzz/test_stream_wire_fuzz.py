"""The worker stream's native reader and writer at the fuzz budget: the properties of
``tests/unit/transport/test_stream_wire.py`` (500 examples there) with
``TICKWHEEL_FUZZ_EXAMPLES`` examples each (``make fuzz``: 5,000). No server: the
reader is checked against the general decoder, the writer against the generated
class's bytes."""

from __future__ import annotations

import os

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from scheduler.engine import AssignmentBatch
from scheduler.server._worker import event_to_proto
from scheduler.types import Assignment
from tests.unit.transport import test_stream_wire as unit
from tests.unit.transport.test_stream_wire import (
    _check,
    _generated,
    assignments,
    messages,
    untraced,
)

pytestmark = unit.pytestmark  # the same skip: only when the extension is off by request
EXAMPLES = int(os.environ.get("TICKWHEEL_FUZZ_EXAMPLES", "500"))


@settings(max_examples=EXAMPLES, deadline=None)
@given(messages, st.binary(max_size=8), st.integers(0, 60))
def test_reader_agrees_with_the_general_path(msg: pb.WorkerMessage, tail: bytes, cut: int) -> None:
    data = msg.SerializeToString()
    _check(data)
    _check(data + tail)
    _check(data[: max(0, len(data) - cut)])


@settings(max_examples=EXAMPLES, deadline=None)
@given(st.binary(max_size=400))
def test_reader_on_random_bytes(data: bytes) -> None:
    _check(data)


@settings(max_examples=EXAMPLES, deadline=None)
@given(st.lists(assignments, max_size=8))
def test_writer_writes_the_generated_bytes(batch: list[Assignment]) -> None:
    with untraced():
        written = event_to_proto(AssignmentBatch(tuple(batch)), "w", json_bytes=True)
    assert written == _generated(batch)
