"""The dashboard's text formatting (_format.py): unicode payloads, bidi controls,
relative times and error types."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from google.protobuf.struct_pb2 import Struct

from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from scheduler.ui import _format as fmt

NOW = datetime(2026, 12, 6, 12, 0, 0, tzinfo=UTC)


def _task(payload: dict[str, object]) -> pb.Task:
    s = Struct()
    s.update(payload)
    return pb.Task(id="0d6f7c1e-0000-4000-8000-000000000000", payload=s)


def test_payload_json_shows_arabic_cjk_and_emoji_as_text() -> None:
    payload = {"ar": "مرحبا", "zh": "你好", "emoji": "🎉"}
    text = fmt.struct_json(_task(payload), "payload")
    for value in payload.values():
        assert value in text
    assert "\\u" not in text
    assert json.loads(text) == payload


@pytest.mark.parametrize("control", ["\u202e", "\u202a", "\u2066", "\u2069", "\u200f", "\u061c"])
def test_payload_json_escapes_bidi_controls_and_keeps_the_value(control: str) -> None:
    payload = {f"k{control}": f"abc{control}def"}
    text = fmt.struct_json(_task(payload), "payload")
    assert control not in text
    assert f"\\u{ord(control):04x}" in text
    assert json.loads(text) == payload


def test_visible_controls_names_each_control_and_leaves_other_text_alone() -> None:
    assert fmt.visible_controls("abc\u202edef") == "abc[U+202E]def"
    assert fmt.visible_controls("مرحبا 你好 🎉") == "مرحبا 你好 🎉"


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("2026-12-06T12:00:00.000Z", "now"),
        ("2026-12-06T11:59:30.000Z", "30s ago"),
        ("2026-12-06T12:05:00.000Z", "in 5m"),
        ("2026-12-06T09:00:00.000Z", "3h ago"),
        ("2026-12-08T12:00:00.000Z", "in 2d"),
        (None, ""),
    ],
)
def test_relative_times(value: str | None, shown: str) -> None:
    assert fmt.relative(value, NOW) == shown


def test_utc_title_is_iso_with_utc() -> None:
    assert fmt.utc_title("2026-12-06T12:00:01.250Z") == "2026-12-06 12:00:01.250 UTC"


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        ("ValueError: bad card", "ValueError"),
        ("billing.CardDeclined: no", "billing.CardDeclined"),
        ("boom: browser-test failure", ""),
        ("timed out", ""),
    ],
)
def test_error_type_is_read_from_the_start_of_the_error(error: str, kind: str) -> None:
    assert fmt.error_type(error) == kind


def test_task_row_says_when_the_idempotency_key_differs_from_the_id() -> None:
    task_id = "0d6f7c1e-0000-4000-8000-000000000000"
    assert not fmt.task_row(pb.Task(id=task_id))["key_differs"]
    assert not fmt.task_row(pb.Task(id=task_id, idempotency_key=task_id))["key_differs"]
    row = fmt.task_row(pb.Task(id=task_id, idempotency_key="order-42", max_retries=3))
    assert row["key_differs"]
    assert row["max_attempts"] == 4


def test_a_dispatch_row_says_its_due_time_beside_its_commit() -> None:
    """Issue 40: a DISPATCHED row 50 ms before the due time read as a task started
    early; the timeline (as ``tickwheel history``) says the due time and the lead."""
    history = pb.GetTaskHistoryResponse()
    row = history.transitions.add(
        from_state=pb.TASK_STATE_PRELOADED, to_state=pb.TASK_STATE_DISPATCHED, reason="dispatched"
    )
    row.at.FromDatetime(datetime(2026, 12, 6, 12, 0, 0, 950_000))
    row.due_at.FromDatetime(datetime(2026, 12, 6, 12, 0, 1))
    acked = history.transitions.add(
        from_state=pb.TASK_STATE_DISPATCHED, to_state=pb.TASK_STATE_RUNNING, reason="acked"
    )
    acked.at.FromDatetime(datetime(2026, 12, 6, 12, 0, 1, 2_000))
    first, second = fmt.timeline(history)
    assert first["reason"] == (
        "dispatched; due 12:00:01.000: committed 50 ms ahead (the dispatch lead),"
        " pushed to the worker at due"
    )
    assert second["reason"] == "acked"


@pytest.mark.parametrize(
    ("at_ms", "note"),
    [
        (
            950,
            "due 12:00:01.000: committed 50 ms ahead (the dispatch lead),"
            " pushed to the worker at due",
        ),
        (1000, "due 12:00:01.000: dispatched on time"),
        (1012, "due 12:00:01.000: dispatched 12 ms late"),
    ],
)
def test_dispatch_note(at_ms: int, note: str) -> None:
    from datetime import timedelta

    from scheduler.types import dispatch_note

    base = datetime(2026, 12, 6, 12, 0, 0, tzinfo=UTC)
    due = base + timedelta(seconds=1)
    assert dispatch_note(base + timedelta(milliseconds=at_ms), due) == note
    assert dispatch_note(base, None) == ""


def _tr(at: str, frm: str, to: str, actor: str = "node-1", reason: str = "") -> dict[str, object]:
    return {"kind": "transition", "at": at, "from": frm, "to": to, "actor": actor, "reason": reason}


def test_attempts_group_the_history_by_dispatch_with_ms_durations() -> None:
    rows = [
        _tr("2026-12-06T12:00:00.000Z", "SCHEDULED", "PRELOADED", reason="preloaded"),
        _tr("2026-12-06T12:00:00.010Z", "PRELOADED", "DISPATCHED", reason="dispatched"),
        _tr("2026-12-06T12:00:00.025Z", "DISPATCHED", "RUNNING", "w-1", "acked"),
        {"kind": "refused-write", "at": "2026-12-06T12:00:00.030Z"},
        _tr("2026-12-06T12:00:01.275Z", "RUNNING", "RETRYING", "w-1", "failed: boom"),
        _tr("2026-12-06T12:00:02.000Z", "RETRYING", "PRELOADED", reason="retry due"),
        _tr("2026-12-06T12:00:02.004Z", "PRELOADED", "DISPATCHED", reason="dispatched"),
        _tr("2026-12-06T12:00:07.004Z", "DISPATCHED", "PRELOADED", reason="lease expired"),
        _tr("2026-12-06T12:00:08.000Z", "PRELOADED", "RUNNING", "w-2", "started on delivery"),
    ]
    last = [
        _tr("2026-12-06T12:00:09.500Z", "RUNNING", "RETRYING", "w-2", "failed: bad"),
        _tr("2026-12-06T12:00:09.500Z", "RETRYING", "DEAD_LETTER", "w-2", "no attempts left"),
    ]
    (*_, ended) = fmt.attempts([*rows, *last])  # type: ignore[arg-type]
    assert (ended["outcome"], ended["duration_ms"]) == ("DEAD_LETTER", 1500)
    assert ended["reason"] == "failed: bad; no attempts left"
    got = fmt.attempts(rows)  # type: ignore[arg-type]
    assert [(a["n"], a["outcome"], a["duration_ms"], a["worker"]) for a in got] == [
        (1, "RETRYING", 1250, "w-1"),  # from the ack to the failure
        (2, "PRELOADED", 5000, "node-1"),  # never acked: from the dispatch
        (3, None, None, "w-2"),  # still running
    ]
    assert got[0]["dispatched_at"] == "2026-12-06T12:00:00.010Z"
    assert got[0]["started_at"] == "2026-12-06T12:00:00.025Z"
    assert got[0]["reason"] == "failed: boom"
    assert got[2]["started_at"] == got[2]["dispatched_at"]
    assert fmt.attempts([]) == []


def test_mark_unserved_flags_overdue_waiting_rows_of_an_unserved_group() -> None:
    tenant = "0d6f7c1e-0000-4000-8000-000000000001"

    def row(state: str, type_: str, due: str, pool: str = "STANDARD") -> dict[str, object]:
        return {"tenant_id": tenant, "state": state, "type": type_, "pool": pool, "due_at": due}

    past, future = "2026-12-06T11:59:00.000Z", "2026-12-06T12:01:00.000Z"
    rows = [
        row("PRELOADED", "orphan", past),  # flagged
        row("RETRYING", "orphan", past),  # flagged
        row("PRELOADED", "orphan", future),  # not due yet
        row("DEAD_LETTER", "orphan", past),  # not waiting
        row("PRELOADED", "orphan", past, "BULK"),  # another pool: a worker takes it
        row("PRELOADED", "served", past),  # a type some worker takes
    ]
    groups = [{"tenant_id": tenant, "type": "orphan", "pool": "STANDARD", "count": 2}]
    marked = fmt.mark_unserved(rows, groups, NOW)  # type: ignore[arg-type]
    assert [r["no_worker"] for r in marked] == [True, True, False, False, False, False]
    assert not any(r["no_worker"] for r in fmt.mark_unserved(rows, [], NOW))  # type: ignore[arg-type]


def test_unserved_groups_from_list_workers() -> None:
    resp = pb.ListWorkersResponse()
    u = resp.unserved.add(tenant_id="t", type="orphan", pool=pb.POOL_BULK, count=4)
    u.oldest_due_at.FromDatetime(NOW)
    assert fmt.unserved(resp) == [
        {
            "tenant_id": "t",
            "type": "orphan",
            "pool": "BULK",
            "count": 4,
            "oldest_due_at": "2026-12-06T12:00:00.000Z",
        }
    ]
