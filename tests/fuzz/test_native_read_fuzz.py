"""The native readers at the fuzz budget, each against its general path: the
properties of the unit tests named below (500 examples there) with
``TICKWHEEL_FUZZ_EXAMPLES`` examples each (``make fuzz``: 5,000). No server.

- ``submit``: the server's ``SubmitTasks`` reader (``tests/unit/server/test_submit_read.py``),
  with and without the call's trace context;
- ``answer``: the client's ``SubmitTasks`` answer reader (``test_submit_answer_read.py``);
- ``pushed``: the worker's push reader (``tests/unit/worker/test_pushed_read.py``);
- ``stream``: the server's worker-stream reader (``tests/unit/server/test_stream_wire.py``),
  and its ``Assignments`` writer against the generated class's bytes.

Each reader is skipped, as in its unit test, only when the extensions are off by
request (``TICKWHEEL_NO_EXTENSIONS``).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.engine import AssignmentBatch
from scheduler.server._worker import event_to_proto
from scheduler.types import Assignment
from tests.unit.client import test_submit_answer_read
from tests.unit.server import test_stream_wire, test_submit_read
from tests.unit.worker import test_pushed_read

EXAMPLES = int(os.environ.get("TICKWHEEL_FUZZ_EXAMPLES", "500"))
NO_EXTRA: st.SearchStrategy[Any] = st.just(None)


@dataclass(frozen=True)
class Reader:
    unit: ModuleType
    """The unit test module: its ``_check`` and its skip mark."""
    inputs: st.SearchStrategy[bytes]
    """Messages the other side writes, as bytes."""
    extra: st.SearchStrategy[Any] = NO_EXTRA
    """A second argument to ``_check`` (the submit reader's trace context)."""

    def check(self, data: bytes, extra: Any = None) -> None:
        check: Callable[..., Any] = self.unit._check
        if extra is None:
            check(data)
        else:
            check(data, extra)


READERS = {
    "submit": Reader(
        test_submit_read,
        test_submit_read.requests,
        st.sampled_from([None, test_submit_read.TRACE]),
    ),
    "answer": Reader(test_submit_answer_read, test_submit_answer_read.answers),
    "pushed": Reader(test_pushed_read, test_pushed_read.pushes),
    "stream": Reader(
        test_stream_wire, test_stream_wire.messages.map(lambda m: m.SerializeToString())
    ),
}

each_reader = pytest.mark.parametrize(
    "reader",
    [pytest.param(r, id=name, marks=r.unit.pytestmark) for name, r in READERS.items()],
)


@each_reader
def test_reader_agrees_with_the_general_path(reader: Reader) -> None:
    @settings(max_examples=EXAMPLES, deadline=None)
    @given(reader.inputs, st.binary(max_size=8), st.integers(0, 60), reader.extra)
    def run(data: bytes, tail: bytes, cut: int, extra: Any) -> None:
        reader.check(data, extra)
        reader.check(data + tail, extra)
        reader.check(data[: max(0, len(data) - cut)], extra)

    run()


@each_reader
def test_reader_on_random_bytes(reader: Reader) -> None:
    @settings(max_examples=EXAMPLES, deadline=None)
    @given(st.binary(max_size=400))
    def run(data: bytes) -> None:
        reader.check(data)

    run()


@test_stream_wire.pytestmark
@settings(max_examples=EXAMPLES, deadline=None)
@given(st.lists(test_stream_wire.assignments, max_size=8))
def test_stream_writer_writes_the_generated_bytes(batch: list[Assignment]) -> None:
    with test_stream_wire.untraced():
        written = event_to_proto(AssignmentBatch(tuple(batch)), "w", json_bytes=True)
    assert written == test_stream_wire._generated(batch)
