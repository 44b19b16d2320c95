"""Issue 40 against a live node, through the real ``tickwheel`` command: ``--at`` with a
bare time of day (item 1), expectations with their status (item 4), and whole ids from
``schedules list``, ``workflows submit/get`` and ``expectations list`` when piped, or with
``--wide`` (item 7); cancelling a cancelled task, a second tenant of one name, and
``history``'s dispatch row beside its due time (item 10)."""

from __future__ import annotations

import asyncio
import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from scheduler.client import TaskState
from scheduler.worker import TaskContext, Worker
from tests.integration.transport.conftest import ADMIN_TOKEN, Stack
from tests.support.processes import run_cli, run_cli_result
from tests.support.waiting import eventually

UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


async def _cli(stack: Stack, *args: str) -> str:
    """A command's stdout; its stdout is a pipe, not a terminal."""
    auth = ("--target", stack.target, "--api-key", stack.key_a)
    return await asyncio.to_thread(run_cli, [*args, *auth])


def _column(out: str, name: str) -> list[str]:
    """The values of column ``name`` in plain aligned output (header first)."""
    lines = [ln for ln in out.splitlines() if ln.strip()]
    head = lines.index(next(ln for ln in lines if name in ln.split()))
    at = lines[head].split().index(name)
    return [ln.split()[at] for ln in lines[head + 1 :]]


async def test_submit_at_a_bare_time_of_day_runs_at_its_next_occurrence(stack: Stack) -> None:
    target = (datetime.now(UTC) + timedelta(hours=2)).replace(microsecond=0)
    out = await _cli(stack, "submit", "hello", "--at", target.strftime("%H:%M:%S"), "--json")
    task = json.loads(out)
    assert datetime.fromisoformat(task["scheduled_at"]) == target
    past = (datetime.now(UTC) - timedelta(hours=2)).replace(microsecond=0)
    out = await _cli(stack, "submit", "hello", "--at", past.strftime("%H:%M:%S"), "--json")
    assert datetime.fromisoformat(json.loads(out)["scheduled_at"]) == past + timedelta(days=1)


async def test_expectations_show_status_and_deadline(stack: Stack) -> None:
    await _cli(stack, "expectations", "register", "nightly", "--interval-s", "3600")
    (doc,) = json.loads(await _cli(stack, "expectations", "list", "--json"))
    assert doc["status"] == "ok"  # registered and not yet due
    assert doc["last_completed_at"] is None
    created = datetime.fromisoformat(doc["created_at"])
    assert datetime.fromisoformat(doc["deadline_at"]) == created + timedelta(seconds=3600 + 300)
    client = await stack.client()
    try:
        (info,) = await client.list_expectations()
    finally:
        await client.close()
    assert info.status == "ok"
    assert info.deadline_at == created + timedelta(seconds=3600 + 300)
    human = await _cli(stack, "expectations", "list")
    assert _column(human, "status") == ["ok"]
    assert _column(human, "id") == [doc["id"]]  # whole when piped
    assert _column(human, "deadline_at") == [
        datetime.fromisoformat(doc["deadline_at"]).isoformat(timespec="seconds")
    ]


async def test_ids_are_whole_when_piped_and_with_wide(stack: Stack, tmp_path: Path) -> None:
    created = json.loads(
        await _cli(stack, "schedules", "create", "a-long-schedule-name", "--type", "t",
                   "--interval-s", "3600", "--json")
    )  # fmt: skip
    for extra in ((), ("--wide",)):
        out = await _cli(stack, "schedules", "list", *extra)
        assert _column(out, "id") == [created["id"]]
        assert "…" not in out
    path = tmp_path / "wf.json"
    later = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
    path.write_text(json.dumps({"name": "etl", "nodes": [{"id": "a", "type": "t",
                                                          "scheduled_at": later}]}))  # fmt: skip
    submitted = await _cli(stack, "workflows", "submit", str(path))
    (task_id,) = _column(submitted, "task_id")
    assert UUID.match(task_id)
    wf_id = submitted.split()[1]
    assert UUID.match(wf_id)
    for extra in ((), ("--wide",)):
        got = await _cli(stack, "workflows", "get", wf_id, *extra)
        assert _column(got, "task_id") == [task_id]
        assert "…" not in got
    await _cli(stack, "expectations", "register", "nightly", "--interval-s", "3600")
    out = await _cli(stack, "expectations", "list", "--wide")
    assert all(UUID.match(v) for v in _column(out, "id"))


async def test_cancelling_a_cancelled_task_says_it_is_already_cancelled(stack: Stack) -> None:
    task = json.loads(await _cli(stack, "submit", "t", "--in", "3600", "--json"))
    await _cli(stack, "cancel", task["id"])
    auth = ("--target", stack.target, "--api-key", stack.key_a)
    again = await asyncio.to_thread(run_cli_result, ["cancel", task["id"], *auth])
    assert again.returncode == 1
    assert again.stderr.splitlines() == [f"Error: task {task['id']} is already CANCELLED"]


async def test_a_second_tenant_of_the_same_name_is_refused(stack: Stack) -> None:
    """Issue 40: `tenants create acme` twice made two tenants named acme."""
    admin = ("--target", stack.target, "--admin-token", ADMIN_TOKEN)
    first = json.loads(
        await asyncio.to_thread(run_cli, ["tenants", "create", "acme", "--json", *admin])
    )
    again = await asyncio.to_thread(run_cli_result, ["tenants", "create", "acme", *admin])
    assert again.returncode == 1
    assert again.stderr.splitlines() == ["Error: tenant named 'acme' already exists"]
    listed = json.loads(await asyncio.to_thread(run_cli, ["tenants", "list", "--json", *admin]))
    assert [t["id"] for t in listed if t["name"] == "acme"] == [first["id"]]


async def test_history_says_a_dispatch_committed_ahead_of_due_ran_on_time(stack: Stack) -> None:
    """Issue 40: the DISPATCHED row's time is the commit's, a few tens of ms before the
    due time (the dispatch lead), which read as a task started early; the row now says
    its due time and how far ahead (or late) the commit was."""

    async def hello(ctx: TaskContext) -> dict[str, Any]:
        return {}

    worker = Worker(stack.target, api_key=stack.key_a, handlers={"hello": hello}, slots=2)
    run = asyncio.create_task(worker.run(), name="history-worker")
    try:
        task = json.loads(await _cli(stack, "submit", "hello", "--in", "1", "--strict", "--json"))
        client = await stack.client()
        try:
            await eventually(
                lambda: client.get(task["id"]), until=lambda t: t.state is TaskState.COMPLETED
            )
            (dispatch,) = [
                t for t in await client.history(task["id"]) if t.to_state is TaskState.DISPATCHED
            ]
        finally:
            await client.close()
    finally:
        await worker.shutdown(grace_s=1)
        await asyncio.wait_for(run, 15)
    due = datetime.fromisoformat(task["due_at"])
    assert dispatch.due_at == due
    ahead_ms = round((due - dispatch.at).total_seconds() * 1000)
    lines = (await _cli(stack, "history", task["id"])).splitlines()
    (row,) = [ln for ln in lines[1:] if ln.split()[2] == "DISPATCHED"]
    note = f"dispatched; due {due.strftime('%H:%M:%S.%f')[:-3]}: "
    assert note in row, row
    if ahead_ms > 0:
        assert (
            f"committed {ahead_ms} ms ahead (the dispatch lead), pushed to the worker at due"
            in (row)
        )
    else:
        assert ("dispatched on time" if ahead_ms == 0 else f"{-ahead_ms} ms late") in row
    doc = json.loads(await _cli(stack, "history", task["id"], "--json"))
    (row_json,) = [t for t in doc if t["to_state"] == "DISPATCHED"]
    assert datetime.fromisoformat(row_json["due_at"]) == due


async def test_bulk_cancel_without_an_answer_is_one_error_line(stack: Stack) -> None:
    """Found by the CLI fuzzer: without a terminal (stdin closed, as in a script) and
    without --yes, bulk-cancel printed click's bare "Aborted!"; now one Error line, and
    nothing is cancelled."""
    task = json.loads(await _cli(stack, "submit", "t", "--in", "3600", "--json"))
    auth = ("--target", stack.target, "--api-key", stack.key_a)
    result = await asyncio.to_thread(run_cli_result, ["bulk-cancel", *auth])
    assert result.returncode == 1
    errors = [ln for ln in result.stderr.splitlines() if ln.startswith("Error:")]
    assert errors == ["Error: no answer, so none cancelled; --yes cancels them without asking"]
    assert "Aborted" not in result.stdout + result.stderr
    assert json.loads(await _cli(stack, "get", task["id"], "--json"))["state"] != "CANCELLED"


async def test_cancelling_a_finished_task_says_it_finished(stack: Stack) -> None:
    """Found walking the README: cancelling a COMPLETED task said "illegal transition
    COMPLETED -> CANCELLED"."""

    async def hello(ctx: TaskContext) -> dict[str, Any]:
        return {}

    worker = Worker(stack.target, api_key=stack.key_a, handlers={"hello": hello}, slots=2)
    run = asyncio.create_task(worker.run(), name="cancel-finished-worker")
    try:
        task = json.loads(await _cli(stack, "submit", "hello", "--strict", "--json"))
        client = await stack.client()
        try:
            await eventually(
                lambda: client.get(task["id"]), until=lambda t: t.state is TaskState.COMPLETED
            )
        finally:
            await client.close()
    finally:
        await worker.shutdown(grace_s=1)
        await asyncio.wait_for(run, 15)
    auth = ("--target", stack.target, "--api-key", stack.key_a)
    result = await asyncio.to_thread(run_cli_result, ["cancel", task["id"], *auth])
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        f"Error: task {task['id']} is already COMPLETED: a finished task cannot be cancelled"
    ]
