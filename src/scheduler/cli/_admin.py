"""``tickwheel tenants`` and ``tickwheel keys`` (admin commands; docs/keys.md).

Calls the admin client through ``_runner.with_admin`` (tenants, with the platform admin
token) or :func:`_with_admin_or_key` (keys: the admin token, or a tenant's API key with
the ``admin`` scope); registered by ``_main``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import click

from scheduler.cli._options import admin_token_option, client_options, json_option
from scheduler.cli._output import as_json, print_json
from scheduler.cli._runner import run_coro, tls_config, with_admin
from scheduler.client import AdminClient, ApiKeyInfo, Scope, TenantInfo

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])

TIERS = ["STANDARD", "ENTERPRISE", "SYSTEM"]
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(value: str, flag: str) -> float:
    """``90``, ``45s``, ``15m``, ``12h`` or ``30d`` as seconds; a usage error otherwise."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*", value)
    if m is None or float(m.group(1)) <= 0:
        raise click.BadParameter(
            f"{value!r}: a positive duration like 90, 45s, 15m, 12h or 30d", param_hint=flag
        )
    return float(m.group(1)) * _UNITS[m.group(2) or "s"]


def _expiry(expires_in: str | None, expires_at: str | None) -> datetime | None:
    if expires_in and expires_at:
        raise click.UsageError("give --expires-in or --expires-at, not both")
    if expires_in:
        return datetime.now(UTC) + timedelta(seconds=parse_duration(expires_in, "--expires-in"))
    if expires_at:
        try:
            when = datetime.fromisoformat(expires_at)
        except ValueError:
            raise click.BadParameter(
                f"{expires_at!r}: an ISO 8601 time, e.g. 2026-12-31T23:00:00Z",
                param_hint="--expires-at",
            ) from None
        return when if when.tzinfo else when.replace(tzinfo=UTC)
    return None


def admin_or_key_options(fn: F) -> F:
    """``--admin-token`` (the platform token) or ``--api-key`` (a key with the admin scope
    of its own tenant): one is needed; the admin token wins when both are set."""
    fn = click.option(
        "--api-key",
        envvar="TICKWHEEL_API_KEY",
        show_envvar=True,
        help="A tenant API key with the admin scope (manages that tenant's keys only).",
    )(fn)
    return click.option(
        "--admin-token",
        envvar="TICKWHEEL_ADMIN_TOKEN",
        show_envvar=True,
        help="The platform admin token (manages every tenant).",
    )(fn)


async def _with_admin_or_key(kw: dict[str, Any], fn: Callable[[AdminClient], Awaitable[T]]) -> T:
    token, key = kw.pop("admin_token"), kw.pop("api_key")
    if not token and not key:
        raise click.UsageError("give --admin-token or --api-key (a key with the admin scope)")
    tls = tls_config(kw)
    admin = await AdminClient.connect(
        kw.pop("target"), admin_token=token or None, api_key=None if token else key, tls=tls
    )
    try:
        return await fn(admin)
    finally:
        await admin.close()


def _key_dict(k: ApiKeyInfo) -> dict[str, Any]:
    """A key as plain JSON values (scopes as a sorted list)."""
    fields = {name: getattr(k, name) for name in k.__dataclass_fields__}
    fields["scopes"] = sorted(s.value for s in k.scopes)
    out: dict[str, Any] = json.loads(as_json(fields))
    return out


def _when(t: datetime | None) -> str:
    return t.strftime("%Y-%m-%d %H:%M:%SZ") if t is not None else "-"


def _print_tenant(t: TenantInfo) -> None:
    click.echo(
        f"tenant {t.id} ({t.name}, {t.tier}) rate_limit_rps={t.rate_limit_rps} "
        f"max_concurrent_workers={t.max_concurrent_workers} home_region={t.home_region}"
    )


# -- tenants -----------------------------------------------------------------------------
@click.group()
def tenants() -> None:
    """Manage tenants (platform admin token)."""


@tenants.command(name="create")
@click.argument("name")
@click.option("--tier", type=click.Choice(TIERS), default="STANDARD")
@click.option("--rate-limit-rps", type=int, default=0)
@click.option("--max-concurrent-workers", type=int, default=0)
@click.option(
    "--home-region",
    default="",
    help="Where the tenant lives (a region of the directory; default: the region of the "
    "node that creates it). Any region's node accepts this and creates it there.",
)
@client_options
@admin_token_option
@json_option
def tenants_create(
    name: str,
    tier: str,
    rate_limit_rps: int,
    max_concurrent_workers: int,
    home_region: str,
    as_json: bool,
    **kw: Any,
) -> None:
    """Create a tenant (docs/regions.md for --home-region)."""
    t = run_coro(
        with_admin(
            kw,
            lambda a: a.create_tenant(
                name,
                tier=tier,
                rate_limit_rps=rate_limit_rps,
                max_concurrent_workers=max_concurrent_workers,
                home_region=home_region,
            ),
        )
    )
    if as_json:
        print_json(t)
    else:
        click.echo(f"tenant {t.id} ({t.name}, {t.tier}, home region {t.home_region})")


@tenants.command(name="list")
@client_options
@admin_token_option
@json_option
def tenants_list(as_json: bool, **kw: Any) -> None:
    """Every tenant, in id order."""

    async def fetch(a: AdminClient) -> list[TenantInfo]:
        return [t async for t in a.list_tenants()]

    found = run_coro(with_admin(kw, fetch))
    if as_json:
        print_json(found)
        return
    for t in found:
        _print_tenant(t)
    click.echo(f"{len(found)} tenant{'s' if len(found) != 1 else ''}")


@tenants.command(name="get")
@click.argument("tenant_id")
@client_options
@admin_or_key_options
@json_option
def tenants_get(tenant_id: str, as_json: bool, **kw: Any) -> None:
    """One tenant and its quotas."""
    t = run_coro(_with_admin_or_key(kw, lambda a: a.get_tenant(tenant_id)))
    if as_json:
        print_json(t)
    else:
        _print_tenant(t)


@tenants.command(name="update")
@click.argument("tenant_id")
@click.option("--tier", type=click.Choice(TIERS), help="New tier.")
@click.option("--rate-limit-rps", type=click.IntRange(min=1), help="New dispatch rate limit.")
@click.option("--max-concurrent-workers", type=click.IntRange(min=1), help="New in-flight cap.")
@client_options
@admin_token_option
@json_option
def tenants_update(
    tenant_id: str,
    tier: str | None,
    rate_limit_rps: int | None,
    max_concurrent_workers: int | None,
    as_json: bool,
    **kw: Any,
) -> None:
    """Change a tenant's tier or quotas (what is not given stays)."""
    if tier is None and rate_limit_rps is None and max_concurrent_workers is None:
        raise click.UsageError("give --tier, --rate-limit-rps or --max-concurrent-workers")
    t = run_coro(
        with_admin(
            kw,
            lambda a: a.update_tenant(
                tenant_id,
                tier=tier,
                rate_limit_rps=rate_limit_rps,
                max_concurrent_workers=max_concurrent_workers,
            ),
        )
    )
    if as_json:
        print_json(t)
    else:
        _print_tenant(t)


# -- keys --------------------------------------------------------------------------------
@click.group()
def keys() -> None:
    """Manage API keys (admin token, or a tenant key with the admin scope)."""


@keys.command(name="create")
@click.argument("tenant_id")
@click.option("--name", default="default", show_default=True)
@click.option(
    "--scope",
    "scopes",
    multiple=True,
    type=click.Choice([s.value for s in Scope]),
    help="What the key may do (repeat; default: submit, read and work).",
)
@click.option("--expires-in", help="Lifetime, e.g. 90d or 12h (default: never expires).")
@click.option("--expires-at", help="Expiry as an ISO 8601 time.")
@client_options
@admin_or_key_options
@json_option
def keys_create(
    tenant_id: str,
    name: str,
    scopes: tuple[str, ...],
    expires_in: str | None,
    expires_at: str | None,
    as_json: bool,
    **kw: Any,
) -> None:
    """Create an API key; the secret is printed only once."""
    expiry = _expiry(expires_in, expires_at)
    k = run_coro(
        _with_admin_or_key(
            kw,
            lambda a: a.create_api_key(
                tenant_id, name, scopes=[Scope(s) for s in scopes] or None, expires_at=expiry
            ),
        )
    )
    if as_json:
        print_json(k)
    else:
        click.echo(f"key {k.key_id}\nsecret (shown once): {k.secret}")


@keys.command(name="list")
@click.argument("tenant_id")
@client_options
@admin_or_key_options
@json_option
def keys_list(tenant_id: str, as_json: bool, **kw: Any) -> None:
    """A tenant's keys (never their secrets), oldest first."""
    found = run_coro(_with_admin_or_key(kw, lambda a: a.list_api_keys(tenant_id)))
    if as_json:
        click.echo(json.dumps([_key_dict(k) for k in found], sort_keys=True))
        return
    now = datetime.now(UTC)
    for k in found:
        if k.revoked:
            state = "revoked"
        elif k.expires_at is not None and k.expires_at <= now:
            state = "expired"
        else:
            state = "active"
        click.echo(
            f"{k.id}  {k.name}  {state}  scopes={','.join(sorted(s.value for s in k.scopes))}"
            f"  created={_when(k.created_at)}  expires={_when(k.expires_at)}"
            f"  last_used={_when(k.last_used_at)}"
            + (f"  revoked={_when(k.revoked_at)}" if k.revoked else "")
        )
    click.echo(f"{len(found)} key{'s' if len(found) != 1 else ''}")


@keys.command(name="revoke")
@click.argument("key_id")
@client_options
@admin_or_key_options
@json_option
def keys_revoke(key_id: str, as_json: bool, **kw: Any) -> None:
    """Revoke a key: new calls fail at once, open worker streams end within seconds."""
    k = run_coro(_with_admin_or_key(kw, lambda a: a.revoke_api_key(key_id)))
    if as_json:
        click.echo(json.dumps(_key_dict(k), sort_keys=True))
    else:
        click.echo(f"key {k.id} revoked at {_when(k.revoked_at)}")


@keys.command(name="rotate")
@click.argument("key_id")
@click.option(
    "--grace", default="1h", show_default=True, help="How long the old key keeps working."
)
@click.option("--expires-in", help="Lifetime of the new key (default: never expires).")
@click.option("--expires-at", help="Expiry of the new key as an ISO 8601 time.")
@client_options
@admin_or_key_options
@json_option
def keys_rotate(
    key_id: str,
    grace: str,
    expires_in: str | None,
    expires_at: str | None,
    as_json: bool,
    **kw: Any,
) -> None:
    """A new key with the same name and scopes; the old one expires after the grace."""
    grace_s = parse_duration(grace, "--grace")
    expiry = _expiry(expires_in, expires_at)
    r = run_coro(
        _with_admin_or_key(
            kw, lambda a: a.rotate_api_key(key_id, grace_s=round(grace_s), expires_at=expiry)
        )
    )
    if as_json:
        click.echo(
            json.dumps(
                {"old": _key_dict(r.old), "new": _key_dict(r.new), "secret": r.secret},
                sort_keys=True,
            )
        )
    else:
        click.echo(
            f"new key {r.new.id}\nsecret (shown once): {r.secret}\n"
            f"old key {r.old.id} works until {_when(r.old.expires_at)}"
        )
