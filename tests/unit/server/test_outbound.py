"""A worker stream's outbound queue: pushes waiting behind a write merge into one
message, in order, and nothing else merges or moves (``scheduler.server._outbound``)."""

from __future__ import annotations

import asyncio

from scheduler.server._outbound import MAX_MERGED, Outbound, Pushes
from scheduler.types import Assignment
from tests.support.records import assignment


def _assignments(n: int) -> list[Assignment]:
    return [assignment() for _ in range(n)]


async def _drain(out: Outbound[str]) -> list[str | Pushes]:
    items: list[str | Pushes] = []
    while len(out):
        items.append(await out.get())
    return items


async def test_pushes_waiting_together_are_one_message_in_their_order() -> None:
    out: Outbound[str] = Outbound()
    first, second, third = _assignments(2), _assignments(1), _assignments(3)
    for batch in (first, second, third):
        out.push(batch)
    [merged] = await _drain(out)
    assert type(merged) is Pushes
    assert merged == [*first, *second, *third]


async def test_what_comes_between_two_pushes_keeps_them_apart() -> None:
    """A cancel notice must follow the push of its task; a Result keeps its place."""
    out: Outbound[str] = Outbound()
    first, second = _assignments(1), _assignments(1)
    out.push(first)
    out.put("cancel")
    out.push(second)
    out.put("result")
    assert await _drain(out) == [first, "cancel", second, "result"]


async def test_a_merged_push_holds_at_most_max_merged_assignments() -> None:
    out: Outbound[str] = Outbound()
    batches = [_assignments(300) for _ in range(4)]
    for b in batches:
        out.push(b)
    pushes = await _drain(out)
    assert [len(p) for p in pushes] == [900, 300]
    assert [a for p in pushes for a in p] == [a for b in batches for a in b]
    assert MAX_MERGED == 1000


async def test_a_push_after_the_last_was_taken_starts_a_new_message() -> None:
    out: Outbound[str] = Outbound()
    first, second = _assignments(1), _assignments(1)
    out.push(first)
    assert await out.get() == first
    out.push(second)
    assert await out.get() == second


async def test_get_waits_for_an_item() -> None:
    out: Outbound[str] = Outbound()
    getter = asyncio.create_task(out.get())
    await asyncio.sleep(0)
    assert not getter.done()
    out.put("x")
    assert await getter == "x"
