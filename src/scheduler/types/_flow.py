"""Flow control chosen at submission (issue 43): debounce and throttle by key, and the
window of an idempotency key (``scheduler.types`` re-exports every name).

The rules are pure and shared by both stores: :func:`check_flow` refuses bad options
with the field named, :func:`debounced_due` is the due time a debounced submission
gives its key's pending task."""

from __future__ import annotations

import dataclasses
import enum
import math
from datetime import datetime, timedelta

from scheduler._errors import InvalidArgument
from scheduler.limits import flow_key

MAX_FLOW_PERIOD_S = 7 * 86_400.0
"""Longest debounce period, debounce max delay and throttle period: 7 days."""
MAX_IDEMPOTENCY_TTL_S = 366 * 86_400.0
"""Longest idempotency window: a year."""


class DebouncePayload(enum.StrEnum):
    """Which submission's payload the debounced task runs with."""

    LATEST = "latest"
    """The last submission's (the default: the state after the burst)."""
    FIRST = "first"
    """The first submission's (the burst's trigger)."""


class IdempotencyScope(enum.StrEnum):
    """How long an idempotency key deduplicates."""

    FOREVER = "forever"
    """As long as the task's row is kept (the default), or ``idempotency_ttl_s``."""
    UNTIL_FINISHED = "until_finished"
    """Only while the task of the key is not finished (COMPLETED, CANCELLED or
    DEAD_LETTER): a submission after that creates a new task under the same key."""


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Debounce:
    """Replace the key's pending task instead of adding one.

    A submission with a debounce key finds the (tenant, key)'s pending task (not yet
    dispatched): it takes its payload (``payload``) and its due time becomes
    ``now + period_s``, never later than the pending task's first submission +
    ``max_delay_s`` (0: no cap). Without a pending task a new one is made, due at
    ``now + period_s``."""

    key: str
    period_s: float
    max_delay_s: float = 0.0
    payload: DebouncePayload = DebouncePayload.LATEST


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Throttle:
    """At most one task per ``period_s`` per (tenant, key): a submission inside the
    period of the last accepted one is answered with that task (not created)."""

    key: str
    period_s: float


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class FlowOptions:
    """A submission's flow control (each part optional)."""

    debounce: Debounce | None = None
    throttle: Throttle | None = None
    idempotency_ttl_s: float = 0.0
    """The idempotency key deduplicates for this long after the task's submission
    (0: for as long as the row is kept)."""
    idempotency_scope: IdempotencyScope = IdempotencyScope.FOREVER

    @property
    def idempotency_window(self) -> bool:
        """Whether the idempotency key has a window (a TTL or a scope)."""
        return bool(self.idempotency_ttl_s) or (
            self.idempotency_scope is IdempotencyScope.UNTIL_FINISHED
        )


def _period(field: str, value: float, *, zero: bool = False) -> None:
    if not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidArgument(field, "must be a finite number of seconds")
    low_ok = value >= 0 if zero else value > 0
    if not low_ok or value > MAX_FLOW_PERIOD_S:
        low = "0" if zero else "> 0"
        raise InvalidArgument(field, f"must be {low} and at most {MAX_FLOW_PERIOD_S:.0f} s")


def check_flow(flow: FlowOptions, prefix: str, *, idempotency_key: bool) -> None:
    """Refuse bad flow options, naming the field (``prefix`` is the task's, ``task``
    or ``tasks[i]``); ``idempotency_key``: whether the submission names one."""
    d, t = flow.debounce, flow.throttle
    if d is not None:
        flow_key(d.key, f"{prefix}.debounce.key")
        _period(f"{prefix}.debounce.period_s", d.period_s)
        _period(f"{prefix}.debounce.max_delay_s", d.max_delay_s, zero=True)
        if d.max_delay_s and d.max_delay_s < d.period_s:
            raise InvalidArgument(
                f"{prefix}.debounce.max_delay_s", "must be 0 (no cap) or >= debounce.period_s"
            )
        if not isinstance(d.payload, DebouncePayload):
            raise InvalidArgument(f"{prefix}.debounce.payload", "must be latest or first")
    if t is not None:
        flow_key(t.key, f"{prefix}.throttle.key")
        _period(f"{prefix}.throttle.period_s", t.period_s)
    if d is not None and t is not None:
        raise InvalidArgument(f"{prefix}.throttle", "set debounce or throttle, not both")
    if (d is not None or t is not None) and idempotency_key:
        which = "debounce" if d is not None else "throttle"
        raise InvalidArgument(
            f"{prefix}.idempotency_key", f"set an idempotency key or {which}, not both"
        )
    ttl = flow.idempotency_ttl_s
    if not isinstance(ttl, int | float) or not math.isfinite(ttl):
        raise InvalidArgument(f"{prefix}.idempotency_ttl_s", "must be a finite number of seconds")
    if not 0 <= ttl <= MAX_IDEMPOTENCY_TTL_S:
        raise InvalidArgument(
            f"{prefix}.idempotency_ttl_s", f"must be 0..{MAX_IDEMPOTENCY_TTL_S:.0f} s"
        )
    if flow.idempotency_window and not idempotency_key:
        field = "idempotency_ttl_s" if ttl else "idempotency_scope"
        raise InvalidArgument(f"{prefix}.{field}", "needs an idempotency_key")


def debounced_due(now: datetime, first_at: datetime, d: Debounce) -> datetime:
    """The due time a debounced submission at ``now`` gives the pending task whose
    burst began at ``first_at``: ``now + period``, capped at ``first_at + max_delay``
    (and never before ``now``)."""
    due = now + timedelta(seconds=d.period_s)
    if d.max_delay_s:
        due = min(due, max(now, first_at + timedelta(seconds=d.max_delay_s)))
    return due
