"""Delays mean what they say: through the public client, over the real engine."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from scheduler.client import Client, JitterMode


async def test_a_delayed_task_is_due_at_its_time_by_default(client: Client) -> None:
    """Fails on the old rule (every task jittered ±120 s unless strict)."""
    for delay_s in (5, 30, 600):
        for _ in range(20):
            when = datetime.now(UTC) + timedelta(seconds=delay_s)
            task = await client.submit("t", {}, scheduled_at=when)
            assert task.due_at >= task.scheduled_at, (delay_s, task.due_at - task.scheduled_at)
            assert task.due_at == task.scheduled_at
            got = await client.get(task.id)
            assert got.due_at == task.due_at


async def test_a_round_instant_is_late_only_and_symmetric_is_opt_in(client: Client) -> None:
    noon = (datetime.now(UTC) + timedelta(hours=2)).replace(minute=0, second=0, microsecond=0)
    late = [await client.submit("t", {}, scheduled_at=noon) for _ in range(40)]
    assert all(noon <= t.due_at <= noon + timedelta(seconds=120) for t in late)
    assert len({t.due_at for t in late}) > 30  # spread, not a pile
    sym = [
        await client.submit("t", {}, scheduled_at=noon, jitter_mode=JitterMode.SYMMETRIC)
        for _ in range(40)
    ]
    assert any(t.due_at < noon for t in sym)
    strict = await client.submit("t", {}, scheduled_at=noon, strict_timing=True)
    assert strict.due_at == noon
