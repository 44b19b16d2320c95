"""``tickwheel submit``, ``get``, ``cancel``, ``redrive`` and ``list`` (client commands).

Calls the client SDK through ``_runner.with_client``; registered by ``_main``.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import click

from scheduler.cli._options import api_key_option, client_options, json_option
from scheduler.cli._output import print_json, print_task, print_tasks
from scheduler.cli._runner import run_coro, with_client
from scheduler.client import Client, JitterMode, Pool, TaskState


def _when(at: str | None, in_s: float | None) -> datetime | None:
    if at and in_s is not None:
        raise click.UsageError("give --at or --in, not both")
    if in_s is not None:
        return datetime.now(UTC) + timedelta(seconds=in_s)
    if at:
        when = datetime.fromisoformat(at)
        return when if when.tzinfo else when.replace(tzinfo=UTC)
    return None


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
    print_json(task) if as_json else print_task(task)


@click.command()
@click.argument("task_id")
@client_options
@api_key_option
@json_option
def get(task_id: str, as_json: bool, **kw: Any) -> None:
    """Show one task."""
    task = run_coro(with_client(kw, lambda c: c.get(task_id)))
    print_json(task) if as_json else print_task(task)


@click.command()
@click.argument("task_id")
@client_options
@api_key_option
@json_option
def cancel(task_id: str, as_json: bool, **kw: Any) -> None:
    """Cancel a task."""
    task = run_coro(with_client(kw, lambda c: c.cancel(task_id)))
    print_json(task) if as_json else print_task(task)


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
    print_json(task) if as_json else print_task(task)


@click.command(name="list")
@click.option(
    "--state",
    "states",
    multiple=True,
    type=click.Choice([s.value for s in TaskState], case_sensitive=False),
)
@click.option("--type", "task_type")
@click.option("--limit", type=int, default=100, show_default=True)
@client_options
@api_key_option
@json_option
def list_(
    states: tuple[str, ...], task_type: str | None, limit: int, as_json: bool, **kw: Any
) -> None:
    """List tasks."""

    async def fetch(c: Client) -> list[Any]:
        out = []
        async for t in c.list(
            states=[TaskState(s.upper()) for s in states],
            type=task_type,
            page_size=min(limit, 1000),
        ):
            out.append(t)
            if len(out) >= limit:
                break
        return out

    tasks = run_coro(with_client(kw, fetch))
    print_json(tasks) if as_json else print_tasks(tasks)
