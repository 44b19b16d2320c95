"""The debounce combiner (``engine/_debounce.py``): one store call per key at a time,
what arrives meanwhile goes in the next one, merged as the store would apply it."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import pytest

from scheduler._aio import Background
from scheduler.engine._debounce import DebounceCombiner, answers, merged
from scheduler.types import Debounce, DebouncePayload, FlowOptions, InsertResult, NewTask
from tests.support.records import task_record
from tests.support.stores import new_task, new_tenant

T0 = datetime(2026, 1, 1, tzinfo=UTC)
TENANT = new_tenant()


def _sub(n: int, key: str = "k", keep: DebouncePayload = DebouncePayload.LATEST) -> NewTask:
    flow = FlowOptions(debounce=Debounce(key=key, period_s=1, payload=keep))
    return new_task(TENANT, T0, payload={"n": n}, flow=flow)


def test_the_merged_submission_is_the_last_with_the_kept_payload() -> None:
    group = [(_sub(n), T0 + timedelta(seconds=n)) for n in range(3)]
    assert merged(group) is group[-1][0]
    first = [(_sub(n, keep=DebouncePayload.FIRST), T0) for n in range(3)]
    m = merged(first)
    assert m.payload == {"n": 0}
    assert m.id == first[-1][0].id


def test_a_group_s_first_is_the_one_created() -> None:
    task = task_record(tenant_id=TENANT.id, type="t", payload={}, scheduled_at=T0, due_at=T0)
    made = answers(InsertResult(task, True), 3)
    assert [(a.created, a.debounced) for a in made] == [(True, False), (False, True), (False, True)]
    joined = answers(InsertResult(task, False, debounced=True), 2)
    assert all(a.debounced and not a.created for a in joined)


async def test_submissions_that_wait_go_to_the_store_as_one() -> None:
    calls: list[list[NewTask]] = []
    seen: set[str] = set()
    gate = asyncio.Event()

    async def insert(tasks: Sequence[NewTask], now: datetime) -> list[InsertResult]:
        calls.append(list(tasks))
        await gate.wait()
        t = tasks[0]
        assert t.flow is not None
        assert t.flow.debounce is not None
        new = t.flow.debounce.key not in seen
        seen.add(t.flow.debounce.key)
        rec = task_record(
            id=t.id,
            tenant_id=t.tenant_id,
            type=t.type,
            payload=t.payload,
            scheduled_at=t.scheduled_at,
            due_at=t.due_at,
        )
        return [InsertResult(rec, new, debounced=not new)]

    background = Background(logging.getLogger("test"))
    combiner = DebounceCombiner(insert, background)
    first = asyncio.create_task(combiner.submit(_sub(0), T0))
    await asyncio.sleep(0)
    rest = [asyncio.create_task(combiner.submit(_sub(n), T0)) for n in range(1, 5)]
    other = asyncio.create_task(combiner.submit(_sub(9, key="other"), T0))
    for _ in range(5):
        await asyncio.sleep(0)
    gate.set()
    done = await asyncio.gather(first, *rest, other)
    # key k: one call for the first, one for the four that waited (the last one's
    # payload); key other: its own call, not held behind k's
    k_calls = [
        c for c in calls if c[0].flow and c[0].flow.debounce and c[0].flow.debounce.key == "k"
    ]
    assert [[t.payload for t in c] for c in k_calls] == [[{"n": 0}], [{"n": 4}]]
    assert done[0].created
    assert all(r.debounced for r in done[1:5])
    await background.cancel_all()


async def test_a_failed_store_call_fails_its_whole_group() -> None:
    async def insert(tasks: Sequence[NewTask], now: datetime) -> list[InsertResult]:
        raise RuntimeError("store down")

    background = Background(logging.getLogger("test"))
    combiner = DebounceCombiner(insert, background)
    with pytest.raises(RuntimeError, match="store down"):
        await combiner.submit(_sub(0), T0)
    await background.cancel_all()
