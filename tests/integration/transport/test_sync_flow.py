"""The SyncClient's flow control calls (issue 43): rate limits, dispatch pauses and, with
an ``admin``-scoped key, its tenant's concurrency limits; from a script's thread (no
event loop), as :func:`tests.integration.transport.test_sdk.test_sync_client_for_scripts`."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from scheduler.client import NotFound, PermissionDenied, SyncClient
from scheduler.types import Pool, Scope
from tests.integration.transport.conftest import Stack


def _script(stack: Stack, ops_key: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    with SyncClient(stack.target, api_key=ops_key) as client:
        out["set"] = client.set_rate_limit("partner-api", rate=100, burst=20)
        out["limits"] = client.list_rate_limits()
        client.delete_rate_limit("partner-api")
        out["limits_after"] = client.list_rate_limits()
        with pytest.raises(NotFound):
            client.delete_rate_limit("partner-api")
        out["paused"] = client.pause_dispatch("report.build", Pool.BULK)
        out["pauses"] = client.list_dispatch_pauses()
        client.resume_dispatch("report.build", Pool.BULK)
        out["pauses_after"] = client.list_dispatch_pauses()
        with pytest.raises(NotFound):
            client.resume_dispatch("report.build", Pool.BULK)
        out["concurrency"] = client.set_concurrency_limit(stack.tenant_a, "invoices.sync", 2)
        out["concurrency_limits"] = client.concurrency_limits(stack.tenant_a)
        with pytest.raises(PermissionDenied):
            client.concurrency_limits(stack.tenant_b)
    with SyncClient(stack.target, api_key=stack.key_a) as plain, pytest.raises(PermissionDenied):
        plain.set_concurrency_limit(stack.tenant_a, "invoices.sync", 3)
    return out


async def test_sync_client_flow_calls(stack: Stack) -> None:
    scopes = [Scope.SUBMIT, Scope.READ, Scope.ADMIN]
    ops_key = (await stack.admin.create_api_key(stack.tenant_a, "ops", scopes=scopes)).secret
    out = await asyncio.to_thread(_script, stack, ops_key)
    assert (out["set"].key, out["set"].rate, out["set"].burst) == ("partner-api", 100.0, 20)
    assert [lim.key for lim in out["limits"]] == ["partner-api"]
    assert out["limits_after"] == []
    paused = out["paused"]
    assert (str(paused.tenant_id), paused.task_type, paused.pool) == (
        stack.tenant_a,
        "report.build",
        Pool.BULK,
    )
    assert [(p.task_type, p.pool) for p in out["pauses"]] == [("report.build", Pool.BULK)]
    assert out["pauses_after"] == []
    assert out["concurrency"] == 2
    assert out["concurrency_limits"] == {"invoices.sync": 2}
    assert await stack.admin.concurrency_limits(stack.tenant_a) == {"invoices.sync": 2}
