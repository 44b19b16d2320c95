"""Every wheel test runs against both implementations.

The ``"c"`` parameter FAILS (never skips) when the extension did not load, unless
``TICKWHEEL_NO_EXTENSIONS`` asked for pure Python.
"""

from __future__ import annotations

import importlib

import pytest

import _wheel
from _wheel._wheel_py import TimingWheel as PyTimingWheel

IMPLEMENTATIONS = ["c", "python"]


def load(name: str) -> type[PyTimingWheel]:
    """The ``TimingWheel`` class of implementation ``name``."""
    if name == "python":
        return PyTimingWheel
    if _wheel.NO_EXTENSIONS:
        pytest.skip("TICKWHEEL_NO_EXTENSIONS is set")
    try:
        module = importlib.import_module("_wheel._wheel_c")
    except ImportError as exc:
        pytest.fail(f"the C extension did not load (run `make build`): {exc}", pytrace=False)
    cls: type[PyTimingWheel] = module.TimingWheel
    return cls


@pytest.fixture(params=IMPLEMENTATIONS)
def wheel_cls(request: pytest.FixtureRequest) -> type[PyTimingWheel]:
    """The ``TimingWheel`` class, once per implementation."""
    return load(request.param)
