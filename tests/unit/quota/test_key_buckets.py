"""The rate limit keys' token buckets (issue 43): exact integer bucket math."""

from __future__ import annotations

import uuid

import pytest

from scheduler.quota._key_buckets import MICRO, KeyLimit, LocalKeyBuckets, refill, wait_s

K = (uuid.uuid4(), "partner-api")


async def test_a_new_bucket_grants_its_burst_then_one_token_per_period() -> None:
    b = LocalKeyBuckets()
    lim = {K: KeyLimit(100.0, 5)}
    assert await b.reserve({K: 50}, lim, 10.0) == {K: 5}
    assert await b.reserve({K: 50}, lim, 10.0) == {K: 0}
    assert await b.reserve({K: 50}, lim, 10.009) == {K: 0}  # 0.9 of a token
    assert await b.reserve({K: 50}, lim, 10.010) == {K: 1}
    assert await b.reserve({K: 50}, lim, 10.050) == {K: 4}
    assert await b.reserve({K: 2}, lim, 20.0) == {K: 2}  # never more than wanted
    assert await b.reserve({K: 50}, lim, 20.0) == {K: 3}  # full again: the burst, no more


async def test_a_fractional_rate_refills_one_token_every_two_seconds() -> None:
    b = LocalKeyBuckets()
    lim = {K: KeyLimit(0.5, 1)}
    assert await b.reserve({K: 9}, lim, 0.0) == {K: 1}
    assert await b.reserve({K: 9}, lim, 1.999) == {K: 0}
    assert await b.reserve({K: 9}, lim, 2.0) == {K: 1}
    assert b.next_token_s(K, lim[K], 2.0) == 2.0
    assert b.next_token_s(K, lim[K], 3.5) == 0.5


async def test_refunds_come_back_up_to_the_cap_and_a_clock_step_back_refills_nothing() -> None:
    b = LocalKeyBuckets()
    lim = {K: KeyLimit(10.0, 4)}
    assert await b.reserve({K: 4}, lim, 5.0) == {K: 4}
    await b.refund({K: 3}, lim, 5.0)
    assert await b.reserve({K: 9}, lim, 4.0) == {K: 3}  # earlier clock: no refill
    await b.refund({K: 100}, lim, 5.0)
    assert await b.reserve({K: 9}, lim, 5.0) == {K: 4}  # refunds never pass the burst


async def test_no_window_gets_more_than_burst_plus_rate_times_its_length() -> None:
    """The bucket's bound, on a round every 7 ms for 3 s wanting everything."""
    b = LocalKeyBuckets()
    rate, burst = 100.0, 20
    lim = {K: KeyLimit(rate, burst)}
    grants: list[tuple[int, int]] = []
    for ms in range(0, 3000, 7):
        n = (await b.reserve({K: 1000}, lim, ms / 1000))[K]
        grants.append((ms, n))
    total = sum(n for _, n in grants)
    assert total == burst + int(rate * 2.996)  # the last round at 2,996 ms
    for start in range(0, 3000, 50):
        for length in (100, 500, 1000):
            got = sum(n for ms, n in grants if start <= ms <= start + length)
            assert got <= burst + rate * length / 1000


def test_bucket_math_and_limits() -> None:
    lim = KeyLimit(2.5, 3)
    assert (lim.per_ms, lim.cap) == (2500, 3 * MICRO)
    assert refill(0, 100, 50, lim) == (0, 100)  # a step back
    assert refill(0, 100, 500, lim) == (1_000_000, 500)
    assert refill(0, 0, 10_000, lim) == (3 * MICRO, 10_000)
    assert wait_s(MICRO, lim) == 0.0
    assert wait_s(0, lim) == 0.4
    with pytest.raises(ValueError, match="rate"):
        KeyLimit(0.0, 1)
    with pytest.raises(ValueError, match="burst"):
        KeyLimit(1.0, 0)


async def test_a_local_share_scales_rate_and_burst_and_starts_empty() -> None:
    b = LocalKeyBuckets(start_full=False, share=0.5)
    lim = {K: KeyLimit(100.0, 10)}
    assert await b.reserve({K: 100}, lim, 1.0) == {K: 0}
    assert await b.reserve({K: 100}, lim, 1.1) == {K: 5}  # 50/s, burst 5
