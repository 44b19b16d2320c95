"""``tickwheel workflows``, ``schedules`` and ``expectations`` (client commands).

A workflow file is JSON::

    {"name": "nightly-etl", "idempotency_key": "etl-2030-01-01",
     "on_upstream_failure": "cancel",
     "nodes": [{"id": "extract", "type": "extract", "payload": {"day": "2030-01-01"}},
               {"id": "load", "type": "load", "pool": "critical", "depends_on": ["extract"]}],
     "edges": [["extract", "load"]]}

Node keys: ``id``, ``type`` (required), ``payload``, ``scheduled_at`` (ISO, UTC if no
offset), ``pool``, ``strict_timing``, ``jitter_mode``, ``max_retries``, ``timeout_s`` and
``depends_on`` (parent ids, the same as edges). Edges are ``[parent, child]`` pairs or
``{"parent": ..., "child": ...}`` objects.

Calls the client SDK through ``_runner.with_client``; registered by ``_main``.
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from datetime import UTC, datetime
from typing import Any

import click

from scheduler._errors import NotFound
from scheduler.cli._options import api_key_option, client_options, json_option, wide_option
from scheduler.cli._output import (
    print_expectations,
    print_json,
    print_rows,
    print_schedule,
    print_schedules,
    print_workflow,
)
from scheduler.cli._runner import run_coro, with_client
from scheduler.client import (
    Client,
    JitterMode,
    OverlapPolicy,
    Pool,
    ScheduleInfo,
    TaskSpec,
    UpstreamPolicy,
)

_NODE_KEYS = frozenset(
    {
        "id",
        "type",
        "payload",
        "scheduled_at",
        "pool",
        "strict_timing",
        "jitter_mode",
        "max_retries",
        "timeout_s",
        "depends_on",
    }
)
_FILE_KEYS = frozenset({"name", "idempotency_key", "on_upstream_failure", "nodes", "edges"})


class WorkflowFileError(ValueError):
    """A workflow file that does not describe a workflow; the message names the path."""


def _enum(cls: Any, value: Any, where: str) -> Any:
    try:
        return cls(str(value).lower())
    except ValueError:
        names = ", ".join(m.value for m in cls)
        raise WorkflowFileError(f"{where}: {value!r} is not one of {names}") from None


def _node(i: int, raw: Any) -> tuple[str, TaskSpec, list[str]]:
    where = f"nodes[{i}]"
    if not isinstance(raw, dict):
        raise WorkflowFileError(f"{where}: must be an object")
    unknown = sorted(set(raw) - _NODE_KEYS)
    if unknown:
        raise WorkflowFileError(f"{where}: unknown keys {', '.join(unknown)}")
    node_id, task_type = raw.get("id"), raw.get("type")
    if not isinstance(node_id, str) or not node_id:
        raise WorkflowFileError(f"{where}.id: a non-empty string is required")
    if not isinstance(task_type, str) or not task_type:
        raise WorkflowFileError(f"{where}.type: a non-empty string is required")
    payload = raw.get("payload", {})
    if not isinstance(payload, dict):
        raise WorkflowFileError(f"{where}.payload: must be an object")
    when = None
    if raw.get("scheduled_at") is not None:
        try:
            when = datetime.fromisoformat(str(raw["scheduled_at"]))
        except ValueError:
            raise WorkflowFileError(f"{where}.scheduled_at: not an ISO time") from None
        when = when if when.tzinfo else when.replace(tzinfo=UTC)
    depends_on = raw.get("depends_on", [])
    if not isinstance(depends_on, list) or not all(isinstance(p, str) for p in depends_on):
        raise WorkflowFileError(f"{where}.depends_on: must be a list of node ids")
    for key in ("max_retries", "timeout_s"):
        value = raw.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise WorkflowFileError(f"{where}.{key}: must be a number")
    # Outside the try below: these name their own field (nodes[0].pool), and that
    # message must not gain the node's prefix twice.
    pool = _enum(Pool, raw.get("pool", "standard"), f"{where}.pool")
    jitter_mode = (
        _enum(JitterMode, raw["jitter_mode"], f"{where}.jitter_mode")
        if raw.get("jitter_mode")
        else None
    )
    try:
        spec = TaskSpec(
            type=task_type,
            payload=payload,
            scheduled_at=when,
            pool=pool,
            strict_timing=bool(raw.get("strict_timing", False)),
            jitter_mode=jitter_mode,
            max_retries=None if raw.get("max_retries") is None else int(raw["max_retries"]),
            timeout_s=float(raw.get("timeout_s") or 0.0),
        )
    except ValueError as exc:
        raise WorkflowFileError(f"{where}: {exc}") from None
    return node_id, spec, depends_on


def _edge(j: int, raw: Any) -> tuple[str, str]:
    if isinstance(raw, dict) and set(raw) == {"parent", "child"}:
        raw = [raw["parent"], raw["child"]]
    if not (isinstance(raw, list) and len(raw) == 2 and all(isinstance(x, str) for x in raw)):
        raise WorkflowFileError(
            f"edges[{j}]: must be [parent, child] or {{'parent': ..., 'child': ...}}"
        )
    return raw[0], raw[1]


def parse_workflow_file(doc: Any) -> dict[str, Any]:
    """Keyword arguments for :meth:`Client.submit_workflow` from a workflow document."""
    if not isinstance(doc, dict):
        raise WorkflowFileError("the file must hold a JSON object")
    unknown = sorted(set(doc) - _FILE_KEYS)
    if unknown:
        raise WorkflowFileError(f"unknown keys {', '.join(unknown)}")
    raw_nodes = doc.get("nodes")
    if not isinstance(raw_nodes, list) or not raw_nodes:
        raise WorkflowFileError("nodes: a non-empty list is required")
    nodes: dict[str, TaskSpec] = {}
    edges: list[tuple[str, str]] = []
    for i, raw in enumerate(raw_nodes):
        node_id, spec, parents = _node(i, raw)
        if node_id in nodes:
            raise WorkflowFileError(f"nodes[{i}].id: duplicate node id {node_id!r}")
        nodes[node_id] = spec
        edges.extend((p, node_id) for p in parents)
    raw_edges = doc.get("edges", [])
    if not isinstance(raw_edges, list):
        raise WorkflowFileError("edges: must be a list")
    edges.extend(_edge(j, raw) for j, raw in enumerate(raw_edges))
    for key in ("name", "idempotency_key"):
        if not isinstance(doc.get(key, ""), str):
            raise WorkflowFileError(f"{key}: must be a string")
    return {
        "nodes": nodes,
        "edges": edges,
        "name": doc.get("name", ""),
        "idempotency_key": doc.get("idempotency_key") or None,
        "on_upstream_failure": _enum(
            UpstreamPolicy, doc.get("on_upstream_failure", "cancel"), "on_upstream_failure"
        ),
    }


def _payload(text: str, hint: str) -> dict[str, Any]:
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise click.BadParameter(f"not JSON: {exc}", param_hint=hint) from None
    if not isinstance(data, dict):
        raise click.BadParameter("must be a JSON object", param_hint=hint)
    return data


# -- workflows -----------------------------------------------------------------------


@click.group()
def workflows() -> None:
    """Submit and inspect DAG workflows (docs/workflows.md)."""


@workflows.command(name="submit")
@click.argument("file", type=click.File("r"))
@wide_option
@client_options
@api_key_option
@json_option
def workflows_submit(file: Any, wide: bool, as_json: bool, **kw: Any) -> None:
    """Submit the workflow described by FILE (JSON; '-' reads stdin)."""
    try:
        args = parse_workflow_file(json.load(file))
    except ValueError as exc:  # JSONDecodeError and WorkflowFileError
        raise click.BadParameter(str(exc), param_hint="FILE") from None
    wf = run_coro(with_client(kw, lambda c: c.submit_workflow(**args)))
    print_json(wf) if as_json else print_workflow(wf, wide=wide)


@workflows.command(name="get")
@click.argument("workflow_id")
@wide_option
@client_options
@api_key_option
@json_option
def workflows_get(workflow_id: str, wide: bool, as_json: bool, **kw: Any) -> None:
    """Show a workflow and every node's state."""
    wf = run_coro(with_client(kw, lambda c: c.get_workflow(workflow_id)))
    print_json(wf) if as_json else print_workflow(wf, wide=wide)


@workflows.command(name="list")
@click.option("--limit", type=click.IntRange(1, 1000), default=100, show_default=True)
@client_options
@api_key_option
@json_option
def workflows_list(limit: int, as_json: bool, **kw: Any) -> None:
    """List the tenant's workflows, newest first."""
    found = run_coro(with_client(kw, lambda c: c.list_workflows(limit=limit)))
    if as_json:
        headers = [_fields(w) for w in found]
        print_json([{k: v for k, v in h.items() if k not in ("nodes", "edges")} for h in headers])
        return
    head = ("id", "name", "nodes", "on_upstream_failure", "created_at")
    rows = [
        (
            str(w.id),
            w.name,
            str(w.node_count),
            w.on_upstream_failure.value,
            w.created_at.isoformat(timespec="seconds"),
        )
        for w in found
    ]
    print_rows(head, rows, wide=True)


@workflows.command(name="cancel")
@click.argument("workflow_id")
@client_options
@api_key_option
@json_option
def workflows_cancel(workflow_id: str, as_json: bool, **kw: Any) -> None:
    """Cancel every node of a workflow that has not finished (finished ones stay)."""
    wf, stopped = run_coro(with_client(kw, lambda c: c.cancel_workflow(workflow_id)))
    if as_json:
        print_json({"cancelled": stopped, "workflow": _fields(wf)})
        return
    click.echo(f"cancelled {stopped} node(s)")
    print_workflow(wf)


def _fields(obj: Any) -> dict[str, Any]:
    return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}


# -- schedules -----------------------------------------------------------------------


async def _schedule_id(client: Client, ref: str) -> uuid.UUID:
    """A schedule id from an id or a name of the caller's tenant."""
    try:
        return uuid.UUID(ref)
    except ValueError:
        pass
    for s in await client.list_schedules():
        if s.name == ref:
            return s.id
    raise NotFound("schedule", ref)


@click.group()
def schedules() -> None:
    """Cron and interval schedules (docs/workflows.md). SCHEDULE is an id or a name."""


@schedules.command(name="create")
@click.argument("name")
@click.option("--type", "task_type", required=True, help="Task type of every occurrence.")
@click.option("--payload", default="{}", help="JSON object handed to every occurrence.")
@click.option("--cron", help="5 fields, or 6 with seconds first ('*/10 * * * * *').")
@click.option("--interval-s", type=float, help="Fixed interval instead of --cron.")
@click.option("--timezone", default="UTC", show_default=True, help="IANA zone of --cron.")
@click.option("--pool", type=click.Choice([p.value for p in Pool]), default=Pool.STANDARD.value)
@click.option("--max-retries", type=int, help="Retries per occurrence (default 3).")
@click.option("--timeout-s", type=float, default=0.0)
@click.option(
    "--overlap",
    type=click.Choice([o.value for o in OverlapPolicy]),
    default=OverlapPolicy.SKIP.value,
    show_default=True,
    help="When an occurrence falls due while the last one is still live.",
)
@click.option("--catchup-window-s", type=float, help="Catch-up window after downtime (60).")
@click.option(
    "--jitter-s",
    type=float,
    help="Late-only jitter bound in seconds (default: a tenth of the period, at most 120).",
)
@click.option("--paused", is_flag=True, help="Create it paused.")
@client_options
@api_key_option
@json_option
def schedules_create(
    name: str,
    task_type: str,
    payload: str,
    cron: str | None,
    interval_s: float | None,
    timezone: str,
    pool: str,
    max_retries: int | None,
    timeout_s: float,
    overlap: str,
    catchup_window_s: float | None,
    jitter_s: float | None,
    paused: bool,
    as_json: bool,
    **kw: Any,
) -> None:
    """Create schedule NAME (give exactly one of --cron and --interval-s)."""
    if bool(cron) == (interval_s is not None):
        raise click.UsageError("give exactly one of --cron and --interval-s")
    data = _payload(payload, "--payload")
    s = run_coro(
        with_client(
            kw,
            lambda c: c.create_schedule(
                name,
                task_type,
                data,
                cron=cron,
                interval_s=interval_s,
                timezone=timezone,
                pool=Pool(pool),
                max_retries=max_retries,
                timeout_s=timeout_s,
                overlap_policy=OverlapPolicy(overlap),
                catchup_window_s=catchup_window_s,
                jitter_s=jitter_s,
                paused=paused,
            ),
        )
    )
    print_json(s) if as_json else print_schedule(s)


def _on_schedule(action: str, ref: str, as_json: bool, kw: dict[str, Any]) -> None:
    async def run(c: Client) -> ScheduleInfo:
        sid = await _schedule_id(c, ref)
        if action == "pause":
            return await c.pause_schedule(sid)
        if action == "resume":
            return await c.resume_schedule(sid)
        return await c.get_schedule(sid)

    s = run_coro(with_client(kw, run))
    print_json(s) if as_json else print_schedule(s)


@schedules.command(name="get")
@click.argument("schedule")
@client_options
@api_key_option
@json_option
def schedules_get(schedule: str, as_json: bool, **kw: Any) -> None:
    """Show a schedule."""
    _on_schedule("get", schedule, as_json, kw)


@schedules.command(name="list")
@wide_option
@client_options
@api_key_option
@json_option
def schedules_list(wide: bool, as_json: bool, **kw: Any) -> None:
    """List the tenant's schedules."""
    found = run_coro(with_client(kw, lambda c: c.list_schedules()))
    print_json(found) if as_json else print_schedules(found, wide=wide)


@schedules.command(name="pause")
@click.argument("schedule")
@client_options
@api_key_option
@json_option
def schedules_pause(schedule: str, as_json: bool, **kw: Any) -> None:
    """Stop creating occurrences."""
    _on_schedule("pause", schedule, as_json, kw)


@schedules.command(name="resume")
@click.argument("schedule")
@client_options
@api_key_option
@json_option
def schedules_resume(schedule: str, as_json: bool, **kw: Any) -> None:
    """Create occurrences again, from the first one after now."""
    _on_schedule("resume", schedule, as_json, kw)


@schedules.command(name="delete")
@click.argument("schedule")
@client_options
@api_key_option
@json_option
def schedules_delete(schedule: str, as_json: bool, **kw: Any) -> None:
    """Delete a schedule (the tasks it created stay)."""

    async def run(c: Client) -> uuid.UUID:
        sid = await _schedule_id(c, schedule)
        await c.delete_schedule(sid)
        return sid

    sid = run_coro(with_client(kw, run))
    if as_json:
        print_json({"id": str(sid), "deleted": True})
    else:
        click.echo(f"deleted schedule {sid}")


# -- expectations --------------------------------------------------------------------


@click.group()
def expectations() -> None:
    """Dead man's switch expectations that `tickwheel watchdog` checks."""


@expectations.command(name="register")
@click.argument("job_id", required=False)
@click.option("--schedule", help="A schedule (id or name) instead of / besides JOB_ID.")
@click.option("--interval-s", type=int, required=True, help="Expected completion interval.")
@click.option("--tolerance-s", type=int, default=300, show_default=True, help="Slack allowed.")
@click.option("--max-runtime-s", type=int, help="A running task older than this is stuck.")
@client_options
@api_key_option
@json_option
def expectations_register(
    job_id: str | None,
    schedule: str | None,
    interval_s: int,
    tolerance_s: int,
    max_runtime_s: int | None,
    as_json: bool,
    **kw: Any,
) -> None:
    """Expect JOB_ID (a task type or schedule name), or --schedule, to complete every
    --interval-s. Registering the same job id again replaces it."""
    if not job_id and not schedule:
        raise click.UsageError("give JOB_ID or --schedule")
    if min(interval_s, tolerance_s, max_runtime_s or 0) < 0:
        raise click.UsageError("seconds must not be negative")

    async def run(c: Client) -> Any:
        sid = await _schedule_id(c, schedule) if schedule else None
        return await c.register_expectation(
            job_id,
            schedule_id=sid,
            interval_s=interval_s,
            tolerance_s=tolerance_s,
            max_runtime_s=max_runtime_s,
        )

    e = run_coro(with_client(kw, run))
    print_json(e) if as_json else print_expectations([e])


@expectations.command(name="list")
@wide_option
@client_options
@api_key_option
@json_option
def expectations_list(wide: bool, as_json: bool, **kw: Any) -> None:
    """List the tenant's expectations: each one's status now (ok, late, stuck), its last
    matching completion and the deadline after which the watchdog alerts."""
    found = run_coro(with_client(kw, lambda c: c.list_expectations()))
    print_json(found) if as_json else print_expectations(found, wide=wide)


@expectations.command(name="delete")
@click.argument("job_id")
@client_options
@api_key_option
def expectations_delete(job_id: str, **kw: Any) -> None:
    """Delete the tenant's expectation for JOB_ID: the watchdog stops checking it."""
    run_coro(with_client(kw, lambda c: c.delete_expectation(job_id)))
    click.echo(f"deleted expectation {job_id}")
