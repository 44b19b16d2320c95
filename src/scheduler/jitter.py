"""Stable hashing, shard assignment and deterministic jitter (brief §6, §7).

Python's built-in ``hash()`` is salted per process, so every hash that must agree
between processes and restarts goes through :func:`stable_hash` (xxh3 over the UUID
bytes).
"""

from __future__ import annotations

import enum
import uuid

import xxhash

JITTER_WINDOW_S = 120
"""Half-width of the jitter window: offsets fall in [-120 s, +120 s]."""


class JitterMode(enum.StrEnum):
    """How a task's effective due time may move away from its scheduled time."""

    SYMMETRIC = "symmetric"
    """Offset in [-120 s, +120 s] (the seed's default)."""
    LATE_ONLY = "late_only"
    """Offset in [0, +120 s]: a midnight job never runs the day before."""
    NONE = "none"
    """No offset (the same as ``strict_timing``)."""


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

    Offset = stable_hash mod (2W+1) - W seconds for SYMMETRIC, and
    stable_hash mod (W+1) seconds for LATE_ONLY: the same task always gets the same
    offset, so a re-evaluated schedule lands on the same instant.
    """
    if mode is JitterMode.NONE or window_s == 0:
        return 0
    h = stable_hash(tenant_id, task_id)
    if mode is JitterMode.LATE_ONLY:
        return (h % (window_s + 1)) * 1000
    return ((h % (2 * window_s + 1)) - window_s) * 1000
