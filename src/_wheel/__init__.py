"""Selector for the timing wheel and its task table: the Cython accelerators, or their
pure-Python twins.

``TICKWHEEL_NO_EXTENSIONS=1`` forces the pure-Python implementation; so does a failed
import of the extension, whose reason is kept in ``EXTENSION_ERROR``.
``IMPLEMENTATION`` says which one ``TimingWheel`` and ``TaskTable`` are: ``"c"`` or
``"python"`` (both come from the same build, so they are always the same kind). Each
pair has one API (``_wheel_c.pyi`` mirrors ``_wheel_py``, ``_table_c.pyi`` mirrors
``_table_py``), so type checkers see the pure-Python classes.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Literal

__all__ = ["EXTENSION_ERROR", "IMPLEMENTATION", "NO_EXTENSIONS", "TaskTable", "TimingWheel"]

#: Whether the environment asked for pure Python.
NO_EXTENSIONS = os.environ.get("TICKWHEEL_NO_EXTENSIONS", "") not in ("", "0", "false", "no")
#: Why the extension is not in use, or ``None`` when it is.
EXTENSION_ERROR: str | None = None
#: Which implementation ``TimingWheel`` is.
IMPLEMENTATION: Literal["c", "python"]

if TYPE_CHECKING:
    from ._table_py import TaskTable
    from ._wheel_py import TimingWheel

    IMPLEMENTATION = "c"
elif NO_EXTENSIONS:
    from ._table_py import TaskTable
    from ._wheel_py import TimingWheel

    EXTENSION_ERROR = "disabled by TICKWHEEL_NO_EXTENSIONS"
    IMPLEMENTATION = "python"
else:
    try:
        from ._table_c import TaskTable
        from ._wheel_c import TimingWheel
    except ImportError as exc:  # not built, or built for another interpreter
        from ._table_py import TaskTable
        from ._wheel_py import TimingWheel

        EXTENSION_ERROR = f"{type(exc).__name__}: {exc}"
        IMPLEMENTATION = "python"
    else:
        IMPLEMENTATION = "c"
