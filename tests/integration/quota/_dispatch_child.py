"""A stand-in scheduler node: dispatch one tenant's tasks as fast as its quota allows.

``python -m tests.integration.quota._dispatch_child URL PREFIX TENANT RATE START_AT SECONDS``
waits until the wall-clock ``START_AT``, then for ``SECONDS`` asks for 20 units per call
(the finished ones are reported at once, so only the rate binds) and prints one JSON
line: units granted inside the window, and whether Redis served every call.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
import uuid

from scheduler.quota import QuotaConfig, RedisQuota, TenantLimits, open_quota


async def main(url: str, prefix: str, tenant: str, rate: int, start_at: float, secs: float) -> None:
    gate = await open_quota(QuotaConfig(redis_url=url, key_prefix=prefix))
    assert isinstance(gate, RedisQuota)
    t = uuid.UUID(tenant)
    limits = {t: TenantLimits(rate_limit_rps=rate, max_concurrent=1_000_000)}
    granted = calls = 0
    always_shared = True
    try:
        # 10 ms of margin: the loop's monotonic clock may wake a hair before the wall clock.
        await asyncio.sleep(max(0.0, start_at - time.time()) + 0.01)
        while (now := time.time()) < start_at + secs:
            got = (await gate.reserve({t: 20}, limits, now))[t]
            always_shared &= gate.shared
            granted += got
            calls += 1
            if got:
                await gate.finished({t: got})
            await asyncio.sleep(0.001)
    finally:
        await gate.close()
    print(json.dumps({"granted": granted, "calls": calls, "shared": always_shared}))


if __name__ == "__main__":
    url, prefix, tenant, rate, start_at, secs = sys.argv[1:7]
    asyncio.run(main(url, prefix, tenant, int(rate), float(start_at), float(secs)))
