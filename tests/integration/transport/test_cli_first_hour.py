"""Issue 19, items 7 and 8 against a live node on each store: ``tickwheel list`` newest
first with sort, limit, page token and a line saying more exist; whole ids when piped;
the right column names; no ``created`` outside a submit; the effective due time; and a
task's history through GetTaskHistory."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from scheduler.cli import main
from scheduler.client import NotFound, TaskOrder, TaskSpec, TaskState
from tests.integration.transport.conftest import Stack, running_stack


@pytest.fixture(params=["sqlite", "postgres"])
async def any_stack(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Stack]:
    url = (
        f"sqlite:///{tmp_path}/t.db"
        if request.param == "sqlite"
        else request.getfixturevalue("pg_dsn")
    )
    async with running_stack(url) as s:
        yield s


async def _invoke(*args: str, input: str | None = None) -> Result:
    return await asyncio.to_thread(
        CliRunner().invoke, main, list(args), input=input, catch_exceptions=False
    )


async def _ok(*args: str) -> Result:
    result = await _invoke(*args)
    assert result.exit_code == 0, result.output
    return result


def _auth(stack: Stack) -> tuple[str, ...]:
    return ("--target", stack.target, "--api-key", stack.key_a)


async def _five(stack: Stack) -> list[str]:
    """Five tasks submitted in this order; the later ones are scheduled earlier."""
    client = await stack.client()
    try:
        base = datetime.now(UTC) + timedelta(hours=5)
        ids = []
        for i in range(5):
            (task,) = await client.submit_many(
                [
                    TaskSpec(
                        type="t",
                        payload={"i": i},
                        scheduled_at=base - timedelta(minutes=i),
                        strict_timing=True,
                    )
                ]
            )
            ids.append(str(task.id))
        return ids
    finally:
        await client.close()


def _ids(result: Result) -> list[str]:
    return [t["id"] for t in json.loads(result.stdout)]


async def test_list_is_newest_first_and_sorts_both_ways(any_stack: Stack) -> None:
    ids = await _five(any_stack)
    auth = _auth(any_stack)
    assert _ids(await _ok("list", *auth, "--json")) == ids[::-1]
    created_asc = await _ok("list", *auth, "--json", "--sort", "created", "--order", "asc")
    assert _ids(created_asc) == ids
    # Scheduled: the last submitted is scheduled earliest.
    scheduled_asc = await _ok("list", *auth, "--json", "--sort", "scheduled", "--order", "asc")
    assert _ids(scheduled_asc) == ids[::-1]
    scheduled_desc = await _ok("list", *auth, "--json", "--sort", "scheduled")
    assert _ids(scheduled_desc) == ids


@pytest.mark.parametrize(("sort", "order"), [("created", "desc"), ("scheduled", "asc")])
async def test_list_says_more_exist_and_the_token_continues(
    any_stack: Stack, sort: str, order: str
) -> None:
    ids = await _five(any_stack)
    auth = (*_auth(any_stack), "--json", "--sort", sort, "--order", order)
    whole = _ids(await _ok("list", *auth))
    assert sorted(whole) == sorted(ids)
    first = await _ok("list", *auth, "--limit", "2")
    assert _ids(first) == whole[:2]
    (line,) = [ln for ln in first.stderr.splitlines() if "more tasks exist" in ln]
    token = line.split("--page-token ")[1].split()[0]
    second = await _ok("list", *auth, "--limit", "2", "--page-token", token)
    assert _ids(second) == whole[2:4]
    last_token = (
        next(ln for ln in second.stderr.splitlines() if "more tasks exist" in ln)
        .split("--page-token ")[1]
        .split()[0]
    )
    third = await _ok("list", *auth, "--limit", "2", "--page-token", last_token)
    assert _ids(third) == whole[4:]
    assert "more tasks exist" not in third.stderr  # the end says nothing
    exact = await _ok("list", *auth, "--limit", "5")
    assert "more tasks exist" not in exact.stderr


async def test_list_prints_whole_ids_when_piped_and_names_its_columns(stack: Stack) -> None:
    ids = await _five(stack)
    result = await _ok("list", *_auth(stack))  # CliRunner's stdout is not a terminal
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["id", "type", "state", "due_at", "retries", "worker"]
    assert "attempts" not in result.stdout
    assert [ln.split()[0] for ln in lines[1:]] == ids[::-1]  # whole, newest first
    assert all(ln.split()[4] == "0/3" for ln in lines[1:])  # failed of those allowed


async def test_get_list_and_redrive_never_print_created(stack: Stack) -> None:
    auth = _auth(stack)
    submitted = json.loads((await _ok("submit", "t", "--in", "3600", *auth, "--json")).stdout)
    assert submitted["created"] is True  # a submit's own answer says it
    again = await _ok("submit", "t", "--in", "3600", "--idempotency-key", "k", *auth, "--json")
    repeat = await _ok("submit", "t", "--in", "3600", "--idempotency-key", "k", *auth)
    assert json.loads(again.stdout)["created"] is True
    assert "existing task" in repeat.stdout
    got = json.loads((await _ok("get", submitted["id"], *auth, "--json")).stdout)
    assert "created" not in got
    listed = json.loads((await _ok("list", *auth, "--json")).stdout)
    assert all("created" not in t for t in listed)
    human = (await _ok("get", submitted["id"], *auth)).stdout
    assert "created " not in human.replace("created_at", "")
    assert "due_at (effective)" in human
    assert submitted["due_at"][:19] in human.replace(" ", "T")
    cancelled = await _ok("cancel", submitted["id"], *auth)
    assert "created " not in cancelled.stdout.replace("created_at", "")


async def test_history_shows_every_transition(any_stack: Stack) -> None:
    auth = _auth(any_stack)
    task = json.loads((await _ok("submit", "t", "--in", "3600", *auth, "--json")).stdout)
    await _ok("cancel", task["id"], *auth)
    rows = json.loads((await _ok("history", task["id"], *auth, "--json")).stdout)
    assert [(r["from_state"], r["to_state"]) for r in rows][-1][1] == "CANCELLED"
    assert all(r["actor"] for r in rows)
    assert all(isinstance(r["fencing_token"], int) for r in rows)
    human = (await _ok("history", task["id"], *auth)).stdout.splitlines()
    assert human[0].split() == ["at", "from", "to", "token", "epoch", "actor", "reason"]
    assert human[-1].split()[2] == "CANCELLED"
    assert human[-1].split()[-1] == "cancelled"
    assert rows[-1]["reason"] == "cancelled"
    client = await any_stack.client()
    try:
        history = await client.history(task["id"])
        assert history[-1].to_state is TaskState.CANCELLED
        assert [t.at for t in history] == sorted(t.at for t in history)
    finally:
        await client.close()


async def test_history_of_another_tenants_task_is_not_found(stack: Stack) -> None:
    theirs = await stack.client(stack.key_b)
    try:
        task = await theirs.submit("t", {}, scheduled_at=datetime.now(UTC) + timedelta(hours=1))
    finally:
        await theirs.close()
    mine = await stack.client()
    try:
        with pytest.raises(NotFound):
            await mine.history(task.id)
        with pytest.raises(NotFound):
            await mine.history(uuid.uuid4())
    finally:
        await mine.close()
    result = await _invoke("history", str(task.id), *_auth(stack))
    assert result.exit_code == 1
    (line,) = result.stderr.splitlines()
    assert line.startswith("Error: ")
    assert "not found" in line
    assert "Traceback" not in result.output


async def test_a_client_error_is_one_line_without_a_class_name(stack: Stack) -> None:
    result = await _invoke("get", "not-a-uuid", *_auth(stack))
    assert result.exit_code == 1
    (line,) = result.stderr.splitlines()
    assert line.startswith("Error: task_id"), line
    assert "InvalidArgument" not in result.stderr


async def test_the_client_orders_pages(stack: Stack) -> None:
    ids = await _five(stack)
    client = await stack.client()
    try:
        got: list[Any] = [
            str(t.id) async for t in client.list(order=TaskOrder.CREATED_DESC, page_size=2)
        ]
    finally:
        await client.close()
    assert got == ids[::-1]


async def test_workflows_list_and_cancel_and_expectations_delete(
    any_stack: Stack, tmp_path: Path
) -> None:
    auth = _auth(any_stack)
    later = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
    doc = {
        "name": "etl",
        "nodes": [
            {"id": "a", "type": "t", "scheduled_at": later},
            {"id": "b", "type": "t", "depends_on": ["a"]},
        ],
    }
    path = tmp_path / "wf.json"
    path.write_text(json.dumps(doc))
    first = json.loads((await _ok("workflows", "submit", str(path), *auth, "--json")).stdout)
    second = json.loads((await _ok("workflows", "submit", str(path), *auth, "--json")).stdout)
    listed = json.loads((await _ok("workflows", "list", *auth, "--json")).stdout)
    assert [w["id"] for w in listed] == [second["id"], first["id"]]  # newest first
    assert listed[0]["node_count"] == 2
    human = (await _ok("workflows", "list", *auth)).stdout.splitlines()
    assert human[0].split()[:3] == ["id", "name", "nodes"]
    assert human[1].split()[0] == second["id"]
    out = json.loads((await _ok("workflows", "cancel", first["id"], *auth, "--json")).stdout)
    assert out["cancelled"] == 2
    states = {n: t["state"] for n, t in out["workflow"]["nodes"].items()}
    assert states == {"a": "CANCELLED", "b": "CANCELLED"}
    again = json.loads((await _ok("workflows", "cancel", first["id"], *auth, "--json")).stdout)
    assert again["cancelled"] == 0  # nothing left to cancel
    missing = await _invoke("workflows", "cancel", str(uuid.uuid4()), *auth)
    assert missing.exit_code == 1
    assert "not found" in missing.stderr

    await _ok("expectations", "register", "nightly", "--interval-s", "3600", *auth)
    await _ok("expectations", "delete", "nightly", *auth)
    assert json.loads((await _ok("expectations", "list", *auth, "--json")).stdout) == []
    gone = await _invoke("expectations", "delete", "nightly", *auth)
    assert gone.exit_code == 1
    (line,) = gone.stderr.splitlines()
    assert line == "Error: expectation nightly not found"


async def test_bulk_cancel_shows_the_count_and_asks(any_stack: Stack) -> None:
    auth = _auth(any_stack)
    for _ in range(3):
        await _ok("submit", "nightly", "--in", "3600", *auth)
    await _ok("submit", "other", "--in", "3600", *auth)
    # No confirmation: nothing is done.
    declined = await _invoke("bulk-cancel", "--type", "nightly", *auth, input="n\n")
    assert declined.exit_code == 0, declined.output
    assert "3 task(s) to cancel" in declined.output
    assert "nothing done" in declined.output
    done = json.loads(
        (await _ok("bulk-cancel", "--type", "nightly", "--yes", "--json", *auth)).stdout
    )
    assert done["plan"]["count"] == 3
    assert (done["result"]["matched"], done["result"]["changed"]) == (3, 3)
    again = await _ok("bulk-cancel", "--type", "nightly", "--yes", *auth)
    assert "0 task(s) to cancel" in again.output
    nothing = await _ok("bulk-redrive", "--yes", *auth)
    assert "0 task(s) to redrive (states DEAD_LETTER)" in nothing.output
