"""Bounded waiting for tests: poll a condition instead of sleeping a guessed time."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


async def eventually(
    probe: Callable[[], Awaitable[T]],
    until: Callable[[T], bool] = bool,
    *,
    timeout_s: float = 20.0,
    interval_s: float = 0.02,
    what: str = "condition",
) -> T:
    """Call ``probe`` until ``until(result)`` holds; fail after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    last: T | None = None
    while True:
        last = await probe()
        if until(last):
            return last
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s}s waiting for {what}; last: {last!r}")
        await asyncio.sleep(interval_s)
