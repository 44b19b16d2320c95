"""One suite, both gates: the same answers to the unit from LocalQuota and RedisQuota."""

from __future__ import annotations

import uuid

from scheduler.quota import QuotaGate, TenantLimits

T = uuid.UUID(int=1)
U = uuid.UUID(int=2)
T0 = 1_700_000_000.0


def lim(rate: int, cap: int = 1_000) -> TenantLimits:
    return TenantLimits(rate_limit_rps=rate, max_concurrent=cap)


async def test_burst_is_one_second_then_refill(gate: QuotaGate) -> None:
    limits = {T: lim(10)}
    assert await gate.reserve({T: 25}, limits, T0) == {T: 10}
    assert await gate.reserve({T: 25}, limits, T0) == {T: 0}
    assert await gate.reserve({T: 25}, limits, T0 + 0.35) == {T: 3}
    # the half token left over counts: 0.5 + 0.5 is one
    assert await gate.reserve({T: 25}, limits, T0 + 0.4) == {T: 1}
    assert await gate.reserve({T: 25}, limits, T0 + 0.45) == {T: 0}
    assert await gate.reserve({T: 25}, limits, T0 + 0.5) == {T: 1}
    # idle for long: back to one second of burst, no more
    assert await gate.reserve({T: 25}, limits, T0 + 60) == {T: 10}
    assert gate.throttled() == {T: 15 + 25 + 22 + 24 + 25 + 24 + 15}


async def test_in_flight_cap_and_finished(gate: QuotaGate) -> None:
    limits = {T: lim(100, cap=4)}
    assert await gate.reserve({T: 3}, limits, T0) == {T: 3}
    assert await gate.reserve({T: 3}, limits, T0) == {T: 1}
    await gate.finished({T: 2})
    assert await gate.reserve({T: 5}, limits, T0) == {T: 2}
    assert await gate.reserve({T: 5}, limits, T0) == {T: 0}


async def test_finished_never_goes_negative(gate: QuotaGate) -> None:
    limits = {T: lim(100, cap=3)}
    await gate.finished({T: 50})
    assert await gate.reserve({T: 10}, limits, T0) == {T: 3}
    await gate.finished({T: 50})
    await gate.finished({T: 50})
    assert await gate.reserve({T: 10}, limits, T0) == {T: 3}


async def test_refund_returns_tokens_and_in_flight(gate: QuotaGate) -> None:
    limits = {T: lim(5, cap=5)}
    assert await gate.reserve({T: 5}, limits, T0) == {T: 5}
    await gate.refund({T: 2}, T0)
    assert await gate.reserve({T: 5}, limits, T0) == {T: 2}
    # refunds never lift the bucket above one second of burst
    await gate.refund({T: 5}, T0 + 10)
    await gate.finished({T: 100})
    assert await gate.reserve({T: 50}, limits, T0 + 10) == {T: 5}


async def test_refund_of_unknown_tenant_is_harmless(gate: QuotaGate) -> None:
    await gate.refund({U: 3}, T0)
    await gate.finished({U: 3})
    assert await gate.reserve({U: 9}, {U: lim(4)}, T0) == {U: 4}


async def test_tenants_are_independent_in_one_call(gate: QuotaGate) -> None:
    limits = {T: lim(2), U: lim(7, cap=3)}
    got = await gate.reserve({T: 5, U: 5}, limits, T0)
    assert got == {T: 2, U: 3}
    assert gate.throttled() == {T: 3, U: 2}
    assert await gate.reserve({T: 0, U: 0}, limits, T0) == {T: 0, U: 0}


async def test_clock_stepping_back_refills_nothing(gate: QuotaGate) -> None:
    limits = {T: lim(10)}
    assert await gate.reserve({T: 10}, limits, T0) == {T: 10}
    assert await gate.reserve({T: 10}, limits, T0 - 5) == {T: 0}
    assert await gate.reserve({T: 10}, limits, T0 + 0.2) == {T: 2}


async def test_lowered_limit_clamps_the_bucket(gate: QuotaGate) -> None:
    assert await gate.reserve({T: 1}, {T: lim(100)}, T0) == {T: 1}
    assert await gate.reserve({T: 100}, {T: lim(3)}, T0) == {T: 3}
    assert await gate.reserve({T: 100}, {T: lim(0)}, T0 + 5) == {T: 0}
