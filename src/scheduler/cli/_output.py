"""Printing results: rich tables for people, JSON for scripts (``--json``)."""

from __future__ import annotations

import dataclasses
import enum
import json
import uuid
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from rich.console import Console
from rich.table import Table

from scheduler.client import Task

console = Console()
err_console = Console(stderr=True)


def _plain(value: Any) -> Any:
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def as_json(obj: Any) -> str:
    """JSON for a dataclass (or a list of them)."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        obj = {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
    elif isinstance(obj, list):
        return "[" + ",".join(as_json(o) for o in obj) + "]"
    return json.dumps(_plain(obj), sort_keys=True)


def print_json(obj: Any) -> None:
    """Print ``obj`` as one JSON document on stdout."""
    print(as_json(obj))


def print_task(task: Task) -> None:
    """A task as a two-column table."""
    table = Table(show_header=False, box=None)
    for f in dataclasses.fields(task):
        value = getattr(task, f.name)
        if value is None or value == "" or value == {}:
            continue
        table.add_row(
            f"[bold]{f.name}[/]",
            json.dumps(_plain(value)) if isinstance(value, dict) else str(_plain(value)),
        )
    console.print(table)


def print_tasks(tasks: Iterable[Task]) -> None:
    """Tasks as a table, one row each."""
    table = Table("id", "type", "state", "due_at", "attempts", "worker")
    for t in tasks:
        table.add_row(
            str(t.id),
            t.type,
            t.state.value,
            t.due_at.isoformat(),
            str(t.retry_count),
            t.worker_id or "",
        )
    console.print(table)
