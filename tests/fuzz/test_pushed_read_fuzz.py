"""The worker's native reader of a push at the fuzz budget: the properties of
``tests/unit/worker/test_pushed_read.py`` (500 examples there) with
``TICKWHEEL_FUZZ_EXAMPLES`` examples each (``make fuzz``: 5,000). No server: the
reader is checked against the general path."""

from __future__ import annotations

import os

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit.worker import test_pushed_read as unit
from tests.unit.worker.test_pushed_read import _check, pushes

pytestmark = unit.pytestmark  # the same skip: only when the extension is off by request
EXAMPLES = int(os.environ.get("TICKWHEEL_FUZZ_EXAMPLES", "500"))


@settings(max_examples=EXAMPLES, deadline=None)
@given(pushes, st.binary(max_size=8), st.integers(0, 60))
def test_reader_agrees_with_the_general_path(data: bytes, tail: bytes, cut: int) -> None:
    _check(data)
    _check(data + tail)
    _check(data[: max(0, len(data) - cut)])


@settings(max_examples=EXAMPLES, deadline=None)
@given(st.binary(max_size=400))
def test_reader_on_random_bytes(data: bytes) -> None:
    _check(data)
