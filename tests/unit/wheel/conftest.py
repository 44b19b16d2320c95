"""Every wheel test runs against both implementations.

The ``"c"`` parameter FAILS (never skips) when the extension did not load, unless
``TICKWHEEL_NO_EXTENSIONS`` asked for pure Python.
"""

from __future__ import annotations

import importlib
from typing import Any, TypeVar

import pytest

import _wheel
from _wheel._wheel_py import TimingWheel as PyTimingWheel

IMPLEMENTATIONS = ["c", "python"]

C = TypeVar("C", bound=type[Any])


def load_class(name: str, python: C, c_module: str) -> C:
    """Implementation ``name`` of the class ``python`` is the pure-Python twin of: that
    class itself, or the class of the same name in the extension module ``c_module``."""
    if name == "python":
        return python
    if _wheel.NO_EXTENSIONS:
        pytest.skip("TICKWHEEL_NO_EXTENSIONS is set")
    try:
        module = importlib.import_module(c_module)
    except ImportError as exc:
        pytest.fail(f"the C extension did not load (run `make build`): {exc}", pytrace=False)
    cls: C = getattr(module, python.__name__)
    return cls


def load(name: str) -> type[PyTimingWheel]:
    """The ``TimingWheel`` class of implementation ``name``."""
    return load_class(name, PyTimingWheel, "_wheel._wheel_c")


@pytest.fixture(params=IMPLEMENTATIONS)
def wheel_cls(request: pytest.FixtureRequest) -> type[PyTimingWheel]:
    """The ``TimingWheel`` class, once per implementation."""
    return load(request.param)
