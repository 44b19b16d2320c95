"""``tickwheel concurrency``: the limits of concurrency keys (issue 43,
docs/flow-control.md). Calls the admin client with the platform admin token or a
tenant's API key with the admin scope (as ``tickwheel keys``)."""

from __future__ import annotations

from typing import Any

import click

from scheduler.cli._admin import _with_admin_or_key, admin_or_key_options
from scheduler.cli._options import client_options, json_option
from scheduler.cli._output import print_json
from scheduler.cli._runner import run_coro


@click.group()
def concurrency() -> None:
    """How many tasks of one concurrency key may run at once (per task type)."""


@concurrency.command(name="set")
@click.argument("tenant_id")
@click.argument("task_type")
@click.argument("limit", type=int)
@client_options
@admin_or_key_options
@json_option
def concurrency_set(tenant_id: str, task_type: str, limit: int, as_json: bool, **kw: Any) -> None:
    """At most LIMIT tasks of one key of TASK_TYPE run at once, cluster-wide
    (1..100000; 0: back to the default, 1)."""
    if limit < 0:
        raise click.BadParameter("must be 0 (clear) or 1..100000", param_hint="LIMIT")
    got = run_coro(
        _with_admin_or_key(kw, lambda a: a.set_concurrency_limit(tenant_id, task_type, limit))
    )
    if as_json:
        print_json({"tenant_id": tenant_id, "type": task_type, "limit": got})
    else:
        click.echo(f"{task_type}: at most {got} task(s) per concurrency key")


@concurrency.command(name="show")
@click.argument("tenant_id")
@client_options
@admin_or_key_options
@json_option
def concurrency_show(tenant_id: str, as_json: bool, **kw: Any) -> None:
    """The limits set for a tenant's task types (a type not listed: 1 per key)."""
    found = run_coro(_with_admin_or_key(kw, lambda a: a.concurrency_limits(tenant_id)))
    if as_json:
        print_json(found)
        return
    for typ, n in sorted(found.items()):
        click.echo(f"{typ}: {n}")
    click.echo(f"{len(found)} limit{'s' if len(found) != 1 else ''} set (other types: 1 per key)")
