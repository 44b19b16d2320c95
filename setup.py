"""Build script for the Cython timing wheel, its task table and the wire codecs.

Everything else about the package lives in ``pyproject.toml``; this file only
declares the extension. Environment switches (asyncpg and uvloop do the same):

- ``TICKWHEEL_CYTHON_ANNOTATE=1``: also write Cython's annotated HTML next to the
  ``.pyx`` so the hot loops can be checked free of Python calls (yellow lines).
- ``TICKWHEEL_CYTHON_DEBUG=1``: build without optimisation, with debug symbols and
  Cython's bounds and wraparound checks on.
- ``TICKWHEEL_CYTHON_FORCE=1``: regenerate the C source even when it looks current.
"""

from __future__ import annotations

import os

from Cython.Build import cythonize
from setuptools import Extension, setup


def _flag(name: str) -> bool:
    return os.environ.get(name, "") not in ("", "0", "false", "no")


DEBUG = _flag("TICKWHEEL_CYTHON_DEBUG")

extensions = [
    Extension(
        f"_wheel.{name}",
        sources=[f"src/_wheel/{name}.pyx"],
        extra_compile_args=["-O0", "-g"] if DEBUG else ["-O3"],
        define_macros=[("CYTHON_TRACE", "0")],
    )
    # The timing wheel, and the table of compact task rows its keys point to.
    for name in ("_wheel_c", "_table_c")
] + [
    Extension(
        f"scheduler.server.{name}",
        sources=[f"src/scheduler/server/{name}.pyx"],
        extra_compile_args=["-O0", "-g"] if DEBUG else ["-O3"],
        define_macros=[("CYTHON_TRACE", "0")],
    )
    # The worker stream's fenced writes read from, and its assignments written to, the
    # wire; a SubmitTasks request read from it.
    for name in ("_stream_c", "_submit_c")
] + [
    Extension(
        f"scheduler.{name}",
        sources=[f"src/scheduler/{name.replace('.', '/')}.pyx"],
        extra_compile_args=["-O0", "-g"] if DEBUG else ["-O3"],
        define_macros=[("CYTHON_TRACE", "0")],
    )
    # The values every reader makes from the wire (ids, times, text, trace contexts);
    # the SDKs' readers: a SubmitTasks answer (client), a push of assignments
    # (worker). All the readers share scheduler/_pbread.pxd.
    for name in ("_pbread", "client._tasks_c", "worker._pushed_c")
]

setup(
    ext_modules=cythonize(
        extensions,
        annotate=_flag("TICKWHEEL_CYTHON_ANNOTATE"),
        force=_flag("TICKWHEEL_CYTHON_FORCE"),
        compiler_directives={
            "language_level": "3",
            "boundscheck": DEBUG,
            "wraparound": DEBUG,
            "initializedcheck": DEBUG,
            "cdivision": True,
            "embedsignature": True,
        },
    ),
)
