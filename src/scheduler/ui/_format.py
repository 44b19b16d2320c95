"""Protobuf answers as plain values for the templates and the ``/api/`` JSON.

Owns the names the pages show (states and pools without their enum prefixes), time
stamps as ISO text, Structs as JSON text, and the figures derived from an answer
(counts by state and pool, forecast and activity series). Pure functions: no I/O.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Any, cast

from google.protobuf import json_format
from google.protobuf.struct_pb2 import Struct
from google.protobuf.timestamp_pb2 import Timestamp

from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from scheduler._wellknown import struct_to_dict
from scheduler.types import dispatch_note

STATES = (
    "SCHEDULED",
    "PRELOADED",
    "DISPATCHED",
    "RUNNING",
    "RETRYING",
    "COMPLETED",
    "CANCELLED",
    "DEAD_LETTER",
)
TERMINAL = frozenset({"COMPLETED", "CANCELLED", "DEAD_LETTER"})
POOLS = ("CRITICAL", "STANDARD", "BULK")


def state_name(value: int) -> str:
    return pb.TaskState.Name(value).removeprefix("TASK_STATE_")


def state_value(name: str) -> pb.TaskState:
    return cast("pb.TaskState", pb.TaskState.Value("TASK_STATE_" + name))


def pool_name(value: int) -> str:
    """The pool's name; unspecified is STANDARD (as the API defines it)."""
    if value == pb.POOL_UNSPECIFIED:
        return "STANDARD"
    return pb.Pool.Name(value).removeprefix("POOL_")


def pool_value(name: str) -> pb.Pool:
    return cast("pb.Pool", pb.Pool.Value("POOL_" + name))


def action_name(value: int) -> str:
    return pb.BulkAction.Name(value).removeprefix("BULK_ACTION_")


def expectation_status(value: int) -> str:
    return pb.ExpectationStatus.Name(value).removeprefix("EXPECTATION_STATUS_")


def ts(message: Any, field: str) -> str | None:
    """A Timestamp field as ISO 8601 UTC text (milliseconds), None when unset."""
    if not message.HasField(field):
        return None
    return iso(getattr(message, field))


def iso(stamp: Timestamp) -> str:
    dt = stamp.ToDatetime(tzinfo=UTC)
    return dt.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def epoch_s(stamp: Timestamp) -> float:
    return stamp.seconds + stamp.nanos / 1e9


BIDI_CONTROLS = re.compile("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
"""Characters that reorder the text after them (U+202E RIGHT-TO-LEFT OVERRIDE, the
embeddings, isolates and marks): in a name they could make a page lie about it."""


def visible_controls(text: str) -> str:
    """``text`` with each bidi control shown as ``[U+202E]`` instead of obeyed: the
    characters around it stay in the order they were written."""
    return BIDI_CONTROLS.sub(lambda m: f"[U+{ord(m.group()):04X}]", text)


def struct_json(message: Any, field: str) -> str:
    """A Struct field as indented JSON text (``null`` when unset): Arabic, CJK and emoji
    as themselves, bidi controls as ``\\u202e`` escapes (still the same JSON value)."""
    if not message.HasField(field):
        return "null"
    value: Struct = getattr(message, field)
    try:
        shown = struct_to_dict(value)
    except ValueError:
        shown = json_format.MessageToDict(value)
    text = json.dumps(shown, indent=2, sort_keys=True, ensure_ascii=False)
    # Only inside JSON strings can these characters occur, where an escape means the same.
    return BIDI_CONTROLS.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def short_id(value: str) -> str:
    """The first 8 characters of a UUID (the list's id column; the full id in a title)."""
    return value[:8]


def relative(value: str | None, now: datetime | None = None) -> str:
    """An ISO time as "in 5m" / "3h ago" / "now", from ``now`` (default: the clock)."""
    if not value:
        return ""
    at = datetime.fromisoformat(value.replace("Z", "+00:00"))
    delta = (at - (now or datetime.now(UTC))).total_seconds()
    gone, n = delta < 0, abs(delta)
    if n < 1:
        return "now"
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if n >= size:
            text = f"{int(n // size)}{unit}"
            break
    return f"{text} ago" if gone else f"in {text}"


def utc_title(value: str | None) -> str:
    """An ISO time as the hover text of a relative one: ``2026-12-06 00:47:06.123 UTC``."""
    return f"{value.replace('T', ' ').removesuffix('Z')} UTC" if value else ""


_ERROR_TYPE = re.compile(r"([A-Za-z_][\w.]{0,127}): ")


def error_type(last_error: str) -> str:
    """The exception type a last error names at its start (``ValueError: ...``), or ""."""
    m = _ERROR_TYPE.match(last_error)
    # A class name: its last dotted part is capitalised ("boom: ..." names no type).
    return m.group(1) if m and m.group(1).rsplit(".", 1)[-1][:1].isupper() else ""


def timestamp(dt: datetime) -> Timestamp:
    out = Timestamp()
    out.FromDatetime(dt.astimezone(UTC))
    return out


def trace_id(task: pb.Task) -> str:
    """The W3C trace id of a task's ``traceparent`` (empty when it has none)."""
    parts = task.trace_context.traceparent.split("-")
    return parts[1] if len(parts) >= 4 else ""


def task_row(task: pb.Task) -> dict[str, Any]:
    """The fields of a task the tasks table and the JSON show."""
    return {
        "id": task.id,
        "tenant_id": task.tenant_id,
        "type": task.type,
        "state": state_name(task.state),
        "pool": pool_name(task.pool),
        "scheduled_at": ts(task, "scheduled_at"),
        "due_at": ts(task, "due_at"),
        "idempotency_key": task.idempotency_key,
        "key_differs": bool(task.idempotency_key) and task.idempotency_key != task.id,
        "retry_count": task.retry_count,
        "max_retries": task.max_retries,
        "max_attempts": task.max_retries + 1,
        "fencing_token": task.fencing_token,
        "worker_id": task.worker_id,
        "created_at": ts(task, "created_at"),
        "updated_at": ts(task, "updated_at"),
    }


def task_detail(task: pb.Task) -> dict[str, Any]:
    """Everything the task page shows."""
    return {
        **task_row(task),
        "payload": struct_json(task, "payload"),
        "result": struct_json(task, "result"),
        "checkpoint": struct_json(task, "checkpoint"),
        "last_error": task.last_error,
        # The type the worker reported; an older server's task: the one its text names.
        "error_type": task.last_error_type or error_type(task.last_error),
        "traceback": task.last_traceback,
        "workflow_id": task.workflow_id,
        "schedule_id": task.schedule_id,
        "concurrency_key": task.concurrency_key,
        "cancel_requested": task.cancel_requested,
        "shard_id": task.shard_id,
        "strict_timing": task.strict_timing,
        "traceparent": task.trace_context.traceparent,
        "trace_id": trace_id(task),
        "terminal": state_name(task.state) in TERMINAL,
    }


def timeline(history: pb.GetTaskHistoryResponse) -> list[dict[str, Any]]:
    """Transitions and refused writes in one list, oldest first."""
    rows: list[tuple[float, int, dict[str, Any]]] = []
    for i, t in enumerate(history.transitions):
        rows.append(
            (
                epoch_s(t.at),
                i,
                {
                    "kind": "transition",
                    "at": ts(t, "at"),
                    "from": state_name(t.from_state),
                    "to": state_name(t.to_state),
                    "token": t.fencing_token,
                    "epoch": t.shard_epoch,
                    "actor": t.actor,
                    "reason": "; ".join(
                        part
                        for part in (
                            t.reason,
                            dispatch_note(
                                t.at.ToDatetime(tzinfo=UTC),
                                t.due_at.ToDatetime(tzinfo=UTC) if t.HasField("due_at") else None,
                            ),
                        )
                        if part
                    ),
                },
            )
        )
    offset = len(rows)
    for i, r in enumerate(history.refused_writes):
        rows.append(
            (
                epoch_s(r.at),
                offset + i,
                {
                    "kind": "refused-write",
                    "at": ts(r, "at"),
                    "token": r.fencing_token,
                    "current_token": r.current_token,
                    "actor": r.actor,
                    "write": r.write,
                    "reason": r.reason,
                },
            )
        )
    return [row for _, _, row in sorted(rows, key=lambda x: (x[0], x[1]))]


_HELD = frozenset({"DISPATCHED", "RUNNING"})


def _ms_between(start: str, end: str) -> int:
    a = datetime.fromisoformat(start.replace("Z", "+00:00"))
    b = datetime.fromisoformat(end.replace("Z", "+00:00"))
    return round((b - a).total_seconds() * 1000)


def attempts(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The deliveries of a task from its :func:`timeline`: each dispatch (into
    DISPATCHED, or RUNNING when started on delivery) until the task left the worker,
    with when it was dispatched, started (acked) and ended, its duration in ms (from
    the start, else the dispatch, to the end; None while it runs), the state it ended
    in, the worker and the reason the audit gave."""
    out: list[dict[str, Any]] = []
    current: dict[str, Any] | None = None
    for r in rows:
        if r["kind"] != "transition":
            continue
        if current is None:
            last = out[-1] if out else None
            if last and r["from"] == last["outcome"] and r["at"] == last["ended_at"]:
                # Written with the attempt's end (RETRYING -> DEAD_LETTER: no attempts
                # left): where the attempt left the task.
                last["outcome"] = r["to"]
                last["reason"] = "; ".join(x for x in (last["reason"], r["reason"]) if x)
            if r["to"] not in _HELD:
                continue
            current = {
                "n": len(out) + 1,
                "dispatched_at": r["at"],
                "started_at": r["at"] if r["to"] == "RUNNING" else None,
                "ended_at": None,
                "duration_ms": None,
                "outcome": None,
                "worker": r["actor"] if r["to"] == "RUNNING" else "",
                "reason": "",
            }
            out.append(current)
            continue
        if r["to"] == "RUNNING":
            current["started_at"] = r["at"]
            current["worker"] = r["actor"]
            continue
        if r["to"] in _HELD:
            continue
        current["ended_at"] = r["at"]
        current["outcome"] = r["to"]
        current["reason"] = r["reason"]
        if not current["worker"] and r["actor"]:
            current["worker"] = r["actor"]
        begun = current["started_at"] or current["dispatched_at"]
        if begun and r["at"]:
            current["duration_ms"] = _ms_between(begun, r["at"])
        current = None
    return out


def counts(response: pb.CountTasksResponse) -> dict[str, Any]:
    """Totals by state, by pool, by type (and by tenant for the admin) of CountTasks."""
    by_state = dict.fromkeys(STATES, 0)
    by_pool = dict.fromkeys(POOLS, 0)
    by_type: dict[str, int] = {}
    by_tenant: dict[str, int] = {}
    pool_states: dict[str, dict[str, int]] = {p: dict.fromkeys(STATES, 0) for p in POOLS}
    for c in response.counts:
        state, pool = state_name(c.state), pool_name(c.pool)
        by_state[state] = by_state.get(state, 0) + c.count
        by_pool[pool] = by_pool.get(pool, 0) + c.count
        pool_states.setdefault(pool, dict.fromkeys(STATES, 0))[state] += c.count
        by_type[c.type] = by_type.get(c.type, 0) + c.count
        if c.tenant_id:
            by_tenant[c.tenant_id] = by_tenant.get(c.tenant_id, 0) + c.count
    return {
        "by_state": by_state,
        "by_pool": by_pool,
        "pool_states": pool_states,
        "by_type": dict(sorted(by_type.items())),
        "by_tenant": dict(sorted(by_tenant.items())),
        "total": response.total,
        "truncated": response.truncated,
        "as_of": ts(response, "as_of"),
    }


def workers(response: pb.ListWorkersResponse) -> list[dict[str, Any]]:
    return [
        {
            "worker_id": w.worker_id,
            "tenant_id": w.tenant_id,
            "task_types": list(w.task_types),
            "pools": [pool_name(p) for p in w.pools],
            "slots": w.slots,
            "slots_used": w.slots_used,
            "slots_free": w.slots_free,
            "waiting": w.waiting,
            "paused": w.paused,
            "start_on_delivery": w.start_on_delivery,
            "connected_at": ts(w, "connected_at"),
            "last_seen": ts(w, "last_seen"),
            "node_id": w.node_id,
        }
        for w in response.workers
    ]


WAITING = frozenset({"SCHEDULED", "PRELOADED", "RETRYING"})
"""States of a task still to be dispatched."""


def unserved(response: pb.ListWorkersResponse) -> list[dict[str, Any]]:
    """ListWorkers' overdue (tenant, type, pool) groups that no connected worker takes."""
    return [
        {
            "tenant_id": u.tenant_id,
            "type": u.type,
            "pool": pool_name(u.pool),
            "count": u.count,
            "oldest_due_at": ts(u, "oldest_due_at"),
        }
        for u in response.unserved
    ]


def mark_unserved(
    rows: list[dict[str, Any]], groups: list[dict[str, Any]], now: datetime | None = None
) -> list[dict[str, Any]]:
    """``rows`` (of :func:`task_row`) with ``no_worker``: still to be dispatched, due
    before ``now`` (default: the clock), of a (tenant, type, pool) in ``groups``."""
    served_not = {(g["tenant_id"], g["type"], g["pool"]) for g in groups}
    at = iso_of(now or datetime.now(UTC))
    for row in rows:
        row["no_worker"] = (
            row["state"] in WAITING
            and row["due_at"] is not None
            and row["due_at"] < at
            and (row["tenant_id"], row["type"], row["pool"]) in served_not
        )
    return rows


def iso_of(dt: datetime) -> str:
    """``dt`` as :func:`iso` writes a Timestamp (comparable with it as text)."""
    return dt.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def activity(response: pb.GetActivityResponse) -> dict[str, Any]:
    """Per bucket: start (epoch s and ISO), rates per second, lateness in ms."""
    width = response.bucket_s or 60
    rows = [
        {
            "t": epoch_s(b.start),
            "start": ts(b, "start"),
            "dispatched": b.dispatched,
            "completed": b.completed,
            "failed": b.failed,
            "dispatched_per_s": round(b.dispatched / width, 3),
            "completed_per_s": round(b.completed / width, 3),
            "failed_per_s": round(b.failed / width, 3),
            "p50_ms": round(b.lateness_p50_s * 1000, 3),
            "p99_ms": round(b.lateness_p99_s * 1000, 3),
        }
        for b in response.buckets
    ]
    return {"bucket_s": width, "rows": rows}


def forecast(response: pb.GetForecastResponse) -> dict[str, Any]:
    """Rows per bucket start with firing and nominal per pool; the overdue per pool."""
    pools: list[str] = []
    by_start: dict[float, dict[str, Any]] = {}
    for b in response.buckets:
        pool = pool_name(b.pool)
        if pool not in pools:
            pools.append(pool)
        t = epoch_s(b.start)
        row = by_start.setdefault(t, {"t": t, "start": ts(b, "start"), "pools": {}})
        row["pools"][pool] = {"firing": b.firing, "nominal": b.nominal}
    rows = [by_start[t] for t in sorted(by_start)]
    for row in rows:
        for pool in pools:
            row["pools"].setdefault(pool, {"firing": 0, "nominal": 0})
    overdue = {
        pool_name(b.pool): {"firing": b.firing, "nominal": b.nominal} for b in response.overdue
    }
    totals = {
        pool: {
            "firing": sum(r["pools"][pool]["firing"] for r in rows),
            "nominal": sum(r["pools"][pool]["nominal"] for r in rows),
        }
        for pool in pools
    }
    return {
        "bucket_s": response.bucket_s,
        "start": ts(response, "start"),
        "pools": pools,
        "rows": rows,
        "overdue": overdue,
        "totals": totals,
        "peak_firing": max(
            (sum(p["firing"] for p in r["pools"].values()) for r in rows), default=0
        ),
        "peak_nominal": max(
            (sum(p["nominal"] for p in r["pools"].values()) for r in rows), default=0
        ),
        "held": {"rate_limited": response.held_rate_limited, "paused": response.held_paused},
    }


def pauses(response: pb.ListDispatchPausesResponse) -> list[dict[str, Any]]:
    """The dispatch pauses (issue 43): tenant ('' every tenant), type and pool ('' any)."""
    return [
        {
            "tenant_id": p.tenant_id,
            "task_type": p.task_type,
            "pool": pool_name(p.pool) if p.pool != pb.POOL_UNSPECIFIED else "",
            "paused_at": ts(p, "paused_at"),
        }
        for p in response.pauses
    ]


def task_filter(message: pb.TaskFilter) -> dict[str, Any]:
    """A TaskFilter as the confirm page shows it."""
    return {
        "states": [state_name(s) for s in message.states],
        "type": message.type,
        "pools": [pool_name(p) for p in message.pools],
        "scheduled_from": ts(message, "scheduled_from"),
        "scheduled_to": ts(message, "scheduled_to"),
    }


def schedule(s: pb.Schedule) -> dict[str, Any]:
    return {
        "id": s.id,
        "name": s.name,
        "cron": s.cron,
        "interval_s": s.interval_s,
        "timezone": s.timezone or "UTC",
        "task_type": s.task_type,
        "pool": pool_name(s.pool),
        "paused": s.paused,
        "jitter_s": s.jitter_s,
        "overlap_policy": pb.OverlapPolicy.Name(s.overlap_policy).removeprefix("OVERLAP_POLICY_"),
        "next_fire_at": ts(s, "next_fire_at"),
        "last_fired_at": ts(s, "last_fired_at"),
        "upcoming": [iso(u) for u in s.upcoming_fire_at],
    }


def expectation(e: pb.Expectation) -> dict[str, Any]:
    return {
        "id": e.id,
        "job_id": e.job_id,
        "schedule_id": e.schedule_id,
        "interval_s": e.interval_s,
        "tolerance_s": e.tolerance_s,
        "max_runtime_s": e.max_runtime_s,
        "created_at": ts(e, "created_at"),
        "status": expectation_status(e.status),
        "last_completed_at": ts(e, "last_completed_at"),
        "deadline_at": ts(e, "deadline_at"),
    }
