"""``tickwheel rate-limits`` (set, list, delete), ``pause``, ``resume`` and ``pauses``:
flow control by key (issue 43, docs/flow-control.md)."""

from __future__ import annotations

from typing import Any

import click

from scheduler.cli._options import api_key_option, client_options, json_option
from scheduler.cli._output import print_json, print_rows
from scheduler.cli._runner import run_coro, with_client
from scheduler.client import PauseInfo, Pool


@click.group(name="rate-limits")
def rate_limits() -> None:
    """Rate limits by key: tasks naming a key start no faster than its bucket allows."""


@rate_limits.command(name="set")
@click.argument("key")
@click.option("--rate", type=float, required=True, help="Starts a second (0.5: one per 2 s).")
@click.option("--burst", type=int, default=0, help="Largest burst (default max(1, rate)).")
@client_options
@api_key_option
@json_option
def rate_limits_set(key: str, rate: float, burst: int, as_json: bool, **kw: Any) -> None:
    """Set (or replace) KEY's rate limit."""
    r = run_coro(with_client(kw, lambda c: c.set_rate_limit(key, rate, burst)))
    if as_json:
        print_json(r)
    else:
        click.echo(f"rate limit {r.key}: {r.rate:g}/s, burst {r.burst}")


@rate_limits.command(name="list")
@client_options
@api_key_option
@json_option
def rate_limits_list(as_json: bool, **kw: Any) -> None:
    """The tenant's rate limits."""
    rows = run_coro(with_client(kw, lambda c: c.list_rate_limits()))
    if as_json:
        print_json(rows)
        return
    print_rows(
        ("key", "rate/s", "burst", "updated"),
        [(r.key, f"{r.rate:g}", str(r.burst), r.updated_at.isoformat()) for r in rows],
    )


@rate_limits.command(name="delete")
@click.argument("key")
@client_options
@api_key_option
def rate_limits_delete(key: str, **kw: Any) -> None:
    """Remove KEY's rate limit (its tasks are no longer held)."""
    run_coro(with_client(kw, lambda c: c.delete_rate_limit(key)))
    click.echo(f"rate limit {key} deleted")


_POOL = click.Choice([p.value for p in Pool])


def _describe(p: PauseInfo) -> str:
    who = "every tenant" if p.tenant_id is None else f"tenant {p.tenant_id}"
    return f"{who}, type {p.task_type or '*'}, pool {p.pool.value if p.pool else '*'}"


def _flow_options(fn: Any) -> Any:
    fn = click.option("--type", "task_type", help="The task type (default: every type).")(fn)
    fn = click.option("--pool", type=_POOL, help="The pool (default: every pool).")(fn)
    fn = click.option(
        "--all-tenants", is_flag=True, help="Every tenant (the admin token, no --tenant)."
    )(fn)
    return fn


@click.command()
@_flow_options
@client_options
@api_key_option
@json_option
def pause(
    task_type: str | None, pool: str | None, all_tenants: bool, as_json: bool, **kw: Any
) -> None:
    """Pause dispatch of a task type and/or pool: its tasks stay PRELOADED and start,
    in due order, on `tickwheel resume` with the same options."""
    p = run_coro(
        with_client(
            kw,
            lambda c: c.pause_dispatch(
                task_type, Pool(pool) if pool else None, all_tenants=all_tenants
            ),
        )
    )
    print_json(p) if as_json else click.echo(f"paused: {_describe(p)}")


@click.command()
@_flow_options
@client_options
@api_key_option
def resume(task_type: str | None, pool: str | None, all_tenants: bool, **kw: Any) -> None:
    """Resume dispatch paused by `tickwheel pause` with the same options."""
    run_coro(
        with_client(
            kw,
            lambda c: c.resume_dispatch(
                task_type, Pool(pool) if pool else None, all_tenants=all_tenants
            ),
        )
    )
    click.echo(f"resumed: type {task_type or '*'}, pool {pool or '*'}")


@click.command()
@client_options
@api_key_option
@json_option
def pauses(as_json: bool, **kw: Any) -> None:
    """The dispatch pauses that apply to the tenant."""
    rows = run_coro(with_client(kw, lambda c: c.list_dispatch_pauses()))
    if as_json:
        print_json(rows)
        return
    print_rows(
        ("tenant", "type", "pool", "paused at"),
        [
            (
                "*" if p.tenant_id is None else str(p.tenant_id),
                p.task_type or "*",
                p.pool.value if p.pool else "*",
                p.paused_at.isoformat(),
            )
            for p in rows
        ],
    )
