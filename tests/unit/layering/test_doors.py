"""One door per concern (issue 37): the engine facade stays small and forwards little.

A caller reaches a concern through its part (``engine.tenancy``, ``engine.workflows``,
``engine.schedules``, ``engine.history``, ``engine.watch``), never through a one-line
forward on ``Engine``; ``scripts/count_doors.py`` counts both figures."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[3]


def _count_doors() -> ModuleType:
    spec = importlib.util.spec_from_file_location("count_doors", ROOT / "scripts/count_doors.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_engine_has_at_most_30_methods_and_5_forwards() -> None:
    methods, forwards = _count_doors().count(
        str(ROOT / "src/scheduler/engine/_engine.py"), "Engine"
    )
    assert methods <= 30, methods
    assert len(forwards) <= 5, forwards
