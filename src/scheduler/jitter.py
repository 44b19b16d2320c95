"""Stable hashing, shard assignment and deterministic jitter.

Python's built-in ``hash()`` is salted per process, so every hash that must agree
between processes and restarts goes through :func:`stable_hash` (xxh3 over the UUID
bytes).

The jitter rule (:func:`effective_mode`): a task is never dispatched before the time
its submitter asked for unless it opted into :attr:`JitterMode.SYMMETRIC`. By default a
task asked for a *round instant* (a whole minute, where people's jobs pile up: 12:00:00,
12:30:00) is spread late-only over ``[0, +W]``, and any other instant (a delay, "now")
runs at that instant. ``strict_timing`` means no offset. The offset is a deterministic
function of (tenant, task) in millisecond steps, so a million tasks at 12:00:00 leave
at about W*1000+1 distinct milliseconds, evenly (``benchmarks/test_jitter.py``).
"""

from __future__ import annotations

import enum
import uuid
from datetime import datetime

import xxhash

JITTER_WINDOW_S = 120
"""The jitter window W: late-only offsets fall in [0, +W], symmetric ones in [-W, +W]."""


class JitterMode(enum.StrEnum):
    """How a task's effective due time may move away from its scheduled time.

    A submission that names no mode gets :func:`effective_mode`'s default; the mode
    stored with a task is always one of these three.
    """

    SYMMETRIC = "symmetric"
    """Offset in [-W, +W]: may run up to W *before* the asked time (opt-in only)."""
    LATE_ONLY = "late_only"
    """Offset in [0, +W]: a midnight job never runs the day before."""
    NONE = "none"
    """No offset (the same as ``strict_timing``)."""


def is_round_instant(at: datetime) -> bool:
    """A whole minute (seconds and fraction zero): where stampedes happen."""
    return at.second == 0 and at.microsecond == 0


def effective_mode(requested: JitterMode | None, strict: bool, at: datetime) -> JitterMode:
    """The mode a new task gets: the rule of this module.

    ``strict`` wins (NONE); an explicit ``requested`` mode is kept; with none, a round
    instant is spread late-only and any other instant gets no offset.
    """
    if strict:
        return JitterMode.NONE
    if requested is not None:
        return requested
    return JitterMode.LATE_ONLY if is_round_instant(at) else JitterMode.NONE


def stable_hash(tenant_id: uuid.UUID, task_id: uuid.UUID) -> int:
    """A 64-bit hash of (tenant, task) that is the same in every process, forever."""
    return int(xxhash.xxh3_64_intdigest(tenant_id.bytes + task_id.bytes))


def shard_of(tenant_id: uuid.UUID, task_id: uuid.UUID, shard_count: int) -> int:
    """The shard a task belongs to; fixed for a cluster's ``shard_count``."""
    if shard_count <= 0:
        raise ValueError(f"shard_count must be positive, got {shard_count}")
    return stable_hash(tenant_id, task_id) % shard_count


def jitter_offset_ms(
    tenant_id: uuid.UUID,
    task_id: uuid.UUID,
    mode: JitterMode,
    *,
    window_s: int = JITTER_WINDOW_S,
) -> int:
    """Deterministic offset in milliseconds for a task (0 when ``mode`` is NONE).

    Offset = stable_hash mod (1000W+1) ms for LATE_ONLY, and
    stable_hash mod (2000W+1) - 1000W ms for SYMMETRIC: the same task always gets the
    same offset, and millisecond steps spread a stampede over the whole window instead
    of piling it on W+1 whole seconds.
    """
    if mode is JitterMode.NONE or window_s == 0:
        return 0
    h = stable_hash(tenant_id, task_id)
    span_ms = window_s * 1000
    if mode is JitterMode.LATE_ONLY:
        return h % (span_ms + 1)
    return (h % (2 * span_ms + 1)) - span_ms
