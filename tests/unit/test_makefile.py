"""Issue 40, item 9: ``make help`` names every target a newcomer uses, and ``make bench``
runs one benchmark when told (``BENCH=``). Dry runs only (``make -n``)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="no make")


def _make(*args: str) -> str:
    return subprocess.run(
        ["make", "-s", "--no-print-directory", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout


def test_help_lists_every_everyday_target() -> None:
    listed = {line.split()[1] for line in _make("help").splitlines() if line.startswith("make ")}
    wanted = {"dev", "test", "build", "unit", "integration", "acceptance", "lint", "fuzz"}
    assert wanted | {"bench", "clean"} <= listed


def test_bench_runs_one_benchmark_when_told() -> None:
    one = _make("-n", "bench", "BENCH=benchmarks/test_wheel.py").splitlines()
    (run,) = [ln for ln in one if "--benchmark-only" in ln]
    assert "/pytest benchmarks/test_wheel.py --benchmark-only" in run
    (default,) = [ln for ln in _make("-n", "bench").splitlines() if "--benchmark-only" in ln]
    assert "/pytest benchmarks --benchmark-only" in default
