"""The store conformance suite covers every protocol method on both backends.

``tests/integration/store/conformance/test_<concern>.py`` holds the tests of
``scheduler/store/protocol/<concern>.py``: each method of that file's protocol must be
called on ``store`` (the fixture of every backend) in a function that takes it. A method
added to a protocol without a conformance test fails here.
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from scheduler.store.protocol import PROTOCOLS, Store

SUITE = Path(__file__).parents[2] / "integration" / "store" / "conformance"
CONCERNS = [*PROTOCOLS, Store]


def _methods(proto: type) -> set[str]:
    return {n for n, v in vars(proto).items() if inspect.isfunction(v) and n[0] != "_"}


def _called_on_store(path: Path) -> set[str]:
    """Names ``X`` of every ``store.X(...)`` inside a function that takes ``store``."""
    called: set[str] = set()
    for fn in ast.walk(ast.parse(path.read_text())):
        if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        if "store" not in {a.arg for a in fn.args.args}:
            continue
        for node in ast.walk(fn):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "store"
            ):
                called.add(node.func.attr)
    return called


def _store_fixture_is_every_backend() -> list[str]:
    from tests.support import stores

    marker = getattr(stores.store, "_pytestfixturefunction", None) or getattr(
        stores.store, "_fixture_function_marker", None
    )
    assert marker is not None, "tests.support.stores.store is not a fixture"
    return sorted(marker.params)


def test_the_store_fixture_runs_on_both_backends() -> None:
    assert _store_fixture_is_every_backend() == ["postgres", "sqlite"]


@pytest.mark.parametrize("proto", CONCERNS, ids=lambda p: p.__name__)
def test_every_protocol_method_has_a_conformance_test(proto: type) -> None:
    concern = proto.__module__.rsplit(".", 1)[1]
    path = SUITE / f"test_{concern}.py"
    assert path.is_file(), f"no conformance file for protocol/{concern}.py: {path}"
    missing = _methods(proto) - _called_on_store(path)
    assert not missing, f"{path.name} calls no store.{sorted(missing)}"


def test_every_conformance_file_is_a_protocol_file() -> None:
    concerns = {p.__module__.rsplit(".", 1)[1] for p in CONCERNS}
    files = {p.stem.removeprefix("test_") for p in SUITE.glob("test_*.py")}
    assert files == concerns
