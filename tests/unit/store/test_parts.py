"""Unit tests: a store part built alone, the seam between protocol files and parts (one
part per protocol file, each implementing it, composed by inheritance), and the
package's layout rules."""

from __future__ import annotations

import ast
import asyncio
import concurrent.futures
import importlib
import importlib.util
import inspect
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from scheduler.states import TaskState
from scheduler.store import StoreConfig
from scheduler.store.postgres import PostgresStore
from scheduler.store.protocol import PROTOCOLS, NoticeStore, Store
from scheduler.store.sqlite import SqliteStore
from scheduler.store.sqlite._db import SQL, Db, connect
from scheduler.store.sqlite.dispatch import Dispatch
from scheduler.store.sqlite.tasks import Tasks
from scheduler.store.sqlite.tenants import Tenants
from scheduler.types import NewTask, Tenant

NOW = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)
STORE = Path(importlib.util.find_spec("scheduler.store").origin or "").parent  # type: ignore[union-attr]


async def test_sqlite_parts_work_alone() -> None:
    executor = concurrent.futures.ThreadPoolExecutor(1)
    conn = await asyncio.get_running_loop().run_in_executor(executor, connect, ":memory:")
    db = Db(conn, executor)
    try:
        config = StoreConfig()
        tenant = await Tenants(db, SQL, config).create_tenant(Tenant(id=uuid.uuid4(), name="acme"))
        task = NewTask(
            id=uuid.uuid4(),
            tenant_id=tenant.id,
            type="t",
            payload={},
            scheduled_at=NOW,
            due_at=NOW,
            idempotency_key="k",
            shard_id=1,
        )
        [res] = await Tasks(db, SQL, config).insert_tasks([task], NOW)
        assert res.created
        [claimed] = await Dispatch(db, SQL, config).claim_preload(
            None, NOW + timedelta(minutes=1), 10, NOW
        )
        assert claimed.key == res.task.key
        assert (await Tasks(db, SQL, config).get_task(None, task.id)).status is TaskState.PRELOADED
    finally:
        await db.close()


BACKENDS = {"postgres": PostgresStore, "sqlite": SqliteStore}
KEPT_BY_THE_BACKEND = {"open", "close", "listen_work", "on_fence"}
"""What a backend class defines itself: opening, closing, the fence hook (``on_fence``:
the pool's connections report a raised fence) and the work-notice listener
(``NoticeStore``); PostgreSQL's warm-up and role check are private helpers of ``open``."""


def _protocol_methods(proto: type) -> set[str]:
    return {n for n, v in vars(proto).items() if inspect.isfunction(v) and n[0] != "_"}


def _protocol_file(proto: type) -> str:
    return proto.__module__.rsplit(".", 1)[1]


@pytest.mark.parametrize("backend", sorted(BACKENDS))
def test_each_protocol_file_has_a_part_of_its_name_that_implements_it(backend: str) -> None:
    for proto in PROTOCOLS:
        if proto is NoticeStore:
            continue  # listen_work: the backend class's own (it opens a connection)
        name = _protocol_file(proto)
        part_mod = importlib.import_module(f"scheduler.store.{backend}.{name}")
        parts = [
            c
            for c in vars(part_mod).values()
            if isinstance(c, type) and c.__module__ == part_mod.__name__ and proto in c.__bases__
        ]
        assert len(parts) == 1, f"{backend}/{name}.py: one part implementing {proto.__name__}"
        [part] = parts
        for method in _protocol_methods(proto):
            assert method in vars(part), f"{backend}/{name}.py {part.__name__} lacks {method}"


@pytest.mark.parametrize("backend", sorted(BACKENDS))
def test_the_backend_class_composes_its_parts_and_keeps_only_its_lifecycle(backend: str) -> None:
    cls = BACKENDS[backend]
    public = {n for n, v in vars(cls).items() if callable(v) and not n.startswith("_")}
    assert public <= KEPT_BY_THE_BACKEND | {"open"}, public - KEPT_BY_THE_BACKEND
    wanted = set().union(*(_protocol_methods(p) for p in (*PROTOCOLS, Store)))
    for method in wanted:
        owner = next(c for c in cls.__mro__ if method in vars(c))
        assert owner.__module__.startswith(f"scheduler.store.{backend}"), (
            f"{cls.__name__}.{method} resolves to {owner.__qualname__}: a protocol stub"
        )


@pytest.mark.parametrize("backend", sorted(BACKENDS))
def test_no_two_parts_define_the_same_name(backend: str) -> None:
    """The parts share one object: a name two parts define would shadow one of them."""
    cls = BACKENDS[backend]
    seen: dict[str, str] = {}
    for part in cls.__mro__[1:]:
        if not part.__module__.startswith(f"scheduler.store.{backend}."):
            continue
        for name, value in vars(part).items():
            if name.startswith("__") or not callable(value):
                continue
            assert name not in seen, f"{name}: in {seen[name]} and {part.__qualname__}"
            seen[name] = part.__qualname__


def _module_of(path: Path) -> str:
    rel = path.relative_to(STORE.parent.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _store_imports() -> dict[str, set[str]]:
    """Module -> the scheduler.store modules it imports (TYPE_CHECKING ones included)."""
    files = {_module_of(p): p for p in STORE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for mod, path in files.items():
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                for alias in node.names:
                    full = f"{node.module}.{alias.name}"
                    target = full if full in files else node.module
                    if target in files and target != mod:
                        deps.add(target)
            elif isinstance(node, ast.Import):
                deps |= {a.name for a in node.names if a.name in files}
        graph[mod] = deps
    return graph


def test_no_import_cycles_in_the_store() -> None:
    graph = _store_imports()
    done: set[str] = set()

    def visit(mod: str, stack: list[str]) -> None:
        if mod in stack:
            raise AssertionError(" -> ".join([*stack[stack.index(mod) :], mod]))
        if mod in done:
            return
        for dep in sorted(graph[mod]):
            visit(dep, [*stack, mod])
        done.add(mod)

    for mod in sorted(graph):
        visit(mod, [])


def test_no_store_module_over_600_lines() -> None:
    for path in STORE.rglob("*.py"):
        assert len(path.read_text().splitlines()) <= 600, path
