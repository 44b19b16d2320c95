"""LocalQuota semantics, the exported names, and the rate bound as a Hypothesis property."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import scheduler.quota
from scheduler.quota import LocalQuota, QuotaConfig, TenantLimits

T = uuid.UUID(int=1)
U = uuid.UUID(int=2)
T0 = 1_000.0


def test_exported_names_are_pinned() -> None:
    assert sorted(scheduler.quota.__all__) == [
        "LocalQuota",
        "QuotaConfig",
        "QuotaGate",
        "RedisQuota",
        "TenantLimits",
        "open_quota",
    ]


def test_config_and_limits_validate() -> None:
    with pytest.raises(ValueError, match="node_share"):
        QuotaConfig(redis_url=None, node_share=0.0)
    with pytest.raises(ValueError, match="redis_timeout_s"):
        QuotaConfig(redis_url=None, redis_timeout_s=0)
    with pytest.raises(ValueError, match="rate_limit_rps"):
        TenantLimits(rate_limit_rps=-1, max_concurrent=1)
    with pytest.raises(ValueError, match="max_concurrent"):
        TenantLimits(rate_limit_rps=1, max_concurrent=-1)


async def test_empty_start_and_seeded_in_flight() -> None:
    q = LocalQuota(start_full=False, in_flight={T: 3})
    lim = {T: TenantLimits(rate_limit_rps=10, max_concurrent=5)}
    assert await q.reserve({T: 10}, lim, T0) == {T: 0}
    assert await q.reserve({T: 10}, lim, T0 + 1.0) == {T: 2}
    assert q.in_flight() == {T: 5}


async def test_zero_limits_grant_nothing() -> None:
    q = LocalQuota()
    assert await q.reserve({T: 5}, {T: TenantLimits(0, 10)}, T0) == {T: 0}
    assert await q.reserve({T: 5}, {T: TenantLimits(10, 0)}, T0) == {T: 0}
    assert q.throttled() == {T: 10}


_ops = st.lists(
    st.tuples(
        st.integers(min_value=0, max_value=1500),  # ms the clock moves first
        st.sampled_from(["reserve", "finished"]),
        st.integers(min_value=0, max_value=40),  # units wanted / finished
        st.integers(min_value=0, max_value=40),  # units refunded right after a reserve
    ),
    max_size=60,
)


@settings(max_examples=200, deadline=None)
@given(
    rate=st.integers(min_value=0, max_value=25),
    cap=st.integers(min_value=0, max_value=30),
    ops=_ops,
)
async def test_rate_and_cap_bound_hold_for_any_sequence(
    rate: int, cap: int, ops: list[tuple[int, str, int, int]]
) -> None:
    """Net grants in any closed 1-second window <= 2 * rate (burst + refill); in-flight <= cap."""
    q = LocalQuota()
    lim = {T: TenantLimits(rate_limit_rps=rate, max_concurrent=cap)}
    now = 0
    in_flight = 0
    events: list[tuple[int, int]] = []  # (ms, net units granted)
    for dt, kind, n, back in ops:
        now += dt
        if kind == "reserve":
            got = (await q.reserve({T: n}, lim, now / 1000))[T]
            assert 0 <= got <= n
            back = min(back, got)
            await q.refund({T: back}, now / 1000)
            in_flight += got - back
            events.append((now, got - back))
        else:
            await q.finished({T: n})
            in_flight = max(0, in_flight - n)
        assert in_flight <= cap
        assert q.in_flight().get(T, 0) == in_flight
    for start, _ in events:
        window = sum(u for at, u in events if start <= at <= start + 1000)
        assert window <= 2 * rate, (start, window)
