"""``tickwheel submit``, ``get``, ``cancel``, ``redrive``, ``list`` and ``history``
(client commands).

Calls the client SDK through ``_runner.with_client``; registered by ``_main``.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import click

from scheduler.cli._options import api_key_option, client_options, json_option
from scheduler.cli._output import (
    print_history,
    print_json,
    print_task,
    print_task_json,
    print_tasks,
    task_doc,
)
from scheduler.cli._runner import run_coro, with_client
from scheduler.client import Client, JitterMode, Pool, Task, TaskOrder, TaskState


def _when(at: str | None, in_s: float | None) -> datetime | None:
    if at and in_s is not None:
        raise click.UsageError("give --at or --in, not both")
    if in_s is not None:
        return datetime.now(UTC) + timedelta(seconds=in_s)
    if at:
        return parse_at(at)
    return None


AT_FORMATS = (
    "an ISO 8601 time such as 2030-01-31T09:00:00Z, 2030-01-31 09:00+01:00 or "
    "2030-01-31 (UTC when no offset is given)"
)


def parse_at(at: str, hint: str = "--at") -> datetime:
    """``--at`` as an aware time; anything else is a usage error naming the formats."""
    try:
        when = datetime.fromisoformat(at.strip())
    except ValueError:
        raise click.BadParameter(
            f"{at!r} is not a time: give {AT_FORMATS}, or use --in SECONDS", param_hint=hint
        ) from None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


@click.command()
@click.argument("task_type")
@click.option("--payload", default="{}", help="JSON object.")
@click.option("--at", help="ISO time to run (UTC if no offset).")
@click.option("--in", "in_s", type=float, help="Run in this many seconds.")
@click.option("--idempotency-key")
@click.option("--pool", type=click.Choice([p.value for p in Pool]), default=Pool.STANDARD.value)
@click.option("--strict", is_flag=True, help="Strict timing: no jitter, even on a round instant.")
@click.option(
    "--jitter",
    type=click.Choice([j.value for j in JitterMode]),
    help=(
        "Jitter mode. Default: a task never runs before the time asked; one asked for a "
        "whole minute (--at 12:00:00) is spread late-only over the jitter window (120 s) "
        "to smooth stampedes, any other time (--in 30) runs at that time. late_only: "
        "always spread late. symmetric: may run up to the window EARLY. none: no jitter."
    ),
)
@click.option("--max-retries", type=int)
@click.option("--timeout-s", type=float, default=0.0)
@client_options
@api_key_option
@json_option
def submit(
    task_type: str,
    payload: str,
    at: str | None,
    in_s: float | None,
    idempotency_key: str | None,
    pool: str,
    strict: bool,
    jitter: str | None,
    max_retries: int | None,
    timeout_s: float,
    as_json: bool,
    **kw: Any,
) -> None:
    """Submit one task."""
    try:
        data = json.loads(payload)
    except ValueError as exc:
        raise click.BadParameter(f"not JSON: {exc}", param_hint="--payload") from None
    if not isinstance(data, dict):
        raise click.BadParameter("must be a JSON object", param_hint="--payload")
    when = _when(at, in_s)
    task = run_coro(
        with_client(
            kw,
            lambda c: c.submit(
                task_type,
                data,
                scheduled_at=when,
                idempotency_key=idempotency_key,
                pool=Pool(pool),
                strict_timing=strict,
                jitter_mode=JitterMode(jitter) if jitter else None,
                max_retries=max_retries,
                timeout_s=timeout_s,
            ),
        )
    )
    print_task_json(task, submitted=True) if as_json else print_task(task, submitted=True)


@click.command()
@click.argument("task_id")
@client_options
@api_key_option
@json_option
def get(task_id: str, as_json: bool, **kw: Any) -> None:
    """Show one task."""
    task = run_coro(with_client(kw, lambda c: c.get(task_id)))
    print_task_json(task) if as_json else print_task(task)


@click.command()
@click.argument("task_id")
@client_options
@api_key_option
@json_option
def cancel(task_id: str, as_json: bool, **kw: Any) -> None:
    """Cancel a task."""
    task = run_coro(with_client(kw, lambda c: c.cancel(task_id)))
    print_task_json(task) if as_json else print_task(task)


@click.command()
@click.argument("task_id")
@click.option("--at", help="ISO time to run again (default now).")
@client_options
@api_key_option
@json_option
def redrive(task_id: str, at: str | None, as_json: bool, **kw: Any) -> None:
    """Move a DEAD_LETTER task back to SCHEDULED."""
    when = _when(at, None)
    task = run_coro(with_client(kw, lambda c: c.redrive(task_id, scheduled_at=when)))
    print_task_json(task) if as_json else print_task(task)


_ORDERS = {
    ("created", "desc"): TaskOrder.CREATED_DESC,
    ("created", "asc"): TaskOrder.CREATED_ASC,
    ("scheduled", "desc"): TaskOrder.SCHEDULED_DESC,
    ("scheduled", "asc"): TaskOrder.SCHEDULED_ASC,
}


@click.command(name="list")
@click.option(
    "--state",
    "states",
    multiple=True,
    type=click.Choice([s.value for s in TaskState], case_sensitive=False),
    help="Only tasks in this state (repeatable).",
)
@click.option("--type", "task_type", help="Only tasks of this type.")
@click.option(
    "--sort",
    type=click.Choice(["created", "scheduled"]),
    default="created",
    show_default=True,
    help="created: submission order; scheduled: the time asked for (before jitter).",
)
@click.option(
    "--order",
    type=click.Choice(["desc", "asc"]),
    default="desc",
    show_default=True,
    help="desc: newest or latest first.",
)
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    default=100,
    show_default=True,
    help="Show at most this many (a line on stderr says when more exist).",
)
@click.option("--page-token", default="", help="Continue where a previous list stopped.")
@click.option("--wide", is_flag=True, help="Never cut a column (the default when piped).")
@client_options
@api_key_option
@json_option
def list_(
    states: tuple[str, ...],
    task_type: str | None,
    sort: str,
    order: str,
    limit: int,
    page_token: str,
    wide: bool,
    as_json: bool,
    **kw: Any,
) -> None:
    """List tasks, newest first. DUE_AT is the effective due time (after jitter and
    retry backoff); RETRIES is failed attempts of those allowed."""
    task_order = _ORDERS[(sort, order)]

    async def fetch(c: Client) -> tuple[list[Task], str]:
        out: list[Task] = []
        token = page_token
        while len(out) < limit:
            page = await c.list_page(
                states=[TaskState(s.upper()) for s in states],
                type=task_type,
                page_size=min(limit - len(out), 1000),
                page_token=token,
                order=task_order,
            )
            out.extend(page.tasks)
            token = page.next_page_token
            if not token:
                break
        return out, token

    tasks, more = run_coro(with_client(kw, fetch))
    if as_json:
        print_json([task_doc(t) for t in tasks])
    else:
        print_tasks(tasks, wide=wide)
    if more:
        click.echo(
            f"more tasks exist: continue with --page-token {more} (same --sort and --order)",
            err=True,
        )


@click.command()
@click.argument("task_id")
@client_options
@api_key_option
@json_option
def history(task_id: str, as_json: bool, **kw: Any) -> None:
    """Every state change of a task, oldest first: when, from and to which state, the
    fencing token, the shard epoch (PostgreSQL), who wrote it (a worker id or a node)
    and why."""
    found = run_coro(with_client(kw, lambda c: c.history(task_id)))
    print_json(found) if as_json else print_history(found)
