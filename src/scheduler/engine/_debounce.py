"""Debounced submissions of one key, combined on their way to the store (issue 43).

Owns :class:`DebounceCombiner`. Every debounced submission takes its key's row lock in
the store for one transaction (``tickwheel_debounce()``), so one key admits about one
submission per commit (a few ms; 100-600 ms when the disk stalls). Submissions of one
(tenant, key) that arrive on this node while a store call of that key is under way
wait, and then go to the store as one: the store's answer would be the same as for
each in turn (the latest ``now`` sets the due time; the payload is the last one's, or
the first one's with ``DebouncePayload.FIRST``; every one of them names the burst's
task), and the key's lock is taken once for all of them. The first of a group that
starts a new burst is the one answered ``created``; the others are ``debounced``.
Calls the insert function it is given (the engine's store write); called by the
engine facade's submit path.
"""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime

from scheduler._aio import Background
from scheduler.types import DebouncePayload, InsertResult, NewTask

Insert = Callable[[Sequence[NewTask], datetime], Awaitable[list[InsertResult]]]

_Waiting = tuple[NewTask, datetime, "asyncio.Future[InsertResult]"]


def merged(group: Sequence[tuple[NewTask, datetime]]) -> NewTask:
    """The one submission that stands for ``group`` (same tenant and key, in arrival
    order): the last one, with the first one's payload when the key keeps the first."""
    last = group[-1][0]
    assert last.flow is not None
    assert last.flow.debounce is not None
    if last.flow.debounce.payload is DebouncePayload.FIRST:
        return dataclasses.replace(last, payload=group[0][0].payload)
    return last


def answers(result: InsertResult, n: int) -> list[InsertResult]:
    """The answers of a group of ``n`` from the store's answer to its merged call."""
    rest = InsertResult(result.task, False, debounced=True)
    return [result if i == 0 else rest for i in range(n)]


class DebounceCombiner:
    """One store call at a time per (tenant, debounce key) on this node; what arrives
    meanwhile goes in the next, as one."""

    def __init__(self, insert: Insert, background: Background) -> None:
        self._insert = insert
        self._background = background
        self._waiting: dict[tuple[uuid.UUID, str], list[_Waiting]] = {}
        self._busy: set[tuple[uuid.UUID, str]] = set()

    async def submit(self, task: NewTask, now: datetime) -> InsertResult:
        """Store one debounced submission (with the others of its key)."""
        assert task.flow is not None
        assert task.flow.debounce is not None
        key = (task.tenant_id, task.flow.debounce.key)
        done: asyncio.Future[InsertResult] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(key, []).append((task, now, done))
        if key not in self._busy:
            self._busy.add(key)
            self._background.spawn(self._drain(key), "debounce")
        return await done

    async def _drain(self, key: tuple[uuid.UUID, str]) -> None:
        try:
            while group := self._waiting.pop(key, None):
                try:
                    [result] = await self._insert(
                        [merged([(t, n) for t, n, _ in group])], group[-1][1]
                    )
                except BaseException as exc:
                    for _, _, done in group:
                        if not done.done():
                            done.set_exception(exc)
                    if isinstance(exc, asyncio.CancelledError):
                        raise
                    continue
                for (_, _, done), answer in zip(group, answers(result, len(group)), strict=True):
                    if not done.done():
                        done.set_result(answer)
        finally:
            self._busy.discard(key)
            for _, _, done in self._waiting.pop(key, []):
                if not done.done():
                    done.set_exception(asyncio.CancelledError())
