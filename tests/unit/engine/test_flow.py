"""The flow rules' per-round gate (issue 43): which lanes a rate limit key or a pause
holds, in what order tasks come out, and what the hold counts say (pure logic)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from scheduler.engine._flow import FlowRules
from scheduler.engine._ready import ReadyQueues
from scheduler.quota._key_buckets import KeyLimit
from scheduler.types import ALL_TENANTS, DispatchPause, Pool, Preloaded, TaskKey

T0 = datetime(2026, 1, 1, tzinfo=UTC)
A, B = uuid.uuid4(), uuid.uuid4()


def task(
    tenant: uuid.UUID, type_: str = "t", key: str = "", at: int = 0, pool: Pool = Pool.STANDARD
) -> Preloaded:
    due = T0 + timedelta(milliseconds=at)
    return Preloaded(TaskKey(uuid.uuid4(), due), due, tenant, 0, pool, type_, key)


def rules(now: list[float], limits: Any = None, pauses: Any = ()) -> FlowRules:
    f = FlowRules(None, 5.0, lambda: now[0])  # type: ignore[arg-type]
    f.limits = dict(limits or {})
    f.pauses = tuple(pauses)
    return f


async def _drain(rq: ReadyQueues, f: FlowRules, now: float, most: int = 1000) -> list[Preloaded]:
    """One round: the gate, then every task a worker of any type may take."""
    r = await f.gate(rq, most, now)
    out = []
    while True:
        p = rq.pop(Pool.STANDARD, None, None, veto=r.veto)
        if p is None:
            break
        r.took(p.tenant_id, p.rate_key)
        out.append(p)
    await f.keys.refund(r.unused(), f.limits, now)
    f.count_held(rq, r, now)
    f.prune(rq)
    return out


async def test_a_key_out_of_tokens_holds_only_its_own_lane_in_due_order() -> None:
    now = [100.0]
    f = rules(now, {(A, "api"): KeyLimit(10.0, 2)})
    rq = ReadyQueues(lambda _t: 1)
    keyed = [task(A, key="api", at=i) for i in range(6)]
    free = [task(A, at=i) for i in range(3)]
    other = [task(B, key="api", at=i) for i in range(2)]  # B's "api" has no limit
    rq.extend([*reversed(keyed), *free, *other])
    first = await _drain(rq, f, 100.0)
    assert [p for p in first if p.rate_key == "api" and p.tenant_id == A] == keyed[:2]
    assert {p.key for p in first} >= {p.key for p in free + other}
    assert len(rq) == 4
    assert f.held == {"rate_limited": 4, "paused": 0}
    assert f.held_total["rate_limited"] == 4
    r = await f.gate(rq, 1000, 100.0)
    assert r.veto is not None
    assert r.veto(Pool.STANDARD, A, "t", "api")
    f.count_held(rq, r, 100.0)
    assert r.retry_s == 0.1  # one token at 10/s
    # 0.25 s later: two more tokens, the next two due.
    assert await _drain(rq, f, 100.25) == keyed[2:4]
    assert await _drain(rq, f, 100.45) == keyed[4:6]
    assert len(rq) == 0
    assert f.held == {"rate_limited": 0, "paused": 0}


async def test_the_round_reserves_at_most_its_room_and_gives_back_what_it_did_not_use() -> None:
    now = [0.0]
    f = rules(now, {(A, "api"): KeyLimit(100.0, 50)})
    rq = ReadyQueues(lambda _t: 1)
    rq.extend(task(A, key="api", at=i) for i in range(100))
    r = await f.gate(rq, 8, 0.0)
    assert r.wanted == {(A, "api"): 8}
    assert r.grants == {(A, "api"): 8}
    for _ in range(3):
        p = rq.pop(Pool.STANDARD, None, None, veto=r.veto)
        assert p is not None
        r.took(p.tenant_id, p.rate_key)
    assert r.unused() == {(A, "api"): 5}
    await f.keys.refund(r.unused(), f.limits, 0.0)
    r2 = await f.gate(rq, 1000, 0.0)
    assert r2.grants == {(A, "api"): 47}  # 50 - 3 used


async def test_pauses_hold_a_type_a_pool_or_every_tenant_and_release_in_due_order() -> None:
    now = [0.0]
    pause = DispatchPause(tenant_id=A, task_type="report", pool=None, paused_at=T0)
    f = rules(now, pauses=[pause])
    rq = ReadyQueues(lambda _t: 1)
    held = [task(A, "report", at=i) for i in (3, 1, 2)]
    rq.extend([*held, task(A, "mail"), task(B, "report")])
    out = await _drain(rq, f, 0.0)
    assert sorted((p.tenant_id == A, p.type) for p in out) == [(False, "report"), (True, "mail")]
    assert f.held == {"rate_limited": 0, "paused": 3}
    f.pauses = ()
    assert [p.due_at for p in await _drain(rq, f, 1.0)] == sorted(p.due_at for p in held)

    bulk = DispatchPause(tenant_id=ALL_TENANTS, task_type="", pool=Pool.BULK, paused_at=T0)
    f.pauses = (bulk,)
    rq.extend([task(A, pool=Pool.BULK), task(B, pool=Pool.BULK), task(B)])
    r = await f.gate(rq, 100, 2.0)
    assert rq.pop(Pool.BULK, None, None, veto=r.veto) is None
    assert rq.pop(Pool.STANDARD, None, None, veto=r.veto) is not None
    assert f.paused(B, "x", Pool.BULK)
    assert not f.paused(B, "x", Pool.CRITICAL)


async def test_a_pause_holds_before_a_key_spends_a_token() -> None:
    """A paused lane with a rate limit key: its grant is left unused and goes back."""
    now = [0.0]
    pause = DispatchPause(tenant_id=A, task_type="t", pool=None, paused_at=T0)
    f = rules(now, {(A, "api"): KeyLimit(1.0, 3)}, [pause])
    rq = ReadyQueues(lambda _t: 1)
    rq.extend(task(A, key="api", at=i) for i in range(3))
    assert await _drain(rq, f, 0.0) == []
    assert f.held == {"rate_limited": 0, "paused": 3}
    f.pauses = ()
    assert len(await _drain(rq, f, 0.0)) == 3  # all three tokens were given back


async def test_with_no_rule_the_gate_is_off() -> None:
    f = rules([0.0])
    rq = ReadyQueues(lambda _t: 1)
    rq.extend([task(A, key="api")])
    r = await f.gate(rq, 10, 0.0)
    assert r.veto is None
    assert r.grants == {}
    assert not f.active


async def test_a_held_lanes_wait_counts_as_its_cause() -> None:
    now = [50.0]
    pause = DispatchPause(tenant_id=A, task_type="t", pool=None, paused_at=T0)
    f = rules(now, pauses=[pause])
    rq = ReadyQueues(lambda _t: 1)
    rq.extend([task(A)])
    await _drain(rq, f, 50.0)
    now[0] = 53.5
    hold = f.hold_of(A, "t", Pool.STANDARD, "", 10.0)
    assert hold == ("paused", 3.5)  # from the hold's start, not the (older) due time
    assert f.hold_of(B, "t", Pool.STANDARD, "", 10.0) is None
    # Resumed: the task goes out, its wait counted as a hold; then the lane is forgotten.
    f.pauses = ()
    assert len(await _drain(rq, f, 54.0)) == 1
    assert f.since == {}
    assert f.hold_of(A, "t", Pool.STANDARD, "", 10.0) is None
