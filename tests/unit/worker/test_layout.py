"""The worker SDK's parts stay findable: each module says what it owns, whom it may
call and who calls it, stays small, and the parts import one another one way."""

from __future__ import annotations

import ast
import graphlib
from pathlib import Path

import scheduler.worker

_PACKAGE = Path(scheduler.worker.__file__).parent


def _modules() -> dict[str, ast.Module]:
    return {p.stem: ast.parse(p.read_text()) for p in sorted(_PACKAGE.glob("*.py"))}


def _worker_imports(tree: ast.Module) -> set[str]:
    """The sibling modules a module imports, ``TYPE_CHECKING`` blocks included."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            parts = node.module.split(".")
            if parts[:2] == ["scheduler", "worker"] and len(parts) == 3:
                found.add(parts[2])
    return found


def test_the_parts_import_one_another_without_cycles() -> None:
    graph = {name: _worker_imports(tree) for name, tree in _modules().items()}
    order = list(graphlib.TopologicalSorter(graph).static_order())  # raises on a cycle
    assert order.index("_stream") < order.index("_runner") < order.index("_worker")
    assert order.index("_slots") < order.index("_drain") < order.index("_runner")


def test_each_part_says_what_it_owns_whom_it_calls_and_who_calls_it() -> None:
    for name, tree in _modules().items():
        if name == "__init__":
            continue
        doc = ast.get_docstring(tree) or ""
        assert "May call" in doc, name
        assert "Called by" in doc, name
        assert len((_PACKAGE / f"{name}.py").read_text().splitlines()) <= 600, name


def test_no_class_of_the_worker_grows_past_25_methods() -> None:
    for name, tree in _modules().items():
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                methods = [
                    n for n in node.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
                ]
                assert len(methods) <= 25, f"{name}.{node.name}"
