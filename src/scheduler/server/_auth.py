"""Caller identity from call metadata."""

from __future__ import annotations

import hmac
import uuid
from collections.abc import Iterable
from typing import Any

import grpc

from scheduler._errors import PermissionDenied, Unauthenticated
from scheduler.engine import Engine

API_KEY_HEADER = "x-api-key"
ADMIN_TOKEN_HEADER = "x-admin-token"


def metadata_value(metadata: Iterable[tuple[str, str | bytes]] | None, key: str) -> str | None:
    """The first text value of ``key`` in call metadata."""
    for k, v in metadata or ():
        if k == key and isinstance(v, str):
            return v
    return None


async def tenant_of(engine: Engine, context: grpc.aio.ServicerContext[Any, Any]) -> uuid.UUID:
    """The caller's tenant, from the API key in ``x-api-key``; Unauthenticated otherwise."""
    secret = metadata_value(context.invocation_metadata(), API_KEY_HEADER)
    if not secret:
        raise Unauthenticated(f"missing API key ({API_KEY_HEADER} metadata)")
    return await engine.authenticate(secret)


def check_admin(configured: str | None, context: grpc.aio.ServicerContext[Any, Any]) -> None:
    """Raise unless the call carries the configured admin token (constant-time compare)."""
    if configured is None:
        raise PermissionDenied("the admin API is disabled on this server (no admin token)")
    given = metadata_value(context.invocation_metadata(), ADMIN_TOKEN_HEADER)
    if not given:
        raise Unauthenticated(f"missing admin token ({ADMIN_TOKEN_HEADER} metadata)")
    if not hmac.compare_digest(given.encode(), configured.encode()):
        raise Unauthenticated("invalid admin token")
