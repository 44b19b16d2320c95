"""``tickwheel tenants`` and ``tickwheel keys`` (admin commands).

Calls the admin client through ``_runner.with_admin``; registered by ``_main``.
"""

from __future__ import annotations

from typing import Any

import click

from scheduler.cli._options import admin_token_option, client_options, json_option
from scheduler.cli._output import print_json
from scheduler.cli._runner import run_coro, with_admin


@click.group()
def tenants() -> None:
    """Manage tenants (admin)."""


@tenants.command(name="create")
@click.argument("name")
@click.option("--tier", type=click.Choice(["STANDARD", "ENTERPRISE", "SYSTEM"]), default="STANDARD")
@click.option("--rate-limit-rps", type=int, default=0)
@click.option("--max-concurrent-workers", type=int, default=0)
@client_options
@admin_token_option
@json_option
def tenants_create(
    name: str, tier: str, rate_limit_rps: int, max_concurrent_workers: int, as_json: bool, **kw: Any
) -> None:
    """Create a tenant."""
    t = run_coro(
        with_admin(
            kw,
            lambda a: a.create_tenant(
                name,
                tier=tier,
                rate_limit_rps=rate_limit_rps,
                max_concurrent_workers=max_concurrent_workers,
            ),
        )
    )
    if as_json:
        print_json(t)
    else:
        click.echo(f"tenant {t.id} ({t.name}, {t.tier})")


@click.group()
def keys() -> None:
    """Manage API keys (admin)."""


@keys.command(name="create")
@click.argument("tenant_id")
@click.option("--name", default="default", show_default=True)
@client_options
@admin_token_option
@json_option
def keys_create(tenant_id: str, name: str, as_json: bool, **kw: Any) -> None:
    """Create an API key; the secret is printed only once."""
    k = run_coro(with_admin(kw, lambda a: a.create_api_key(tenant_id, name)))
    if as_json:
        print_json(k)
    else:
        click.echo(f"key {k.key_id}\nsecret (shown once): {k.secret}")
