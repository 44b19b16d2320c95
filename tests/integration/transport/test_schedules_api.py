"""Schedules and expectations over gRPC: the client, validation of every field, tenant
isolation, the CLI, and one run over PostgreSQL."""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import grpc
import pytest
from click.testing import CliRunner
from google.protobuf import struct_pb2

from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from scheduler._proto.tickwheel.v1 import tickwheel_pb2_grpc as pbg
from scheduler.cli import main
from scheduler.client import (
    AlreadyExists,
    Client,
    InvalidArgument,
    NotFound,
    OverlapPolicy,
    Pool,
    TaskState,
)
from tests.integration.transport.conftest import Stack, eventually


async def test_create_get_list_pause_resume_delete(client: Client) -> None:
    s = await client.create_schedule(
        "nightly",
        "report",
        {"kind": "daily"},
        cron="30 2 * * *",
        timezone="Europe/Berlin",
        pool=Pool.BULK,
        max_retries=5,
        timeout_s=60,
        overlap_policy=OverlapPolicy.BUFFER_ONE,
        catchup_window_s=0,
        jitter_s=30,
    )
    assert (s.name, s.cron, s.interval_s, s.timezone) == (
        "nightly",
        "30 2 * * *",
        None,
        "Europe/Berlin",
    )
    assert (s.task_type, s.payload, s.pool, s.max_retries, s.timeout_s) == (
        "report",
        {"kind": "daily"},
        Pool.BULK,
        5,
        60,
    )
    assert (s.overlap_policy, s.catchup_window_s, s.jitter_s, s.paused) == (
        OverlapPolicy.BUFFER_ONE,
        0,
        30,
        False,
    )
    assert s.next_fire_at is not None
    assert s.next_fire_at > datetime.now(UTC)
    # 02:30 in Berlin is 00:30 or 01:30 UTC.
    assert (s.next_fire_at.hour, s.next_fire_at.minute) in ((0, 30), (1, 30))
    every = await client.create_schedule("every-minute", "report", interval_s=60)
    assert every.cron is None
    assert every.interval_s == 60
    assert every.catchup_window_s == 60
    assert every.overlap_policy is OverlapPolicy.SKIP
    assert every.max_retries == 3
    assert (await client.get_schedule(s.id)) == s
    assert [x.name for x in await client.list_schedules()] == ["every-minute", "nightly"]

    paused = await client.pause_schedule(s.id)
    assert paused.paused
    assert (await client.get_schedule(s.id)).paused
    resumed = await client.resume_schedule(s.id)
    assert not resumed.paused
    assert resumed.next_fire_at is not None
    assert resumed.next_fire_at > datetime.now(UTC)

    await client.delete_schedule(s.id)
    with pytest.raises(NotFound):
        await client.get_schedule(s.id)
    assert [x.name for x in await client.list_schedules()] == ["every-minute"]


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        ({"cron": "0 * * * *"}, 120.0),  # hourly: the whole window
        ({"cron": "* * * * *"}, 6.0),  # minutely: a tenth of the minute
        ({"cron": "0 9 * * 1-5"}, 120.0),  # weekdays: the window
        ({"interval_s": 10}, 1.0),
        ({"interval_s": 1}, 0.1),
    ],
)
async def test_a_schedule_without_jitter_gets_a_tenth_of_its_period(
    client: Client, kind: dict[str, Any], expected: float
) -> None:
    """Issue 19: the stampede smoothing holds for schedule occurrences by default (it
    was 0 unless asked), and never reaches into the next occurrence."""
    s = await client.create_schedule(f"default-{expected}-{sorted(kind)}", "t", {}, **kind)
    assert s.jitter_s == expected
    explicit = await client.create_schedule(f"zero-{expected}", "t", {}, jitter_s=0, **kind)
    assert explicit.jitter_s == 0


async def test_created_paused_and_duplicate_name(client: Client) -> None:
    s = await client.create_schedule("quiet", "report", interval_s=5, paused=True, max_retries=0)
    assert s.paused
    assert s.max_retries == 0
    with pytest.raises(AlreadyExists):
        await client.create_schedule("quiet", "report", interval_s=5)


async def test_an_interval_schedule_fires_tasks(stack: Stack, client: Client) -> None:
    s = await client.create_schedule(
        "tick", "tick", {"n": 1}, interval_s=1, overlap_policy=OverlapPolicy.ALLOW
    )

    async def fired() -> list[Any]:
        return [t async for t in client.list(type="tick")]

    tasks = await eventually(fired, lambda ts: len(ts) >= 2)
    assert all(
        t.payload == {"n": 1} and t.idempotency_key.startswith(f"sched:{s.id}:") for t in tasks
    )
    assert all(t.state in (TaskState.PRELOADED, TaskState.SCHEDULED) for t in tasks)
    got = await eventually(lambda: client.get_schedule(s.id), lambda x: x.last_fired_at is not None)
    assert got.last_fired_at is not None
    # Paused: a schedule pass creates nothing for it.
    await client.pause_schedule(s.id)
    assert await stack.engine.schedules.run_once() == 0


async def test_expectations_register_replace_and_list(client: Client) -> None:
    s = await client.create_schedule("ledger", "ledger-task", interval_s=60)
    by_schedule = await client.register_expectation(
        schedule_id=s.id, interval_s=60, tolerance_s=30, max_runtime_s=600
    )
    assert (by_schedule.job_id, by_schedule.schedule_id) == ("ledger", s.id)
    assert (by_schedule.interval_s, by_schedule.tolerance_s, by_schedule.max_runtime_s) == (
        60,
        30,
        600,
    )
    by_type = await client.register_expectation("backup", interval_s=3600, tolerance_s=0)
    assert by_type.schedule_id is None
    assert by_type.max_runtime_s is None
    assert by_type.tolerance_s == 0
    replaced = await client.register_expectation("backup", interval_s=7200, tolerance_s=60)
    assert replaced.id == by_type.id
    assert replaced.interval_s == 7200
    listed = await client.list_expectations()
    assert [(e.job_id, e.interval_s) for e in listed] == [("backup", 7200), ("ledger", 60)]
    assert all(e.created_at is not None for e in listed)
    with pytest.raises(NotFound):
        await client.register_expectation(
            schedule_id="0190d6c4-0000-7000-8000-000000000000", interval_s=60, tolerance_s=0
        )


async def test_tenants_never_see_each_others_schedules_or_expectations(
    stack: Stack, client: Client
) -> None:
    mine = await client.create_schedule("shared-name", "report", interval_s=60)
    await client.register_expectation("report", interval_s=60, tolerance_s=0)
    other = await stack.client(stack.key_b)
    try:
        for call in (
            other.get_schedule,
            other.pause_schedule,
            other.resume_schedule,
            other.delete_schedule,
        ):
            with pytest.raises(NotFound):
                await call(mine.id)
        with pytest.raises(NotFound):
            await other.register_expectation(schedule_id=mine.id, interval_s=60, tolerance_s=0)
        assert await other.list_schedules() == []
        assert await other.list_expectations() == []
        # Names are per tenant: the other tenant may use the same one.
        theirs = await other.create_schedule("shared-name", "report", interval_s=60)
        assert str(theirs.tenant_id) == stack.tenant_b
        with pytest.raises(NotFound):
            await client.get_schedule(theirs.id)
    finally:
        await other.close()
    still = await client.get_schedule(mine.id)
    assert not still.paused
    assert still.updated_at == mine.updated_at
    assert [s.id for s in await client.list_schedules()] == [mine.id]


# -- every field: bad input is INVALID_ARGUMENT naming it -----------------------------

GOOD_ID = "0190d6c4-0000-7000-8000-000000000000"


def _big_payload() -> struct_pb2.Struct:
    s = struct_pb2.Struct()
    s.update({"blob": "x" * (1 << 20)})
    return s


def _sched(**kw: Any) -> pb.CreateScheduleRequest:
    return pb.CreateScheduleRequest(
        schedule=pb.ScheduleSpec(**{"name": "n", "task_type": "t", "cron": "* * * * *", **kw})
    )


def _every(**kw: Any) -> pb.CreateScheduleRequest:
    return _sched(**{"cron": "", "interval_s": 60, **kw})


def _expect(**kw: Any) -> pb.RegisterExpectationRequest:
    return pb.RegisterExpectationRequest(**{"job_id": "j", "interval_s": 60, **kw})


CASES: list[tuple[str, Callable[[], Any], str]] = [
    ("CreateSchedule", lambda: pb.CreateScheduleRequest(), "schedule"),
    ("CreateSchedule", lambda: _sched(name=""), "schedule.name"),
    ("CreateSchedule", lambda: _sched(name="   "), "schedule.name"),
    ("CreateSchedule", lambda: _sched(name="n" * 129), "schedule.name"),
    ("CreateSchedule", lambda: _sched(task_type=""), "schedule.task_type"),
    ("CreateSchedule", lambda: _sched(task_type="a b"), "schedule.task_type"),
    ("CreateSchedule", lambda: _sched(task_type="t" * 65), "schedule.task_type"),
    ("CreateSchedule", lambda: _sched(payload=_big_payload()), "schedule.payload"),
    ("CreateSchedule", lambda: _sched(cron=""), "schedule.cron"),
    ("CreateSchedule", lambda: _sched(interval_s=60), "schedule.cron"),
    ("CreateSchedule", lambda: _sched(cron="61 * * * *"), "schedule.cron"),
    ("CreateSchedule", lambda: _sched(cron="* * * *"), "schedule.cron"),
    ("CreateSchedule", lambda: _sched(cron="@hourly"), "schedule.cron"),
    ("CreateSchedule", lambda: _sched(cron="0 0 31 2 *"), "schedule.cron"),
    ("CreateSchedule", lambda: _sched(cron="* " * 100), "schedule.cron"),
    ("CreateSchedule", lambda: _every(interval_s=0.5), "schedule.interval_s"),
    ("CreateSchedule", lambda: _every(interval_s=-5), "schedule.interval_s"),
    ("CreateSchedule", lambda: _every(interval_s=math.nan), "schedule.interval_s"),
    ("CreateSchedule", lambda: _every(interval_s=math.inf), "schedule.interval_s"),
    ("CreateSchedule", lambda: _every(interval_s=1e12), "schedule.interval_s"),
    ("CreateSchedule", lambda: _sched(timezone="Mars/Olympus_Mons"), "schedule.timezone"),
    ("CreateSchedule", lambda: _sched(timezone="America"), "schedule.timezone"),
    ("CreateSchedule", lambda: _sched(timezone="../../etc/passwd"), "schedule.timezone"),
    ("CreateSchedule", lambda: _sched(timezone="z" * 65), "schedule.timezone"),
    ("CreateSchedule", lambda: _sched(pool=42), "schedule.pool"),
    ("CreateSchedule", lambda: _sched(max_retries=100_000), "schedule.max_retries"),
    ("CreateSchedule", lambda: _sched(max_retries=500), "schedule.max_retries"),
    ("CreateSchedule", lambda: _sched(max_retries=2, no_retries=True), "schedule.max_retries"),
    ("CreateSchedule", lambda: _sched(timeout_s=-1), "schedule.timeout_s"),
    ("CreateSchedule", lambda: _sched(timeout_s=math.nan), "schedule.timeout_s"),
    ("CreateSchedule", lambda: _sched(overlap_policy=9), "schedule.overlap_policy"),
    ("CreateSchedule", lambda: _sched(catchup_window_s=-1), "schedule.catchup_window_s"),
    ("CreateSchedule", lambda: _sched(catchup_window_s=math.nan), "schedule.catchup_window_s"),
    ("CreateSchedule", lambda: _sched(catchup_window_s=1e12), "schedule.catchup_window_s"),
    ("CreateSchedule", lambda: _sched(jitter_s=-1), "schedule.jitter_s"),
    ("CreateSchedule", lambda: _sched(jitter_s=3601), "schedule.jitter_s"),
    ("CreateSchedule", lambda: _sched(jitter_s=math.nan), "schedule.jitter_s"),
    ("GetSchedule", lambda: pb.GetScheduleRequest(), "schedule_id"),
    ("GetSchedule", lambda: pb.GetScheduleRequest(schedule_id="nope"), "schedule_id"),
    ("PauseSchedule", lambda: pb.PauseScheduleRequest(schedule_id="nope"), "schedule_id"),
    ("ResumeSchedule", lambda: pb.ResumeScheduleRequest(schedule_id=""), "schedule_id"),
    ("DeleteSchedule", lambda: pb.DeleteScheduleRequest(schedule_id="x"), "schedule_id"),
    ("RegisterExpectation", lambda: _expect(job_id=""), "job_id"),
    ("RegisterExpectation", lambda: _expect(job_id="   "), "job_id"),
    ("RegisterExpectation", lambda: _expect(job_id="j" * 129), "job_id"),
    ("RegisterExpectation", lambda: _expect(schedule_id="not-a-uuid"), "schedule_id"),
    ("RegisterExpectation", lambda: _expect(interval_s=0), "interval_s"),
    ("RegisterExpectation", lambda: _expect(interval_s=4_000_000_000), "interval_s"),
    ("RegisterExpectation", lambda: _expect(tolerance_s=4_000_000_000), "tolerance_s"),
    ("RegisterExpectation", lambda: _expect(max_runtime_s=4_000_000_000), "max_runtime_s"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("method", "make", "field"), CASES, ids=[f"{c[0]}-{c[2]}-{i}" for i, c in enumerate(CASES)]
)
async def test_bad_field_is_invalid_argument(
    stack: Stack, method: str, make: Callable[[], Any], field: str
) -> None:
    async with grpc.aio.insecure_channel(
        stack.target, options=[("grpc.max_send_message_length", 64 << 20)]
    ) as channel:
        stub: Any = pbg.SchedulerServiceStub(channel)  # type: ignore[no-untyped-call]
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await getattr(stub, method)(make(), metadata=(("x-api-key", stack.key_a),), timeout=30)
    assert info.value.code() is grpc.StatusCode.INVALID_ARGUMENT, info.value.details()
    assert (info.value.details() or "").startswith(f"{field}:"), info.value.details()


async def test_client_gets_invalid_argument_typed(client: Client) -> None:
    with pytest.raises(InvalidArgument) as info:
        await client.create_schedule("n", "t", cron="0 0 * * *", timezone="Nowhere/City")
    assert info.value.field == "schedule.timezone"


# -- CLI ------------------------------------------------------------------------------


async def _invoke(*args: str) -> Any:
    return await asyncio.to_thread(CliRunner().invoke, main, list(args), catch_exceptions=False)


async def _cli(*args: str) -> Any:
    result = await _invoke(*args)
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


async def test_cli_schedules_and_expectations(stack: Stack) -> None:
    auth = ("--target", stack.target, "--api-key", stack.key_a, "--json")
    s = await _cli(
        "schedules", "create", "nightly", "--type", "report", "--payload", '{"a": 1}',
        "--cron", "0 30 2 * * *", "--timezone", "America/New_York", "--overlap", "buffer_one",
        "--jitter-s", "10", "--catchup-window-s", "120", "--max-retries", "2", *auth,
    )  # fmt: skip
    assert (s["cron"], s["timezone"], s["overlap_policy"]) == (
        "0 30 2 * * *",
        "America/New_York",
        "buffer_one",
    )
    assert (s["payload"], s["jitter_s"], s["catchup_window_s"], s["max_retries"]) == (
        {"a": 1},
        10,
        120,
        2,
    )
    assert (await _cli("schedules", "get", s["id"], *auth))["name"] == "nightly"
    assert (await _cli("schedules", "get", "nightly", *auth))["id"] == s["id"]  # by name
    assert [x["name"] for x in await _cli("schedules", "list", *auth)] == ["nightly"]
    assert (await _cli("schedules", "pause", "nightly", *auth))["paused"] is True
    assert (await _cli("schedules", "resume", s["id"], *auth))["paused"] is False
    e = await _cli(
        "expectations",
        "register",
        "--schedule",
        "nightly",
        "--interval-s",
        "86400",
        "--tolerance-s",
        "600",
        *auth,
    )
    assert (e["job_id"], e["schedule_id"], e["tolerance_s"]) == ("nightly", s["id"], 600)
    e2 = await _cli(
        "expectations",
        "register",
        "backup",
        "--interval-s",
        "3600",
        "--max-runtime-s",
        "900",
        *auth,
    )
    assert (e2["job_id"], e2["schedule_id"], e2["tolerance_s"], e2["max_runtime_s"]) == (
        "backup",
        None,
        300,
        900,
    )
    assert [x["job_id"] for x in await _cli("expectations", "list", *auth)] == ["backup", "nightly"]
    assert (await _cli("schedules", "delete", "nightly", *auth))["deleted"] is True
    assert await _cli("schedules", "list", *auth) == []
    # Human output and errors.
    plain = ("--target", stack.target, "--api-key", stack.key_a)
    created = await _invoke(
        "schedules", "create", "every", "--type", "t", "--interval-s", "30", *plain
    )
    assert created.exit_code == 0
    assert "every" in created.output
    listed = await _invoke("schedules", "list", *plain)
    assert listed.exit_code == 0
    assert "every 30 s" in listed.output
    missing = await _invoke("schedules", "get", "no-such-schedule", *plain)
    assert missing.exit_code == 1
    assert "Error: schedule no-such-schedule not found" in missing.output
    both = await _invoke(
        "schedules",
        "create",
        "x",
        "--type",
        "t",
        "--interval-s",
        "30",
        "--cron",
        "* * * * *",
        *plain,
    )
    assert both.exit_code == 2
    bad = await _invoke("schedules", "create", "x", "--type", "t", "--cron", "0 0 31 2 *", *plain)
    assert bad.exit_code == 1
    assert "schedule.cron" in bad.output


# -- PostgreSQL -----------------------------------------------------------------------


async def test_schedule_api_over_postgres(pg_stack: Stack) -> None:
    client = await pg_stack.client()
    other = await pg_stack.client(pg_stack.key_b)
    try:
        s = await client.create_schedule(
            "pg",
            "report",
            cron="*/10 * * * * *",
            timezone="Asia/Kolkata",
            overlap_policy=OverlapPolicy.ALLOW,
        )
        assert s.next_fire_at is not None
        assert s.next_fire_at.second % 10 == 0
        assert s.next_fire_at - datetime.now(UTC) <= timedelta(seconds=11)
        assert (await client.pause_schedule(s.id)).paused
        assert not (await client.resume_schedule(s.id)).paused
        e = await client.register_expectation(
            schedule_id=s.id, interval_s=10, tolerance_s=5, max_runtime_s=30
        )
        assert (e.job_id, e.max_runtime_s) == ("pg", 30)
        with pytest.raises(NotFound):
            await other.get_schedule(s.id)
        with pytest.raises(NotFound):
            await other.register_expectation(schedule_id=s.id, interval_s=10, tolerance_s=5)
        assert await other.list_expectations() == []
        with pytest.raises(AlreadyExists):
            await client.create_schedule("pg", "report", interval_s=5)
        with pytest.raises(InvalidArgument) as info:
            await client.create_schedule("pg2", "report", interval_s=5, jitter_s=-1)
        assert info.value.field == "schedule.jitter_s"
        await client.delete_schedule(s.id)
        assert await client.list_schedules() == []
    finally:
        await client.close()
        await other.close()
