"""Tenants and their API keys' public part (``scheduler.types`` re-exports every name)."""

from __future__ import annotations

import dataclasses
import enum
import uuid
from datetime import datetime


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Tenant:
    """A tenant and its isolation quotas."""

    id: uuid.UUID
    name: str
    tier: str = "STANDARD"
    rate_limit_rps: int = 1000
    max_concurrent_workers: int = 200
    home_region: str = "local"
    created_at: datetime | None = None


class Scope(enum.StrEnum):
    """What an API key may do (docs/keys.md has the RPC of each)."""

    SUBMIT = "submit"
    """Submit and change the tenant's tasks, workflows, schedules and expectations."""
    READ = "read"
    """Get and list anything of the tenant."""
    WORK = "work"
    """The WorkerService: the worker stream, CompleteTask, FailTask."""
    ADMIN = "admin"
    """Administer its own tenant's API keys (never another tenant's)."""


DEFAULT_SCOPES: frozenset[Scope] = frozenset({Scope.SUBMIT, Scope.READ, Scope.WORK})
"""A key created without scopes (and every key made before scopes existed) has these:
everything but ``admin``, so older clients keep working."""


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ApiKey:
    """An API key's public part; the secret is stored only as a hash."""

    id: uuid.UUID
    tenant_id: uuid.UUID
    name: str
    created_at: datetime | None = None
    revoked: bool = False
    scopes: frozenset[Scope] = DEFAULT_SCOPES
    expires_at: datetime | None = None
    """None: never expires."""
    revoked_at: datetime | None = None
    """When it was revoked (None for keys revoked before this was recorded)."""
    last_used_at: datetime | None = None
    """Last authentication, written at most once a minute per key and node."""
    rotated_from: uuid.UUID | None = None
    """The key this one replaced by a rotation."""

    def usable_at(self, now: datetime) -> bool:
        """Neither revoked nor expired at ``now``."""
        return not self.revoked and (self.expires_at is None or now < self.expires_at)
