"""Input validation shared by every store: bad input gets a typed error, writes nothing."""

from __future__ import annotations

import json
import math
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from scheduler import limits
from scheduler._errors import InvalidArgument
from scheduler.jitter import JitterMode
from scheduler.states import TaskState
from scheduler.types import NewTask, Pool, RawJSON, TaskKey

# The bounds are stated once, in scheduler.limits; the store checks them again because
# a row must be right whoever wrote it.
TYPE_MAX_CHARS = limits.MAX_TYPE_CHARS
IDEMPOTENCY_KEY_MAX_CHARS = limits.MAX_IDEMPOTENCY_KEY_CHARS
WORKER_ID_MAX_CHARS = limits.MAX_WORKER_ID_CHARS
TENANT_NAME_MAX_CHARS = limits.MAX_NAME_CHARS


def aware(field: str, value: object) -> datetime:
    """``value`` as a timezone-aware datetime, else InvalidArgument."""
    if not isinstance(value, datetime):
        raise InvalidArgument(field, "must be a datetime")
    if value.tzinfo is None or value.utcoffset() is None:
        raise InvalidArgument(field, "must carry a time zone")
    return value


def text(field: str, value: object, max_chars: int, *, allow_empty: bool = False) -> str:
    """A bounded string without NUL characters (PostgreSQL text cannot hold them)."""
    if not isinstance(value, str):
        raise InvalidArgument(field, "must be a string")
    if not value and not allow_empty:
        raise InvalidArgument(field, "must not be empty")
    if len(value) > max_chars:
        raise InvalidArgument(field, f"is {len(value)} characters, over {max_chars}")
    if "\x00" in value:
        raise InvalidArgument(field, "must not contain NUL characters")
    return value


_encode = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode
"""One encoder for every call (``json.dumps`` with options builds a new one each time)."""


def json_object(
    field: str, value: object, limit_bytes: int, *, optional: bool = False
) -> str | None:
    """Serialise a JSON object; InvalidArgument when not an object, not JSON, or too big."""
    if value is None and optional:
        return None
    if type(value) is RawJSON:
        # Checked when it arrived (scheduler.jsonbytes) or read from JSONB: stored as it
        # is, with no parse and no re-encode. Only its size depends on this limit.
        if len(value) * 4 > limit_bytes and len(value.encode()) > limit_bytes:
            raise InvalidArgument(field, f"is over the {limit_bytes}-byte limit")
        return value
    if not isinstance(value, dict):
        raise InvalidArgument(field, "must be a JSON object")
    try:
        encoded = _encode(value)
    except (TypeError, ValueError) as exc:
        raise InvalidArgument(field, f"is not serialisable as JSON: {exc}") from exc
    if "\x00" in encoded or "\\u0000" in encoded:
        raise InvalidArgument(field, "must not contain NUL characters")
    if len(encoded) * 4 <= limit_bytes:  # UTF-8 takes at most 4 bytes a character
        return encoded
    size = len(encoded.encode("utf-8"))
    if size > limit_bytes:
        raise InvalidArgument(field, f"is {size} bytes, over the {limit_bytes}-byte limit")
    return encoded


def non_negative_int(field: str, value: object, maximum: int = 2**31 - 1) -> int:
    """An int in [0, maximum]."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgument(field, "must be an integer")
    if not 0 <= value <= maximum:
        raise InvalidArgument(field, f"must be between 0 and {maximum}")
    return value


def concurrency_limit(field: str, value: object) -> int:
    """A concurrency limit: an int in 1..``limits.MAX_CONCURRENCY_LIMIT``."""
    if type(value) is not int or not 1 <= value <= limits.MAX_CONCURRENCY_LIMIT:
        raise InvalidArgument(field, f"must be an integer in 1..{limits.MAX_CONCURRENCY_LIMIT}")
    return value


def _new_task_ok(task: object) -> bool:
    """The checks of :func:`new_task` but JSON, without building field names (fast path)."""
    if type(task) is not NewTask:
        return False
    t = task
    timeout: Any = t.timeout_s
    # isinstance for ids: asyncpg reads UUIDs as its own subclass (a tenant id from the
    # API-key lookup is one), and ``type(...) is`` sent every such task down the slow path.
    return (
        isinstance(t.id, uuid.UUID)
        and isinstance(t.tenant_id, uuid.UUID)
        and (t.workflow_id is None or isinstance(t.workflow_id, uuid.UUID))
        and (t.schedule_id is None or isinstance(t.schedule_id, uuid.UUID))
        and type(t.type) is str
        and 0 < len(t.type) <= TYPE_MAX_CHARS
        and "\x00" not in t.type
        and type(t.idempotency_key) is str
        and 0 < len(t.idempotency_key) <= IDEMPOTENCY_KEY_MAX_CHARS
        and "\x00" not in t.idempotency_key
        and _is_aware(t.scheduled_at)
        and _is_aware(t.due_at)
        and type(t.shard_id) is int
        and 0 <= t.shard_id <= 2**31 - 1
        and type(t.max_retries) is int
        and 0 <= t.max_retries <= limits.MAX_RETRIES
        and type(t.unresolved_dependencies) is int
        and 0 <= t.unresolved_dependencies <= 2**31 - 1
        and type(t.pool) is Pool
        and type(t.jitter_mode) is JitterMode
        and type(t.strict_timing) is bool
        and (t.concurrency_key is None or limits.flow_key_ok(t.concurrency_key))
        and (type(timeout) is float or type(timeout) is int)
        and math.isfinite(timeout)
        and timeout >= 0
        and (
            t.initial_state is TaskState.SCHEDULED
            or (t.initial_state is TaskState.PRELOADED and not t.unresolved_dependencies)
        )
    )


def _is_aware(value: object) -> bool:
    if type(value) is datetime and value.tzinfo is UTC:
        return True  # what the engine and asyncpg make: no utcoffset() call
    return (
        isinstance(value, datetime) and value.tzinfo is not None and value.utcoffset() is not None
    )


def new_tasks(tasks: Sequence[object], limit_bytes: int) -> list[tuple[str, str | None]]:
    """:func:`new_task` over a batch; field names are built only to report an error."""
    out: list[tuple[str, str | None]] = []
    append = out.append
    for i, task in enumerate(tasks):
        if not _new_task_ok(task):
            append(new_task(i, task, limit_bytes))  # raises with the field's name
            continue
        assert isinstance(task, NewTask)
        payload, trace = task.payload, task.trace_context
        if (type(payload) is not dict and type(payload) is not RawJSON) or (
            trace is not None and type(trace) is not dict
        ):
            append(new_task(i, task, limit_bytes))
            continue
        try:
            p = json_object("", payload, limit_bytes)
            tr = None if trace is None else json_object("", trace, limit_bytes)
        except InvalidArgument:
            append(new_task(i, task, limit_bytes))  # the same error, with the field's name
            continue
        assert p is not None
        append((p, tr))
    return out


def new_task(i: int, task: object, limit_bytes: int) -> tuple[str, str | None]:
    """Check one NewTask; returns its serialised (payload, trace_context)."""
    p = f"tasks[{i}]"
    if not isinstance(task, NewTask):
        raise InvalidArgument(p, "must be a NewTask")
    for name in ("id", "tenant_id"):
        if not isinstance(getattr(task, name), uuid.UUID):
            raise InvalidArgument(f"{p}.{name}", "must be a UUID")
    for name in ("workflow_id", "schedule_id"):
        v = getattr(task, name)
        if v is not None and not isinstance(v, uuid.UUID):
            raise InvalidArgument(f"{p}.{name}", "must be a UUID or None")
    text(f"{p}.type", task.type, TYPE_MAX_CHARS)
    text(f"{p}.idempotency_key", task.idempotency_key, IDEMPOTENCY_KEY_MAX_CHARS)
    if task.concurrency_key is not None:
        limits.flow_key(task.concurrency_key, f"{p}.concurrency_key")
    aware(f"{p}.scheduled_at", task.scheduled_at)
    aware(f"{p}.due_at", task.due_at)
    non_negative_int(f"{p}.shard_id", task.shard_id)
    non_negative_int(f"{p}.max_retries", task.max_retries, limits.MAX_RETRIES)
    non_negative_int(f"{p}.unresolved_dependencies", task.unresolved_dependencies)
    if not isinstance(task.pool, Pool):
        raise InvalidArgument(f"{p}.pool", "must be a Pool")
    if not isinstance(task.jitter_mode, JitterMode):
        raise InvalidArgument(f"{p}.jitter_mode", "must be a JitterMode")
    if not isinstance(task.strict_timing, bool):
        raise InvalidArgument(f"{p}.strict_timing", "must be a bool")
    timeout: Any = task.timeout_s
    if (
        isinstance(timeout, bool)
        or not isinstance(timeout, int | float)
        or not math.isfinite(timeout)
        or timeout < 0
    ):
        raise InvalidArgument(f"{p}.timeout_s", "must be a finite number >= 0")
    if task.initial_state not in (TaskState.SCHEDULED, TaskState.PRELOADED):
        raise InvalidArgument(f"{p}.initial_state", "must be SCHEDULED or PRELOADED")
    if task.initial_state is TaskState.PRELOADED and task.unresolved_dependencies:
        raise InvalidArgument(f"{p}.initial_state", "a task with dependencies starts SCHEDULED")
    payload = json_object(f"{p}.payload", task.payload, limit_bytes)
    assert payload is not None
    trace = json_object(f"{p}.trace_context", task.trace_context, limit_bytes, optional=True)
    return payload, trace


def keys(field: str, items: Sequence[Any]) -> None:
    """Every item's ``key`` is a TaskKey with an aware scheduled_at."""
    for item in items:  # fast path: no field names unless something is wrong
        key = item.key
        token = getattr(item, "token", 0)
        if (
            type(key) is not TaskKey
            or not isinstance(key.id, uuid.UUID)
            or not _is_aware(key.scheduled_at)
            or type(token) is not int
        ):
            break
    else:
        return
    for i, item in enumerate(items):
        key = item.key
        if not isinstance(key, TaskKey) or not isinstance(key.id, uuid.UUID):
            raise InvalidArgument(f"{field}[{i}].key", "must be a TaskKey")
        aware(f"{field}[{i}].key.scheduled_at", key.scheduled_at)
        token = getattr(item, "token", 0)
        if isinstance(token, bool) or not isinstance(token, int):
            raise InvalidArgument(f"{field}[{i}].token", "must be an integer")


def dispatch_requests(requests: Sequence[Any]) -> None:
    """Worker ids and leases of a dispatch batch (names built only for an error)."""
    for r in requests:
        w = r.worker_id
        if (
            type(w) is not str
            or not 0 < len(w) <= WORKER_ID_MAX_CHARS
            or "\x00" in w
            or not _is_aware(r.lease_expires_at)
        ):
            break
    else:
        return
    for i, r in enumerate(requests):
        text(f"requests[{i}].worker_id", r.worker_id, WORKER_ID_MAX_CHARS)
        aware(f"requests[{i}].lease_expires_at", r.lease_expires_at)


ERROR_MAX_CHARS = 64 * 1024
ERROR_TYPE_MAX_CHARS = 128
TRACEBACK_MAX_CHARS = 64 * 1024


def failures(items: Sequence[Any]) -> None:
    """Errors and retry times of a fail batch (names built only for an error)."""
    for f in items:
        e = f.error
        if (
            type(e) is not str
            or len(e) > ERROR_MAX_CHARS
            or "\x00" in e
            or (f.retry_at is not None and not _is_aware(f.retry_at))
            or type(f.error_type) is not str
            or len(f.error_type) > ERROR_TYPE_MAX_CHARS
            or "\x00" in f.error_type
            or type(f.traceback) is not str
            or len(f.traceback) > TRACEBACK_MAX_CHARS
            or "\x00" in f.traceback
            or not 1.0 <= f.spread <= 2.0
        ):
            break
    else:
        return
    for i, f in enumerate(items):
        text(f"items[{i}].error", f.error, ERROR_MAX_CHARS, allow_empty=True)
        text(f"items[{i}].error_type", f.error_type, ERROR_TYPE_MAX_CHARS, allow_empty=True)
        text(f"items[{i}].traceback", f.traceback, TRACEBACK_MAX_CHARS, allow_empty=True)
        if not 1.0 <= f.spread <= 2.0:
            raise InvalidArgument(f"items[{i}].spread", "must be 1..2")
        if f.retry_at is not None:
            aware(f"items[{i}].retry_at", f.retry_at)
