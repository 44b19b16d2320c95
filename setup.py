"""Build script for the Cython timing wheel, its task table and the wire codecs.

Everything else about the package lives in ``pyproject.toml``; this file only
declares the extension. Environment switches (asyncpg and uvloop do the same):

- ``TICKWHEEL_CYTHON_ANNOTATE=1``: also write Cython's annotated HTML next to the
  ``.pyx`` so the hot loops can be checked free of Python calls (yellow lines).
- ``TICKWHEEL_CYTHON_DEBUG=1``: build without optimisation, with debug symbols and
  Cython's bounds and wraparound checks on.
- ``TICKWHEEL_CYTHON_FORCE=1``: regenerate the C source even when it looks current.
- ``TICKWHEEL_OPTIONAL_EXTENSIONS=1``: an extension that cannot be compiled (no C
  compiler, no Python headers) is skipped with a warning instead of failing the build;
  its pure-Python twin runs instead (``_wheel.IMPLEMENTATION``). ``make dev`` and the
  editable install set it; ``make build`` (and so ``make test``) does not.
"""

from __future__ import annotations

import os
import sys

from Cython.Build import cythonize
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


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



class OptionalBuildExt(build_ext):
    """``build_ext`` that skips, with a warning, an extension it cannot compile."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as exc:  # no compiler at all: nothing can be built
            self._skipped("every extension", exc)

    def build_extension(self, ext: Extension) -> None:
        try:
            super().build_extension(ext)
        except Exception as exc:  # CompileError, a missing Python.h, ...
            self._skipped(ext.name, exc)

    @staticmethod
    def _skipped(what: str, exc: Exception) -> None:
        print(
            f"WARNING: tickwheel: could not compile {what} ({type(exc).__name__}: {exc}); "
            "the pure-Python implementation runs instead (slower). Install a C compiler "
            "and the Python headers (Debian: build-essential python3-dev) and rebuild.",
            file=sys.stderr,
        )


setup(
    cmdclass={"build_ext": OptionalBuildExt} if _flag("TICKWHEEL_OPTIONAL_EXTENSIONS") else {},
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
