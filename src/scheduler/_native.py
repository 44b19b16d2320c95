"""The native wire readers and writers, loaded one way: :func:`extension`.

Each is a Cython module built with the timing wheel (``setup.py``). It is not used
when ``TICKWHEEL_NO_EXTENSIONS=1`` is set (read by ``_wheel`` for every extension) or
when it cannot be imported (not built, or built for another interpreter); its Python
module then takes the general path for everything, which gives the same results at a
higher cost, and says why in its ``*_DECODER_ERROR``.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from _wheel import NO_EXTENSIONS


def extension(name: str) -> tuple[ModuleType | None, str | None]:
    """The extension module ``name``, or None and why it is not in use."""
    if NO_EXTENSIONS:
        return None, "disabled by TICKWHEEL_NO_EXTENSIONS"
    try:
        return importlib.import_module(name), None
    except ImportError as exc:
        return None, f"{type(exc).__name__}: {exc}"
