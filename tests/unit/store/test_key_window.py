"""The idempotency key's window (issue 43): one rule for both stores
(``scheduler.store._common.key_window`` / ``key_window_over``), over PostgreSQL's rows
(datetimes) and SQLite's (microseconds)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from scheduler.store._common import key_window, key_window_over
from scheduler.types import FlowOptions, IdempotencyScope, NewTask, Tenant
from tests.support.stores import new_task

NOW = datetime(2026, 12, 6, tzinfo=UTC)


def _task(flow: FlowOptions | None) -> NewTask:
    return new_task(Tenant(id=uuid.uuid4(), name="t"), NOW, flow=flow)


def test_the_window_a_submission_sets() -> None:
    assert key_window(_task(None), NOW) is None
    assert key_window(_task(FlowOptions()), NOW) is None
    ttl = FlowOptions(idempotency_ttl_s=60)
    assert key_window(_task(ttl), NOW) == (NOW + timedelta(seconds=60), False)
    until = FlowOptions(idempotency_scope=IdempotencyScope.UNTIL_FINISHED)
    assert key_window(_task(until), NOW) == (None, True)


def test_when_a_window_is_over_in_either_stores_time() -> None:
    second, us = timedelta(seconds=1), 10**15
    times = ((NOW, NOW - second, NOW + second), (us, us - 10**6, us + 10**6))
    for now, earlier, later in times:  # PostgreSQL's datetimes, SQLite's microseconds
        for expires, over in ((earlier, True), (now, True), (later, False)):
            row = {"key_expires_at": expires, "key_until_finished": False, "status": "RUNNING"}
            assert key_window_over(row, now) is over
    for status, over in (("RUNNING", False), ("COMPLETED", True), ("DEAD_LETTER", True)):
        row = {"key_expires_at": None, "key_until_finished": True, "status": status}
        assert key_window_over(row, NOW) is over
    finished = {"key_expires_at": None, "key_until_finished": False, "status": "COMPLETED"}
    assert not key_window_over(finished, NOW)  # no window: the key dedupes for good
