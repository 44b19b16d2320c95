"""The quota gate contract: how many dispatches each tenant may send out right now.

Algorithm (every implementation): a **token bucket** per tenant with capacity
``rate_limit_rps`` (one second of burst), refilling continuously at ``rate_limit_rps``
tokens per second, plus an **in-flight cap**: in-flight + granted <= ``max_concurrent``.
A grant takes one token per unit and adds it to in-flight. Token arithmetic is exact
integers in milli-tokens on millisecond timestamps (``floor(now_s * 1000)``), so the
in-memory and the Redis implementation agree to the unit.

Bound: over any closed time window of length ``T`` seconds, units granted (and not
refunded) within it are <= ``rate_limit_rps * (1 + T)``: the bucket holds at most one
second's worth when the window opens and refills ``rate_limit_rps * T`` during it. So any
one-second window sees at most ``2 * rate_limit_rps``, and a long run averages
``rate_limit_rps``. :meth:`QuotaGate.refund` is meant to be called promptly (same
dispatch tick); refunding a grant much older than a second can add its units to the
window in which it is refunded.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Mapping
from typing import Protocol

MILLI = 1000
"""Milli-tokens per token (the bucket's integer unit)."""


@dataclasses.dataclass(frozen=True, slots=True)
class TenantLimits:
    """One tenant's quota: dispatches per second (also the burst) and the in-flight cap.

    Zero means "nothing": a tenant whose (local share of a) limit is 0 gets no grants; the
    engine resolves "unset" to its defaults before it gets here.
    """

    rate_limit_rps: int
    max_concurrent: int

    def __post_init__(self) -> None:
        if self.rate_limit_rps < 0:
            raise ValueError("rate_limit_rps must be >= 0")
        if self.max_concurrent < 0:
            raise ValueError("max_concurrent must be >= 0")


def now_ms(now_s: float) -> int:
    """The bucket clock: whole milliseconds of ``now_s``."""
    return int(now_s * MILLI)


class QuotaGate(Protocol):
    """Admission for dispatches: rate and in-flight cap per tenant.

    Denied units are not lost: the caller keeps those tasks PRELOADED and asks again on a
    later tick.
    """

    async def reserve(
        self,
        wanted: Mapping[uuid.UUID, int],
        limits: Mapping[uuid.UUID, TenantLimits],
        now_s: float,
    ) -> dict[uuid.UUID, int]:
        """For each tenant in ``wanted``, how many dispatches may go out now (<= wanted).

        Granted units are taken from the tenant's bucket and added to its in-flight
        count. Every tenant of ``wanted`` must have an entry in ``limits``.
        """
        ...

    async def refund(self, unused: Mapping[uuid.UUID, int], now_s: float) -> None:
        """Give back grants that were not used: tokens (up to the burst) and in-flight."""
        ...

    async def finished(self, done: Mapping[uuid.UUID, int]) -> None:
        """Tasks left their worker: lower in-flight (never below zero)."""
        ...

    def throttled(self) -> Mapping[uuid.UUID, int]:
        """Units denied so far, per tenant (a monotonic metric)."""
        ...

    async def close(self) -> None:
        """Release resources; safe to call twice."""
        ...
