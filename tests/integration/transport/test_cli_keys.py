"""``tickwheel tenants list|get|update`` and ``tickwheel keys create|list|revoke|rotate``
against a live server (issues 15 and 19)."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

from click.testing import CliRunner, Result

from scheduler.cli import main
from tests.integration.transport.conftest import ADMIN_TOKEN, Stack


async def _run(*args: str, env: dict[str, str] | None = None) -> Result:
    return await asyncio.to_thread(
        CliRunner().invoke, main, list(args), env=env or {}, catch_exceptions=False
    )


async def _json(*args: str) -> Any:
    result = await _run(*args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


async def test_tenant_commands(stack: Stack) -> None:
    admin = ("--target", stack.target, "--admin-token", ADMIN_TOKEN)
    listed = await _json("tenants", "list", *admin)
    assert sorted(t["name"] for t in listed) == ["tenant-a", "tenant-b"]
    got = await _json("tenants", "get", stack.tenant_a, *admin)
    assert got["name"] == "tenant-a"
    changed = await _json(
        "tenants", "update", stack.tenant_a, "--tier", "ENTERPRISE", "--rate-limit-rps", "7", *admin
    )
    assert (changed["tier"], changed["rate_limit_rps"]) == ("ENTERPRISE", 7)
    text = await _run("tenants", "list", *admin)
    assert "2 tenants" in text.output
    nothing = await _run("tenants", "update", stack.tenant_a, *admin)
    assert nothing.exit_code == 2


async def test_key_commands_with_the_admin_token_and_with_a_tenant_admin_key(
    stack: Stack,
) -> None:
    target = ("--target", stack.target)
    admin = (*target, "--admin-token", ADMIN_TOKEN)
    boss = await _json(
        "keys", "create", stack.tenant_a, "--name", "boss", "--scope", "admin", *admin
    )
    ci = await _json(
        "keys",
        "create",
        stack.tenant_a,
        "--name",
        "ci",
        "--scope",
        "submit",
        "--scope",
        "read",
        "--expires-in",
        "30d",
        *admin,
    )
    listed = {k["name"]: k for k in await _json("keys", "list", stack.tenant_a, *admin)}
    assert listed["ci"]["scopes"] == ["read", "submit"]
    assert listed["ci"]["expires_at"] is not None
    assert listed["boss"]["scopes"] == ["admin"]
    assert listed["a"]["scopes"] == ["read", "submit", "work"]
    assert all("secret" not in k for k in listed.values())
    # The tenant's admin key (from its env var) manages that tenant's keys only.
    as_boss = {"TICKWHEEL_API_KEY": boss["secret"]}
    rotated = await _run("keys", "rotate", ci["key_id"], "--grace", "10m", *target, env=as_boss)
    assert rotated.exit_code == 0, rotated.output
    assert "old key" in rotated.output
    assert "secret (shown once)" in rotated.output
    table = await _run("keys", "list", stack.tenant_a, *target, env=as_boss)
    assert table.exit_code == 0, table.output
    assert "4 keys" in table.output
    revoked = await _run("keys", "revoke", ci["key_id"], *target, env=as_boss)
    assert revoked.exit_code == 0, revoked.output
    assert "revoked at" in revoked.output
    elsewhere = await _run("keys", "list", stack.tenant_b, *target, env=as_boss)
    assert elsewhere.exit_code == 1
    assert "administers tenant" in elsewhere.output
    neither = await _run("keys", "list", stack.tenant_a, *target)
    assert neither.exit_code == 2
    assert "--admin-token or --api-key" in neither.output
    bad = await _run("keys", "create", stack.tenant_a, "--expires-in", "soon", *admin)
    assert bad.exit_code == 2
    assert "--expires-in" in bad.output


async def test_concurrency_commands_and_submit_with_a_key(stack: Stack) -> None:
    """``tickwheel concurrency set|show`` (issue 43) and ``submit --concurrency-key``."""
    admin = ("--target", stack.target, "--admin-token", ADMIN_TOKEN)
    got = await _json("concurrency", "set", stack.tenant_a, "sync", "3", *admin)
    assert got == {"tenant_id": stack.tenant_a, "type": "sync", "limit": 3}
    assert await _json("concurrency", "show", stack.tenant_a, *admin) == {"sync": 3}
    text = await _run("concurrency", "show", stack.tenant_a, *admin)
    assert "sync: 3" in text.output
    cleared = await _run("concurrency", "set", stack.tenant_a, "sync", "0", *admin)
    assert "at most 1 task(s) per concurrency key" in cleared.output
    bad = await _run("concurrency", "set", stack.tenant_a, "sync", "100001", *admin)
    assert bad.exit_code != 0
    assert "limit" in bad.output
    submitted = await _json(
        "submit", "sync", "--concurrency-key", "acme", "--target", stack.target,
        "--api-key", stack.key_a,
    )  # fmt: skip
    row = await stack.engine.store.get_task(None, uuid.UUID(submitted["id"]))
    assert row.concurrency_key == "acme"
