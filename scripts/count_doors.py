"""Count a class's methods and its pass-through methods (issue 37's figures).

A pass-through is a method whose body, docstring aside, is one statement that only
calls a method of one of the instance's parts (``self.part.method(...)``, optionally
``return``/``await``-ed) with the method's own parameters (names or ``k=name``), and
does nothing else.

    python scripts/count_doors.py [FILE CLASS ...]

With no argument: the two store backends and the Engine. One line a class, then the
total of pass-through methods.
"""

from __future__ import annotations

import ast
import sys

DEFAULT = (
    ("src/scheduler/store/postgres/__init__.py", "PostgresStore"),
    ("src/scheduler/store/sqlite/__init__.py", "SqliteStore"),
    ("src/scheduler/engine/_engine.py", "Engine"),
)


def _is_forward(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    body = list(fn.body)
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    if len(body) != 1:
        return False
    stmt = body[0]
    value = stmt.value if isinstance(stmt, (ast.Return, ast.Expr)) else None
    if isinstance(value, ast.Await):
        value = value.value
    if not isinstance(value, ast.Call) or not isinstance(value.func, ast.Attribute):
        return False
    owner = value.func.value
    if not (isinstance(owner, ast.Attribute) and isinstance(owner.value, ast.Name)):
        return False
    if owner.value.id != "self":
        return False
    params = {a.arg for a in fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs} - {"self"}
    args = list(value.args) + [k.value for k in value.keywords]
    return all(isinstance(a, ast.Name) and a.id in params for a in args)


def count(path: str, name: str) -> tuple[int, list[str]]:
    with open(path) as f:
        tree = ast.parse(f.read())
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == name:
            fns = [n for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
            return len(fns), [f.name for f in fns if _is_forward(f)]
    raise SystemExit(f"no class {name} in {path}")


if __name__ == "__main__":
    argv = sys.argv[1:]
    pairs = list(zip(argv[::2], argv[1::2], strict=True)) if argv else list(DEFAULT)
    total = 0
    for path, cls in pairs:
        n, fwd = count(path, cls)
        total += len(fwd)
        print(f"{cls} ({path}): {n} methods, {len(fwd)} pass-through: {', '.join(fwd)}")
    print(f"total: {total} pass-through")
