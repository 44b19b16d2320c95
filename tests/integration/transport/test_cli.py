"""The ``tickwheel`` client commands against a live server (``--json`` output)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from click.testing import CliRunner

from scheduler.cli import main
from tests.integration.transport.conftest import ADMIN_TOKEN, Stack


async def _cli(*args: str) -> Any:
    result = await asyncio.to_thread(CliRunner().invoke, main, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


async def test_admin_and_task_commands(stack: Stack) -> None:
    target = ("--target", stack.target)
    tenant = await _cli(
        "tenants", "create", "cli-tenant", *target, "--admin-token", ADMIN_TOKEN, "--json"
    )
    key = await _cli(
        "keys", "create", tenant["id"], *target, "--admin-token", ADMIN_TOKEN, "--json"
    )
    auth = (*target, "--api-key", key["secret"])
    task = await _cli("submit", "report", "--payload", '{"n": 1}', "--in", "3600", *auth, "--json")
    assert task["payload"] == {"n": 1}
    assert task["tenant_id"] == tenant["id"]
    got = await _cli("get", task["id"], *auth, "--json")
    assert got["id"] == task["id"]
    listed = await _cli("list", "--type", "report", *auth, "--json")
    assert [t["id"] for t in listed] == [task["id"]]
    cancelled = await _cli("cancel", task["id"], *auth, "--json")
    assert cancelled["state"] == "CANCELLED"


async def test_cli_error_exits_non_zero(stack: Stack) -> None:
    result = await asyncio.to_thread(
        CliRunner().invoke,
        main,
        ["get", "not-a-uuid", "--target", stack.target, "--api-key", stack.key_a],
    )
    assert result.exit_code == 1
