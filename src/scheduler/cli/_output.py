"""Printing results: rich tables for people, JSON for scripts (``--json``)."""

from __future__ import annotations

import dataclasses
import enum
import json
import uuid
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from scheduler import logs
from scheduler.client import ExpectationInfo, ScheduleInfo, Task, Transition, WorkflowInfo
from scheduler.types import dispatch_note

console = Console()
err_console = Console(stderr=True)


def note(text: str) -> None:
    """A command's notice on stderr (serving on, drained): a JSON line of logger
    ``tickwheel.cli`` under ``--log-format json``, else plain text."""
    if not logs.json_notice("tickwheel.cli", text):
        # click, not rich: rich wraps at 80 columns when stderr is not a terminal (a
        # log file, a pipe) and reads "[...]" as markup.
        click.echo(text, err=True)


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
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


_TASK_FIELDS_SHOWN_FIRST = ("id", "type", "state", "due_at", "scheduled_at")


def task_doc(task: Task, *, submitted: bool = False) -> dict[str, Any]:
    """A task as JSON-ready fields. ``created`` (did this submit create it, or did its
    idempotency key name an existing task?) belongs to a submit's answer only."""
    doc = {f.name: getattr(task, f.name) for f in dataclasses.fields(task)}
    if not submitted:
        del doc["created"]
        del doc["debounced"]
        del doc["throttled"]
    return doc


def print_task_json(task: Task, *, submitted: bool = False) -> None:
    """One task as one JSON document on stdout."""
    print(json.dumps(_plain(task_doc(task, submitted=submitted)), sort_keys=True))


def print_task(task: Task, *, submitted: bool = False) -> None:
    """A task as a two-column table; ``due_at`` is the effective due time (after jitter
    and retry backoff), ``scheduled_at`` the time asked for."""
    doc = task_doc(task)
    table = Table(show_header=False, box=None)
    names = [*_TASK_FIELDS_SHOWN_FIRST, *(n for n in doc if n not in _TASK_FIELDS_SHOWN_FIRST)]
    for name in names:
        value = doc[name]
        if value is None or value == "" or value == {}:
            continue
        label = {"due_at": "due_at (effective)", "scheduled_at": "scheduled_at (asked)"}.get(
            name, name
        )
        if name == "retry_count":
            label, value = "retries", f"{task.retry_count} of {task.max_retries}"
        elif name == "max_retries":
            continue
        table.add_row(
            f"[bold]{label}[/]",
            json.dumps(_plain(value)) if isinstance(value, dict) else str(_plain(value)),
        )
    console.print(table)
    if submitted and task.debounced:
        console.print("(debounced: this pending task of the key took the submission)")
    elif submitted and task.throttled:
        console.print("(throttled: inside the key's period; this is its task, nothing new)")
    elif submitted and not task.created:
        console.print("(existing task: the idempotency key matched; nothing was submitted)")


TASK_COLUMNS = ("id", "type", "state", "due_at", "retries", "worker")
"""``due_at`` is the effective due time; ``retries`` is failed attempts of those allowed."""


def _task_row(t: Task) -> tuple[str, ...]:
    return (
        str(t.id),
        t.type,
        t.state.value,
        t.due_at.isoformat(timespec="seconds"),
        f"{t.retry_count}/{t.max_retries}",
        t.worker_id or "",
    )


def print_rows(
    head: tuple[str, ...], rows: Sequence[tuple[str, ...]], *, wide: bool = False
) -> None:
    """Rows under a header: a table on a terminal; with ``wide`` or when stdout is not a
    terminal, plain aligned columns that never cut a value (ids stay whole)."""
    if wide or not console.is_terminal:
        widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
        for r in [head, *rows]:
            click.echo("  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip())
        return
    table = Table(*head)
    for r in rows:
        table.add_row(*r)
    console.print(table)


def print_tasks(tasks: Iterable[Task], *, wide: bool = False) -> None:
    """Tasks, one row each (see :func:`print_rows`)."""
    print_rows(TASK_COLUMNS, [_task_row(t) for t in tasks], wide=wide)


def print_history(transitions: Iterable[Transition]) -> None:
    """A task's audit, oldest first, in plain aligned columns."""
    head = ("at", "from", "to", "token", "epoch", "actor", "reason")
    rows = [
        (
            t.at.isoformat(timespec="milliseconds"),
            t.from_state.value,
            t.to_state.value,
            str(t.fencing_token),
            "" if t.epoch is None else str(t.epoch),
            t.actor,
            "; ".join(part for part in (t.reason, dispatch_note(t.at, t.due_at)) if part),
        )
        for t in transitions
    ]
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    for r in [head, *rows]:
        click.echo("  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip())


def print_workflow(wf: WorkflowInfo, *, wide: bool = False) -> None:
    """A workflow: one header line, the state counts, then one row per node."""
    created = "" if wf.created else " (existing: idempotency key matched)"
    click.echo(f"workflow {wf.id} {wf.name}{created}")
    counts = ", ".join(f"{s.value} {n}" for s, n in sorted(wf.state_counts().items()))
    click.echo(f"{wf.node_count} nodes: {counts}; on upstream failure: {wf.on_upstream_failure}")
    parents: dict[str, list[str]] = {}
    for parent, child in wf.edges:
        parents.setdefault(child, []).append(parent)
    head = ("node", "task_id", "type", "state", "due_at", "after", "error")
    rows = [
        (
            node_id,
            str(t.id),
            t.type,
            t.state.value,
            t.due_at.isoformat(),
            ",".join(parents.get(node_id, ())),
            t.last_error or "",
        )
        for node_id, t in wf.nodes.items()
    ]
    print_rows(head, rows, wide=wide)


def _every(s: ScheduleInfo) -> str:
    return f"cron {s.cron} ({s.timezone})" if s.cron else f"every {s.interval_s:g} s"


def print_schedules(schedules: Iterable[ScheduleInfo], *, wide: bool = False) -> None:
    """Schedules, one row each (see :func:`print_rows`)."""
    head = ("id", "name", "when", "type", "overlap", "state", "next_fire_at")
    rows = [
        (
            str(s.id),
            s.name,
            _every(s),
            s.task_type,
            s.overlap_policy.value,
            "paused" if s.paused else "active",
            s.next_fire_at.isoformat() if s.next_fire_at else "",
        )
        for s in schedules
    ]
    print_rows(head, rows, wide=wide)


def print_schedule(s: ScheduleInfo) -> None:
    """One schedule as a two-column table."""
    table = Table(show_header=False, box=None)
    for f in dataclasses.fields(s):
        value = getattr(s, f.name)
        if value is None or value == "":
            continue
        table.add_row(
            f"[bold]{f.name}[/]",
            json.dumps(_plain(value)) if isinstance(value, dict) else str(_plain(value)),
        )
    console.print(table)


def _at(value: datetime | None) -> str:
    return value.isoformat(timespec="seconds") if value else "-"


def print_expectations(items: Iterable[ExpectationInfo], *, wide: bool = False) -> None:
    """Expectations, one row each (see :func:`print_rows`): the watchdog's status now,
    the last matching completion and the deadline after which it alerts; ``-`` where
    there is none, so that piped columns split on blanks."""
    head = (
        "job_id",
        "status",
        "last_completed_at",
        "deadline_at",
        "interval_s",
        "tolerance_s",
        "max_runtime_s",
        "schedule_id",
        "id",
    )
    rows = [
        (
            e.job_id,
            e.status or "-",
            _at(e.last_completed_at),
            _at(e.deadline_at),
            str(e.interval_s),
            str(e.tolerance_s),
            str(e.max_runtime_s or "-"),
            str(e.schedule_id or "-"),
            str(e.id),
        )
        for e in items
    ]
    print_rows(head, rows, wide=wide)
