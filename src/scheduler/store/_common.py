"""Helpers shared by the store implementations (no driver imports here)."""

from __future__ import annotations

import base64
import dataclasses
import json
import uuid
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, TypeAlias

from scheduler._errors import InvalidArgument
from scheduler.store import _validate
from scheduler.types import (
    ActivityBucket,
    CompleteResult,
    Outcome,
    Preloaded,
    RetryPolicy,
    TaskFilter,
    TaskKey,
    Tenant,
)

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
FAR_PAST = datetime(1, 1, 2, tzinfo=UTC)
FAR_FUTURE = datetime(9999, 12, 30, tzinfo=UTC)
ZERO_UUID = uuid.UUID(int=0)
MAX_UUID = uuid.UUID(int=(1 << 128) - 1)

TENANT_FIELDS = ("name", "tier", "rate_limit_rps", "max_concurrent_workers", "home_region")


def retry_policy_json(policy: RetryPolicy | None) -> str | None:
    """The ``retry_policy`` column of a task: {"base_s", "cap_s", "errors"} or NULL."""
    if policy is None:
        return None
    doc: dict[str, Any] = {}
    if policy.initial_backoff_s > 0:
        doc["base_s"] = float(policy.initial_backoff_s)
        doc["cap_s"] = float(max(policy.max_backoff_s, policy.initial_backoff_s))
    errors = policy.error_types()
    if errors:
        doc["errors"] = list(errors)
    return json.dumps(doc) if doc else None


def retry_policy_of(value: str | None) -> RetryPolicy | None:
    """The task's :class:`RetryPolicy` from its ``retry_policy`` column."""
    if value is None:
        return None
    doc = json.loads(value)
    return RetryPolicy(
        initial_backoff_s=float(doc.get("base_s", 0.0)),
        max_backoff_s=float(doc.get("cap_s", 0.0)),
        non_retryable=tuple(doc.get("errors", ())),
    )


def loads(value: str | None) -> Any:
    """Decode a JSON column (None stays None)."""
    return None if value is None else json.loads(value)


def bounds(keys: Sequence[TaskKey]) -> tuple[datetime, datetime]:
    """(min, max) scheduled_at of a batch: the planner prunes to those days."""
    times = [k.scheduled_at for k in keys]
    return min(times), max(times)


def day_start(t: datetime) -> datetime:
    """00:00 UTC of ``t``'s UTC day."""
    u = t.astimezone(UTC)
    return datetime(u.year, u.month, u.day, tzinfo=UTC)


def day_windows(lo: datetime, hi: datetime) -> list[tuple[datetime, datetime]]:
    """Split [lo, hi) at UTC midnights: one window per day partition."""
    out = []
    start = lo
    while start < hi:
        end = min(day_start(start) + timedelta(days=1), hi)
        out.append((start, end))
        start = end
    return out


def encode_page_token(key: TaskKey) -> str:
    """Opaque keyset token."""
    raw = json.dumps([key.scheduled_at.isoformat(), str(key.id)])
    return base64.urlsafe_b64encode(raw.encode()).decode()


def decode_page_token(token: str) -> TaskKey | None:
    """Inverse of :func:`encode_page_token`; '' is the first page."""
    if not token:
        return None
    try:
        when, ident = json.loads(base64.urlsafe_b64decode(token.encode()))
        key = TaskKey(uuid.UUID(ident), datetime.fromisoformat(when))
        _validate.aware("page_token", key.scheduled_at)
    except (ValueError, TypeError) as exc:
        raise InvalidArgument("page_token", "is not a token this server issued") from exc
    return key


def tenant_changes(tenant: Tenant, changes: Mapping[str, Any]) -> Tenant:
    """Apply validated changes to a tenant."""
    unknown = set(changes) - set(TENANT_FIELDS)
    if unknown:
        raise InvalidArgument(f"changes.{sorted(unknown)[0]}", "is not an updatable field")
    updated = dataclasses.replace(tenant, **dict(changes))
    check_tenant(updated)
    return updated


def check_tenant(tenant: Tenant) -> None:
    """Validate a tenant's fields."""
    if not isinstance(tenant.id, uuid.UUID):
        raise InvalidArgument("tenant.id", "must be a UUID")
    _validate.text("tenant.name", tenant.name, _validate.TENANT_NAME_MAX_CHARS)
    _validate.text("tenant.tier", tenant.tier, 32)
    _validate.text("tenant.home_region", tenant.home_region, 64)
    _validate.non_negative_int("tenant.rate_limit_rps", tenant.rate_limit_rps)
    _validate.non_negative_int("tenant.max_concurrent_workers", tenant.max_concurrent_workers)


def assign_children(
    parents_in_order: Sequence[uuid.UUID],
    ready: Sequence[tuple[Preloaded, Sequence[uuid.UUID]]],
) -> dict[uuid.UUID, list[Preloaded]]:
    """Give each released child to the last of its parents in batch order."""
    position = {p: i for i, p in enumerate(parents_in_order)}
    out: dict[uuid.UUID, list[Preloaded]] = {}
    for child, parents in ready:
        mine = [p for p in parents if p in position]
        if not mine:
            continue
        owner = max(mine, key=lambda p: position[p])
        out.setdefault(owner, []).append(child)
    return out


def complete_results(
    keys: Sequence[TaskKey],
    outcomes: Sequence[Outcome],
    children: Mapping[uuid.UUID, list[Preloaded]],
) -> list[CompleteResult]:
    """Build CompleteResults, handing each child to one item only."""
    seen: set[uuid.UUID] = set()
    out = []
    for key, outcome in zip(keys, outcomes, strict=True):
        mine = () if key.id in seen else tuple(children.get(key.id, ()))
        seen.add(key.id)
        out.append(CompleteResult(outcome, mine))
    return out


def page_start(flt: TaskFilter, token: str) -> TaskKey:
    """Where a page of ``list_tasks`` starts: the token's key, or the end its order
    starts from (the earliest key ascending, the latest descending)."""
    after = decode_page_token(token)
    if after is not None:
        return after
    if flt.order.descending:
        return TaskKey(MAX_UUID, FAR_FUTURE)
    return TaskKey(ZERO_UUID, FAR_PAST)


ActivityRow: TypeAlias = tuple[int, int, int, float | None, float | None]
"""One bucket's (dispatched, completed, failed, lateness p50, lateness p99)."""


def bucket_count(start: datetime, end: datetime, bucket_s: int) -> int:
    """How many buckets of ``bucket_s`` cover ``start`` to ``end`` (at least one)."""
    us = (end - start) // timedelta(microseconds=1)
    return max(1, -(-us // (bucket_s * 1_000_000)))


def fill_buckets(
    start: datetime, end: datetime, bucket_s: int, by_bucket: Mapping[int, ActivityRow]
) -> list[ActivityBucket]:
    """One :class:`ActivityBucket` per bucket from ``start`` to ``end`` (the last may be
    partial), empty ones included; ``by_bucket`` is keyed by bucket index."""
    n = bucket_count(start, end, bucket_s)
    out = []
    for i in range(n):
        at = start + timedelta(seconds=i * bucket_s)
        r = by_bucket.get(i)
        if r is None:
            out.append(ActivityBucket(at))
        else:
            out.append(
                ActivityBucket(
                    at, int(r[0]), int(r[1]), int(r[2]), float(r[3] or 0.0), float(r[4] or 0.0)
                )
            )
    return out
