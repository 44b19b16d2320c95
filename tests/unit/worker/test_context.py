"""A handler's :class:`TaskContext`: its ``cancelled`` event is made only when asked
for (most handlers never wait on it), and says the same whichever comes first, the
cancel or the question."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from scheduler.worker import Interrupted, TaskContext
from scheduler.worker._context import CANCELLED, DRAIN, cancel
from tests.unit.worker.test_slots import _held


def _ctx() -> TaskContext:
    return _held(uuid.uuid4()).ctx


async def test_a_cancel_before_anyone_asked_is_seen_by_the_event() -> None:
    ctx = _ctx()
    assert not ctx.is_cancelled
    cancel(ctx, DRAIN)
    assert ctx.is_cancelled
    assert ctx.cancelled.is_set()
    await asyncio.wait_for(ctx.cancelled.wait(), 1.0)
    with pytest.raises(Interrupted, match="drain"):
        ctx.raise_if_cancelled()


async def test_a_handler_waiting_on_the_event_wakes_at_the_cancel() -> None:
    ctx = _ctx()
    waiting = asyncio.ensure_future(ctx.cancelled.wait())
    await asyncio.sleep(0)
    assert not waiting.done()
    ctx.raise_if_cancelled()  # not cancelled: nothing raised
    cancel(ctx, CANCELLED)
    await asyncio.wait_for(waiting, 1.0)
    cancel(ctx, DRAIN)  # the first reason wins
    assert ctx.cancel_reason == CANCELLED


async def test_the_context_takes_no_attribute_it_does_not_name() -> None:
    ctx = _ctx()
    with pytest.raises(AttributeError):
        ctx.extra = 1  # type: ignore[attr-defined]
