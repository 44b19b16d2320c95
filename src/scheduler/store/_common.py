"""Helpers shared by the store implementations (no driver imports here)."""

from __future__ import annotations

import base64
import dataclasses
import json
import uuid
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, TypeAlias

from scheduler._errors import InvalidArgument
from scheduler.states import TaskState
from scheduler.store import _validate
from scheduler.types import (
    MAX_COUNT_GROUPS,
    ActivityBucket,
    CompleteResult,
    Forecast,
    IdempotencyScope,
    NewTask,
    Outcome,
    Page,
    Pool,
    Preloaded,
    RetryPolicy,
    TaskCount,
    TaskCounts,
    TaskFilter,
    TaskKey,
    TaskOrder,
    TaskRecord,
    Tenant,
)

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
FAR_PAST = datetime(1, 1, 2, tzinfo=UTC)
FAR_FUTURE = datetime(9999, 12, 30, tzinfo=UTC)
ZERO_UUID = uuid.UUID(int=0)
MAX_UUID = uuid.UUID(int=(1 << 128) - 1)

TENANT_FIELDS = ("name", "tier", "rate_limit_rps", "max_concurrent_workers", "home_region")


# -- the idempotency key's window (issue 43), the same rule in both stores --------------
FINISHED = frozenset(
    {TaskState.COMPLETED.value, TaskState.CANCELLED.value, TaskState.DEAD_LETTER.value}
)
"""The states after which an ``UNTIL_FINISHED`` key no longer dedupes."""


def key_window(task: NewTask, now: datetime) -> tuple[datetime | None, bool] | None:
    """The window a new task's idempotency key gets: (when it stops deduplicating by
    time, None: never; whether it dedupes only while the task is not finished). None
    when the submission asks for no window."""
    flow = task.flow
    if flow is None or not flow.idempotency_window:
        return None
    ttl = flow.idempotency_ttl_s
    expires = now + timedelta(seconds=ttl) if ttl else None
    return expires, flow.idempotency_scope is IdempotencyScope.UNTIL_FINISHED


def key_window_over(row: Any, now: Any) -> bool:
    """Whether the idempotency key of a task read by its key (either store's row with
    ``key_expires_at``, ``key_until_finished`` and ``status``) no longer dedupes at
    ``now`` (in the row's own time: a datetime on PostgreSQL, microseconds on SQLite)."""
    expires = row["key_expires_at"]
    if expires is not None and expires <= now:
        return True
    return bool(row["key_until_finished"]) and row["status"] in FINISHED


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


# -- dashboard reads: counts, forecast, a page found by idempotency key ------------------

_STATE_RANK = {state: i for i, state in enumerate(TaskState)}
_POOL_RANK = {Pool.CRITICAL: 0, Pool.STANDARD: 1, Pool.BULK: 2}


def task_count(tenant: uuid.UUID | None, status: str, type_: str, pool: str, n: int) -> TaskCount:
    """One group of a count, from its row."""
    return TaskCount(tenant, TaskState(status), type_, Pool(pool), int(n))


def count_order(c: TaskCount) -> tuple[str, int, str, int]:
    """The order of a count's groups: tenant, state (the state machine's order), type,
    pool (critical first)."""
    return (str(c.tenant_id or ""), _STATE_RANK[c.state], c.type, _POOL_RANK[c.pool])


def counts_of(groups: Iterable[TaskCount]) -> TaskCounts:
    """Every group, ordered and cut at MAX_COUNT_GROUPS; the total over all of them."""
    ordered = sorted(groups, key=count_order)
    total = sum(c.count for c in ordered)
    return TaskCounts(tuple(ordered[:MAX_COUNT_GROUPS]), total, len(ordered) > MAX_COUNT_GROUPS)


def window_end(start: datetime, bucket_s: int, buckets: int) -> datetime:
    """The end of a forecast window; InvalidArgument for a width or count out of range
    or a window that ends past the latest time the store accepts."""
    if bucket_s not in (1, 60):
        raise InvalidArgument("bucket_s", "must be 1 or 60")
    if not 1 <= buckets <= 3600:
        raise InvalidArgument("buckets", "must be 1-3600")
    if start > FAR_FUTURE - timedelta(seconds=bucket_s * buckets):
        raise InvalidArgument("start", "the window ends after 9999-12-30")
    return start + timedelta(seconds=bucket_s * buckets)


def forecast_of(found: Iterable[tuple[str, int, str, int]]) -> Forecast:
    """A :class:`Forecast` from rows (kind 'f' firing, 'n' nominal, 'o' overdue; bucket
    index; pool; count)."""
    out = Forecast({}, {}, {})
    for kind, bucket, pool, n in found:
        p = Pool(pool)
        if kind == "o":
            out.overdue[p] = out.overdue.get(p, 0) + int(n)
        else:
            into = out.firing if kind == "f" else out.nominal
            into[(int(bucket), p)] = into.get((int(bucket), p), 0) + int(n)
    return out


def page_of_one(found: Sequence[TaskRecord], flt: TaskFilter, after: TaskKey) -> Page:
    """The page of a filter by idempotency key: the task with that key (0 or 1), when it
    passes the other narrowings and lies past the page's start in ``flt.order``."""
    tasks = tuple(t for t in found if flt.matches(t) and _past(t.key, after, flt.order))
    return Page(tasks, "")


def _past(key: TaskKey, after: TaskKey, order: TaskOrder) -> bool:
    if order is TaskOrder.SCHEDULED_ASC:
        return (key.scheduled_at, key.id) > (after.scheduled_at, after.id)
    if order is TaskOrder.SCHEDULED_DESC:
        return (key.scheduled_at, key.id) < (after.scheduled_at, after.id)
    if order is TaskOrder.CREATED_ASC:
        return key.id > after.id
    return key.id < after.id


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
