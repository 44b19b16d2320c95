"""The native SubmitTasks reader at the fuzz budget: the properties of
``tests/unit/transport/test_submit_read.py`` (500 examples there) with
``TICKWHEEL_FUZZ_EXAMPLES`` examples each (``make fuzz``: 5,000). No server: the
reader is checked against the general path."""

from __future__ import annotations

import os
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit.transport import test_submit_read as unit
from tests.unit.transport.test_submit_read import TRACE, _check, requests

pytestmark = unit.pytestmark  # the same skip: only when the extension is off by request
EXAMPLES = int(os.environ.get("TICKWHEEL_FUZZ_EXAMPLES", "500"))


@settings(max_examples=EXAMPLES, deadline=None)
@given(requests, st.binary(max_size=8), st.integers(0, 60), st.sampled_from([None, TRACE]))
def test_reader_agrees_with_the_general_path(
    data: bytes, tail: bytes, cut: int, trace: Any
) -> None:
    _check(data, trace)
    _check(data + tail, trace)
    _check(data[: max(0, len(data) - cut)], trace)


@settings(max_examples=EXAMPLES, deadline=None)
@given(st.binary(max_size=400))
def test_reader_on_random_bytes(data: bytes) -> None:
    _check(data)
