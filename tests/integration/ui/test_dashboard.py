"""The dashboard against a real embedded node: every page answers 200 and shows the
API's figures, actions change tasks through the API, POSTs need the CSRF token, the
session cookie is HttpOnly and SameSite=Strict, and a tenant key sees nothing of
another tenant."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta

from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from scheduler._proto.tickwheel.v1 import tickwheel_pb2_grpc as pbg
from scheduler.client import Pool, TaskSpec, TaskState
from scheduler.client._channel import open_channel
from scheduler.ui._app import login_path
from scheduler.ui._sessions import COOKIE
from tests.integration.ui.conftest import Dashboard, Page

LATER = timedelta(hours=2)


async def _api_counts(d: Dashboard) -> pb.CountTasksResponse:
    channel = open_channel(d.env.target, None)
    try:
        stub = pbg.SchedulerServiceStub(channel)
        return await stub.CountTasks(
            pb.CountTasksRequest(), metadata=(("x-api-key", d.env.api_key),)
        )
    finally:
        await channel.close()


async def test_overview_shows_the_counts_the_api_answers(dashboard: Dashboard) -> None:
    d = dashboard
    at = datetime.now(UTC) + LATER
    await d.env.client.submit_many(
        [TaskSpec(type="ui.a", payload={"i": i}, scheduled_at=at) for i in range(3)]
        + [TaskSpec(type="ui.b", payload={}, scheduled_at=at, pool=Pool.CRITICAL)]
    )
    task = await d.env.client.submit("ui.c", {}, scheduled_at=at)
    await d.env.client.cancel(task.id)
    await d.other.submit("ui.other", {}, scheduled_at=at)  # another tenant's: not counted
    page = await d.get("/")
    assert page.status == 200
    api = await _api_counts(d)
    by_state: dict[str, int] = {}
    for c in api.counts:
        name = pb.TaskState.Name(c.state).removeprefix("TASK_STATE_")
        by_state[name] = by_state.get(name, 0) + c.count
    assert api.total == 5
    assert int(page.text("count-total")) == api.total
    for state in ("SCHEDULED", "PRELOADED", "CANCELLED", "COMPLETED", "DEAD_LETTER"):
        assert int(page.text(f"count-{state}")) == by_state.get(state, 0), state
    assert int(page.text("count-CANCELLED")) == 1
    assert int(page.text("pool-CRITICAL-count")) == 1
    assert int(page.text("pool-STANDARD-count")) == 4
    assert page.has("activity-chart")
    assert page.has("forecast-chart")
    assert page.has("workers-table")
    live = await d.http.get("/api/overview")
    assert live.status == 200
    body = await live.json()
    assert body["counts"]["data"]["total"] == 5
    assert body["counts"]["data"]["by_state"]["CANCELLED"] == 1


async def test_tasks_list_filters_paginates_and_searches(dashboard: Dashboard) -> None:
    d = dashboard
    at = datetime.now(UTC) + LATER
    tasks = await d.env.client.submit_many(
        [TaskSpec(type="ui.list", payload={"i": i}, scheduled_at=at) for i in range(55)]
    )
    keyed = await d.env.client.submit("ui.keyed", {}, scheduled_at=at, idempotency_key="order-77")
    page = await d.get("/tasks?type=ui.list")
    assert page.status == 200
    shown = {t.id for t in tasks if page.has(f"task-row-{t.id}")}
    assert len(shown) == 50  # one page
    assert not page.has(f"task-row-{keyed.id}")
    nxt = page.all("next-page")[0]["href"]
    second = await d.get(nxt)
    assert second.status == 200
    rest = {t.id for t in tasks if second.has(f"task-row-{t.id}")}
    assert len(rest) == 5
    assert not (rest & shown)
    assert not second.has("next-page")
    # Search: a task id opens it, an idempotency key opens its task.
    by_id = await d.get(f"/tasks?q={tasks[0].id}")
    assert by_id.url.endswith(f"/tasks/{tasks[0].id}")
    assert by_id.text("task-type") == "ui.list"
    by_key = await d.get("/tasks?q=order-77")
    assert by_key.url.endswith(f"/tasks/{keyed.id}")
    missing = await d.get("/tasks?q=no-such-key")
    assert missing.status == 200
    assert "No task matches" in missing.html
    bad = await d.get("/tasks?state=NOPE")
    assert bad.status == 400
    assert "state:" in bad.text("tasks-error")


async def test_task_detail_shows_payload_escaped_and_the_timeline(dashboard: Dashboard) -> None:
    d = dashboard
    task = await d.env.client.submit(
        "ui.detail",
        {"name": "<script>alert(1)</script>", "n": 3},
        scheduled_at=datetime.now(UTC) + LATER,
        trace_context={"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
    )
    page = await d.get(f"/tasks/{task.id}")
    assert page.status == 200
    assert "<script>alert(1)</script>" not in page.html
    assert json.loads(page.text("task-payload")) == {"name": "<script>alert(1)</script>", "n": 3}
    assert '"n": 3,' in page.text("task-payload")  # as submitted, not 3.0
    assert page.text("task-state") == task.state.name
    assert page.text("task-type") == "ui.detail"
    assert page.text("task-pool") == "STANDARD"
    assert page.text("task-result") == "null"
    assert page.text("task-trace-id") == "4bf92f3577b34da6a3ce929d0e0e4736"
    assert int(page.text("task-fencing-token")) == task.fencing_token
    assert page.text("task-attempts") == "0"
    assert page.has("task-timeline")
    history = await d.env.client.history(task.id)
    assert len(page.all("transition")) == len(history)
    assert page.has("cancel")
    assert not page.has("redrive")
    assert (await d.get("/tasks/not-a-uuid")).status == 404
    assert (await d.get("/tasks/01a23d04-4f44-7000-94ed-de9338bac640")).status == 404


async def test_cancel_needs_csrf_and_changes_the_state(dashboard: Dashboard) -> None:
    d = dashboard
    task = await d.env.client.submit("ui.cancel", {}, scheduled_at=datetime.now(UTC) + LATER)
    page = await d.get(f"/tasks/{task.id}")
    refused = await d.post(f"/tasks/{task.id}/cancel", {})
    assert refused.status == 403
    wrong = await d.post(f"/tasks/{task.id}/cancel", {"csrf": "x" + page.csrf})
    assert wrong.status == 403
    assert (await d.env.client.get(task.id)).state is not TaskState.CANCELLED
    resp = await d.http.post(
        f"/tasks/{task.id}/cancel", data={"csrf": page.csrf}, allow_redirects=False
    )
    assert resp.status == 303
    assert resp.headers["Location"] == f"/tasks/{task.id}"
    assert (await d.env.client.get(task.id)).state is TaskState.CANCELLED
    after = await d.get(f"/tasks/{task.id}")
    assert after.text("task-state") == "CANCELLED"
    assert not after.has("cancel")
    for path in ("/logout", "/login", "/bulk/plan", "/bulk/run"):
        assert (await d.post(path, {})).status == 403, path


async def test_the_session_cookie_is_httponly_and_strict(dashboard: Dashboard) -> None:
    http = dashboard.http
    http.session.cookie_jar.clear()
    resp = await http.get("/login")
    assert "Content-Security-Policy" in resp.headers
    form = re.search(r'name="csrf" value="([^"]+)"', await resp.text())
    assert form
    token = (login_path(http.server.app) or "").partition("#token=")[2]
    resp = await http.post(
        "/login", data={"csrf": form.group(1), "link_token": token}, allow_redirects=False
    )
    assert resp.status == 303
    cookie = resp.cookies[COOKIE]
    assert cookie["httponly"]
    assert cookie["samesite"] == "Strict"
    # The credentials never reach the browser.
    assert dashboard.env.api_key not in await resp.text()
    assert dashboard.env.admin_token not in (await dashboard.get("/")).html


async def _login(d: Dashboard, **fields: str) -> Page:
    form = await d.get("/login")
    return await d.post("/login", {"csrf": form.csrf, **fields})


async def test_a_tenant_key_sees_only_its_tenant(dashboard: Dashboard) -> None:
    d = dashboard
    at = datetime.now(UTC) + LATER
    mine = await d.env.client.submit("ui.mine", {"secret": "tenant-a"}, scheduled_at=at)
    theirs = await d.other.submit("ui.theirs", {"secret": "tenant-b"}, scheduled_at=at)
    bad = await _login(d, api_key="tw_not_a_key")
    assert bad.status == 401
    assert bad.has("login-error")
    page = await _login(d, api_key=d.other_key)
    assert page.status == 200
    assert page.url.endswith("/")
    assert int(page.text("count-total")) == 1
    assert (await d.get(f"/tasks/{mine.id}")).status == 404
    assert (await d.http.get(f"/api/tasks/{mine.id}")).status == 404
    listing = await d.get("/tasks")
    assert listing.has(f"task-row-{theirs.id}")
    assert not listing.has(f"task-row-{mine.id}")
    assert "tenant-a" not in listing.html
    # The tenant parameter is the admin's; a key's session ignores it.
    picked = await d.get(f"/tasks?tenant={d.env.tenant_id}")
    assert not picked.has(f"task-row-{mine.id}")
    assert (await d.get(f"/tasks/{theirs.id}")).text("task-type") == "ui.theirs"
    bye = await d.get("/")
    await d.post("/logout", {"csrf": bye.csrf})
    # Logged out: no credentials at all (never the start-up ones), the login page.
    after = await d.get(f"/tasks/{mine.id}")
    assert after.url.endswith("/login")
    assert after.has("login-form")
    assert "tenant-a" not in after.html


async def test_the_admin_token_picks_a_tenant(dashboard: Dashboard) -> None:
    d = dashboard
    at = datetime.now(UTC) + LATER
    await d.env.client.submit("ui.a", {}, scheduled_at=at)
    theirs = await d.other.submit("ui.b", {}, scheduled_at=at)
    page = await _login(d, admin_token=d.env.admin_token)
    assert page.status == 200
    assert page.has("tenant-picker")
    assert str(d.other_tenant) in page.html
    assert int(page.text("count-total")) == 2  # every tenant
    one = await d.get(f"/?tenant={d.other_tenant}")
    assert int(one.text("count-total")) == 1
    listing = await d.get(f"/tasks?tenant={d.other_tenant}")
    assert listing.has(f"task-row-{theirs.id}")
    detail = await d.get(f"/tasks/{theirs.id}?tenant={d.other_tenant}")
    assert detail.text("task-type") == "ui.b"
    wrong = await d.get(f"/tasks/{theirs.id}?tenant={d.env.tenant_id}")
    assert wrong.status == 404
    assert (await d.get("/?tenant=nope")).status == 400


async def test_the_admins_all_tenants_view_of_one_tenant_pages_is_a_picker(
    dashboard: Dashboard,
) -> None:
    d = dashboard
    await _login(d, admin_token=d.env.admin_token)
    for path in ("/tasks?state=SCHEDULED", "/schedules", "/workflows", "/expectations"):
        page = await d.get(path)
        assert page.status == 200, path
        assert page.has("pick-tenant"), path
        assert "INVALID_ARGUMENT" not in page.html
        choice = page.all(f"tenant-choice-{d.other_tenant}")
        assert choice, path
        assert "ui-b" in page.html
    listing = await d.get("/tasks?state=SCHEDULED")
    assert f"/tasks?state=SCHEDULED&amp;tenant={d.other_tenant}" in listing.html
    api = await d.http.get("/api/tasks")
    assert api.status == 400
    assert "tenant" in (await api.json())["error"]


async def test_schedules_workflows_expectations_and_forecast_pages(dashboard: Dashboard) -> None:
    d = dashboard
    client = d.env.client
    sched = await client.create_schedule("nightly", "ui.nightly", {}, cron="0 3 * * *")
    await client.register_expectation("nightly", interval_s=86_400, tolerance_s=600)
    flow = await client.submit_workflow(
        {
            "extract": TaskSpec(type="ui.e", payload={}),
            "transform": TaskSpec(type="ui.t", payload={}),
            "load": TaskSpec(type="ui.l", payload={}),
        },
        [("extract", "transform"), ("transform", "load")],
        name="etl",
    )
    at = (datetime.now(UTC) + timedelta(minutes=10)).replace(second=0, microsecond=0)
    await client.submit_many(
        [TaskSpec(type="ui.f", payload={}, scheduled_at=at, strict_timing=True) for _ in range(4)]
    )

    page = await d.get("/schedules")
    assert page.status == 200
    assert page.has("schedule-nightly")
    assert page.text("schedule-state") == "active"
    assert page.has("pause")
    resp = await d.http.post(
        f"/schedules/{sched.id}/pause", data={"csrf": page.csrf}, allow_redirects=False
    )
    assert resp.status == 303
    assert (await client.get_schedule(sched.id)).paused
    paused = await d.get("/schedules")
    assert paused.text("schedule-state") == "paused"
    assert paused.has("resume")

    flows = await d.get("/workflows")
    assert flows.status == 200
    assert flows.has(f"workflow-{flow.id}")
    graph = await d.get(f"/workflows/{flow.id}")
    assert graph.status == 200
    for node in ("extract", "transform", "load"):
        assert graph.has(f"dag-node-{node}")
    info = await client.get_workflow(flow.id)
    for node_id, node_task in info.nodes.items():
        cls = graph.all(f"dag-node-{node_id}")[0]["class"]
        assert node_task.state.name in cls.split()
    assert (await d.get(f"/workflows/{flow.tenant_id}")).status == 404

    ex = await d.get("/expectations")
    assert ex.status == 200
    assert ex.has("expectation-nightly")

    fc = await d.get("/forecast")
    assert fc.status == 200
    assert fc.has("forecast-chart")
    if not fc.has("not-available"):
        assert fc.has("forecast-table")
        assert sum(int(c["_text"]) for c in fc.all("forecast-STANDARD-firing")) >= 4
    assert (await d.get("/forecast?bucket=7")).status == 400
    assert (await d.get("/forecast?bucket=1")).status == 200


async def test_the_dashboard_needs_credentials_when_started_without(dashboard: Dashboard) -> None:
    from aiohttp.test_utils import TestClient, TestServer

    from scheduler.ui import UIConfig, create_app

    app = create_app(UIConfig(target=dashboard.env.target))
    async with TestClient(TestServer(app)) as http:
        resp = await http.get("/", allow_redirects=False)
        assert resp.status == 303
        assert resp.headers["Location"] == "/login"
        assert (await http.get("/api/overview")).status == 401
        form = await http.get("/login")
        assert form.status == 200


async def test_bulk_cancel_shows_the_servers_count_and_never_widens(dashboard: Dashboard) -> None:
    d = dashboard
    at = datetime.now(UTC) + LATER
    planned = await d.env.client.submit_many(
        [TaskSpec(type="ui.bulk", payload={}, scheduled_at=at) for _ in range(3)]
    )
    bystander = await d.env.client.submit("ui.keep", {}, scheduled_at=at)
    listing = await d.get("/tasks?type=ui.bulk")
    form = {"csrf": listing.csrf, "type": "ui.bulk", "action": "cancel"}
    resp = await d.http.post("/bulk/plan", data=form, allow_redirects=False)
    assert resp.status == 303
    confirm_url = resp.headers["Location"]
    assert confirm_url.startswith("/bulk/confirm/")
    confirm = await d.get(confirm_url)
    assert confirm.status == 200
    assert int(confirm.text("bulk-count")) == 3
    assert confirm.text("bulk-filter-type") == "ui.bulk"
    assert "SCHEDULED" in confirm.text("bulk-filter-states")
    # A task that arrives after the plan is not in it; a reload shows the same plan.
    late = await d.env.client.submit("ui.bulk", {}, scheduled_at=at)
    again = await d.get(confirm_url)
    assert int(again.text("bulk-count")) == 3
    token = again.all("bulk-run")  # the run form holds only the token and csrf
    assert token
    fields = dict(
        (m.group(1), m.group(2)) for m in re.finditer(r'name="(\w+)" value="([^"]*)"', again.html)
    )
    run = {"csrf": again.csrf, "plan_token": fields["plan_token"]}
    resp = await d.http.post("/bulk/run", data=run, allow_redirects=False)
    assert resp.status == 303
    assert resp.headers["Location"].startswith("/bulk/result/")
    result = await d.get(resp.headers["Location"])
    assert int(result.text("bulk-changed")) == 3
    for t in planned:
        assert (await d.env.client.get(t.id)).state is TaskState.CANCELLED
    assert (await d.env.client.get(late.id)).state is not TaskState.CANCELLED
    assert (await d.env.client.get(bystander.id)).state is not TaskState.CANCELLED
    # Posting the same token again runs nothing: the first result is shown.
    twice = await d.post("/bulk/run", run)
    assert int(twice.text("bulk-changed")) == 3
    assert (await d.env.client.get(late.id)).state is not TaskState.CANCELLED
    assert (await d.post("/bulk/run", {"csrf": again.csrf, "plan_token": "forged"})).status == 400
    assert (await d.get("/bulk/confirm/nope")).status == 404


async def test_the_timeline_shows_reasons_and_tokens(dashboard: Dashboard) -> None:
    d = dashboard
    task = await d.env.client.submit("ui.hist", {}, scheduled_at=datetime.now(UTC) + LATER)
    await d.env.client.cancel(task.id)
    page = await d.get(f"/tasks/{task.id}")
    rows = page.all("transition")
    history = await d.env.client.history(task.id)
    assert len(rows) == len(history) >= 1
    last = rows[-1]
    assert last["data-to"] == "CANCELLED"
    assert int(last["data-token"]) == history[-1].fencing_token
    assert last["data-actor"] == history[-1].actor


async def test_the_task_page_shows_its_concurrency_key(dashboard: Dashboard) -> None:
    d = dashboard
    at = datetime.now(UTC) + LATER
    keyed = await d.env.client.submit("ui.keyed", {}, scheduled_at=at, concurrency_key="acme")
    plain = await d.env.client.submit("ui.plain", {}, scheduled_at=at)
    page = await d.get(f"/tasks/{keyed.id}")
    assert page.status == 200
    assert page.text("task-concurrency-key") == "acme"
    other = await d.get(f"/tasks/{plain.id}")
    assert not other.has("task-concurrency-key")
