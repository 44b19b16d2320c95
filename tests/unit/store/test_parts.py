"""Unit tests: a store part built alone (no facade), and the package's layout rules."""

from __future__ import annotations

import ast
import asyncio
import concurrent.futures
import importlib.util
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

from scheduler.states import TaskState
from scheduler.store import StoreConfig
from scheduler.store.sqlite._db import SQL, Db, connect
from scheduler.store.sqlite.dispatch import Dispatch
from scheduler.store.sqlite.tasks import Tasks
from scheduler.store.sqlite.tenants import Tenants
from scheduler.types import NewTask, Tenant

NOW = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)
STORE = Path(importlib.util.find_spec("scheduler.store").origin or "").parent  # type: ignore[union-attr]


async def test_sqlite_parts_work_without_the_facade() -> None:
    executor = concurrent.futures.ThreadPoolExecutor(1)
    conn = await asyncio.get_running_loop().run_in_executor(executor, connect, ":memory:")
    db = Db(conn, executor)
    try:
        config = StoreConfig()
        tenant = await Tenants(db, SQL).create_tenant(Tenant(id=uuid.uuid4(), name="acme"))
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
