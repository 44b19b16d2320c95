"""The dashboard in a real browser against a real ``tickwheel dev`` with real tasks.

Every figure a page shows is compared with what the gRPC API answers the test for the
same credentials (an RPC the server does not implement yet must show "not available"
on the page, never an error); every page passes axe-core with 0 violations.
"""

from __future__ import annotations

import contextlib
import json
import re
import secrets
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import TypeVar

import grpc
import pytest
from selenium.common.exceptions import NoAlertPresentException
from selenium.webdriver.common.by import By

from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from scheduler.client import SyncClient, TaskSpec
from scheduler.types import dispatch_note
from tests.browser._chrome import Browser
from tests.browser._devserver import (
    STATES,
    Api,
    DevProcess,
    Seeded,
    open_login_link,
    pool_name,
    state_name,
)

T = TypeVar("T")


def maybe(fn: Callable[[], T]) -> T | None:
    """``fn()``, or None when the server answers UNIMPLEMENTED (its RPC not merged)."""
    try:
        return fn()
    except grpc.RpcError as exc:
        if exc.code() == grpc.StatusCode.UNIMPLEMENTED:
            return None
        raise


def assert_not_available(browser: Browser) -> None:
    assert "not available" in browser.html.lower(), (
        f"{browser.driver.current_url}: an unimplemented RPC must show 'not available'"
    )


@pytest.fixture(autouse=True)
def _logged_in(browser: Browser, dev: DevProcess) -> None:
    """Every page test starts as a user who clicked ``dev``'s login link."""
    open_login_link(browser, dev)


def login(browser: Browser, dev: DevProcess, *, api_key: str = "", admin_token: str = "") -> None:
    """Log in through the /login form with an API key or the admin token."""
    browser.get(dev.ui_url + "login")
    if api_key:
        browser.by_testid("login-api-key").send_keys(api_key)
    if admin_token:
        browser.by_testid("login-admin-token").send_keys(admin_token)
    browser.click_and_wait(browser.by_testid("login-submit"))
    browser.wait_for(
        lambda: not browser.driver.current_url.endswith("/login"), what="the login to finish"
    )


def http_status(browser: Browser, url: str) -> int:
    """The HTTP status of a GET of ``url`` with the browser's session cookies (Selenium
    does not expose a page's status)."""
    cookies = "; ".join(f"{c['name']}={c['value']}" for c in browser.driver.get_cookies())
    request = urllib.request.Request(url, headers={"Cookie": cookies} if cookies else {})
    try:
        with urllib.request.urlopen(request, timeout=10) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


# --------------------------------------------------------------------------- overview


def test_overview_counts_pools_and_workers_equal_the_api(
    browser: Browser, dev: DevProcess, seeded: Seeded, api: Api
) -> None:
    browser.get(dev.ui_url)
    assert browser.title
    counted = maybe(api.counts)
    if counted is None:
        assert_not_available(browser)
    else:

        def page_and_api() -> tuple[dict[str, int], dict[str, int]]:
            by_state, total = api.counts()
            pools = api.pool_counts()
            shown = {s: browser.int_of(f"count-{s}") for s in STATES}
            shown["total"] = browser.int_of("count-total")
            shown |= {f"pool-{p}": browser.int_of(f"pool-{p}-count") for p in pools}
            return shown, {**by_state, "total": total} | {f"pool-{p}": n for p, n in pools.items()}

        # Equal at once unless something changed in between (a schedule's occurrence);
        # the page refreshes itself, so compare again until both agree.
        deadline = time.monotonic() + 10
        shown, expected = page_and_api()
        while shown != expected and time.monotonic() < deadline:
            time.sleep(0.5)
            shown, expected = page_and_api()
        assert shown == expected
        assert sum(v for k, v in expected.items() if k in STATES) == expected["total"]
    workers = maybe(api.workers)
    if workers is None:
        assert_not_available(browser)
    else:
        browser.by_testid("workers-table")
        assert {w.worker_id for w in workers} == {
            str(e.get_attribute("data-testid")).removeprefix("worker-")
            for e in browser.testid_prefix("worker-")
            if e.get_attribute("data-testid") != "workers-table"
        }
        assert seeded.ok_worker in {w.worker_id for w in workers}
    browser.by_testid("activity-chart")
    browser.by_testid("forecast-chart")
    if maybe(api.forecast) is not None:
        # The page asks for the hour from the current whole minute; the minute may turn
        # between its refresh and ours, so compare until both ask for the same window.
        browser.wait_for(
            lambda: (
                browser.int_of("forecast-total-firing")
                == sum(b.firing for b in api.forecast(60, buckets=60).buckets)
            ),
            timeout_s=10,
            what="forecast-total-firing to equal GetForecast's",
        )
    browser.assert_accessible()
    print(f"overview screenshot: {browser.screenshot('overview')}")


def test_overview_updates_live_without_reload(
    browser: Browser, dev: DevProcess, seeded: Seeded, api: Api
) -> None:
    browser.get(dev.ui_url)
    if maybe(api.counts) is None:
        assert_not_available(browser)
        return
    before = browser.int_of("count-total")
    browser.driver.execute_script("window.__tickwheelNoReload = 'still-here'")
    with SyncClient(dev.target, api_key=dev.api_key) as client:
        client.submit("report", {"n": "live"}, delay=timedelta(minutes=45))
    _, total = api.counts()
    assert total > before
    browser.wait_for(lambda: browser.int_of("count-total") == total, what="count-total to update")
    assert browser.driver.execute_script("return window.__tickwheelNoReload") == "still-here"


# --------------------------------------------------------------------------- tasks


def _row_ids(browser: Browser) -> set[str]:
    return {
        str(e.get_attribute("data-testid")).removeprefix("task-row-")
        for e in browser.testid_prefix("task-row-")
    }


def test_tasks_filter_by_state_lists_what_the_api_lists(
    browser: Browser, dev: DevProcess, seeded: Seeded, api: Api
) -> None:
    browser.get(dev.ui_url + "tasks?state=COMPLETED")
    browser.by_testid("tasks-table")
    resp = api.call(
        api.sched.ListTasks,
        pb.ListTasksRequest(states=[pb.TASK_STATE_COMPLETED], page_size=50),
    )
    assert _row_ids(browser) >= {t.id for t in resp.tasks}
    assert set(seeded.completed) <= _row_ids(browser)
    assert not set(seeded.future) & _row_ids(browser)
    browser.assert_accessible()


def test_tasks_filter_by_type_and_pool(
    browser: Browser, dev: DevProcess, seeded: Seeded, api: Api
) -> None:
    browser.get(dev.ui_url + "tasks?type=report&pool=CRITICAL")
    resp = api.call(
        api.sched.ListTasks,
        pb.ListTasksRequest(type="report", pools=[pb.POOL_CRITICAL], page_size=100),
    )
    expected = {t.id for t in resp.tasks}
    assert expected, "seeded CRITICAL report tasks"
    assert _row_ids(browser) == expected


def test_tasks_pages_through_a_filter_without_gaps_or_repeats(
    browser: Browser, dev: DevProcess, seeded: Seeded, api: Api
) -> None:
    kind = f"paged-{secrets.token_hex(3)}"
    with SyncClient(dev.target, api_key=dev.api_key) as client:
        submitted = {
            str(t.id)
            for t in client.submit_many(
                [TaskSpec(type=kind, payload={"n": i}, scheduled_at=_later(120)) for i in range(61)]
            )
        }
    browser.get(dev.ui_url + f"tasks?type={kind}")
    seen: list[str] = []
    for _ in range(5):
        seen += sorted(_row_ids(browser))
        nxt = browser.all_by_testid("next-page")
        if not nxt:
            break
        browser.click_and_wait(nxt[0])
    assert len(seen) == len(set(seen)) == 61
    assert set(seen) == submitted


def test_search_by_id_and_by_idempotency_key(
    browser: Browser, dev: DevProcess, seeded: Seeded
) -> None:
    target = seeded.completed[1]
    browser.get(dev.ui_url + f"tasks?q={target}")
    browser.wait_for(lambda: browser.driver.current_url.endswith(f"/tasks/{target}"))
    assert browser.text_of("task-state") == "COMPLETED"
    browser.get(dev.ui_url + "tasks")
    box = browser.by_testid("search")
    box.send_keys("done-2")
    box.submit()
    want = seeded.completed[2]
    browser.wait_for(
        lambda: browser.driver.current_url.endswith(f"/tasks/{want}") or want in _row_ids(browser),
        what="the task with idempotency key done-2",
    )


def test_task_detail_and_timeline_equal_the_api(
    browser: Browser, dev: DevProcess, seeded: Seeded, api: Api
) -> None:
    task_id = seeded.completed[0]
    task = api.task(task_id)
    browser.get(dev.ui_url + f"tasks/{task_id}")
    assert browser.text_of("task-state") == state_name(task.state) == "COMPLETED"
    assert browser.text_of("task-type") == task.type
    assert browser.text_of("task-pool") == pool_name(task.pool)
    assert str(task.fencing_token) in browser.text_of("task-fencing-token")
    with SyncClient(dev.target, api_key=dev.api_key) as client:
        seen = client.get(task_id)
    assert json.loads(browser.text_of("task-payload")) == seen.payload
    assert json.loads(browser.text_of("task-result")) == seen.result
    assert json.loads(browser.text_of("task-checkpoint")) == seen.checkpoint
    assert seen.checkpoint == {"step": 1, "n": 0}
    browser.by_testid("task-attempts")
    browser.by_testid("task-trace-id")
    browser.by_testid("task-last-error")
    history = api.history(task_id)
    timeline = browser.by_testid("task-timeline")
    rows = timeline.find_elements(By.CSS_SELECTOR, '[data-testid="transition"]')
    assert len(rows) == len(history.transitions)
    for row, tr in zip(rows, history.transitions, strict=True):
        shown = {
            k: row.find_element(By.CSS_SELECTOR, f'[data-testid="transition-{k}"]').text.strip()
            for k in ("to", "token", "epoch", "actor", "reason")
        }
        assert shown == {
            "to": state_name(tr.to_state),
            "token": str(tr.fencing_token),
            "epoch": str(tr.shard_epoch),
            "actor": tr.actor,
            # The API's reason, and beside a dispatch its due time (issue 40).
            "reason": "; ".join(
                part
                for part in (
                    tr.reason,
                    dispatch_note(
                        tr.at.ToDatetime(tzinfo=UTC),
                        tr.due_at.ToDatetime(tzinfo=UTC) if tr.HasField("due_at") else None,
                    ),
                )
                if part
            ),
        }
        if tr.from_state:
            assert row.get_attribute("data-from") == state_name(tr.from_state)
    # The zombie's write the seed made with an old token: refused, and on the timeline.
    refused = timeline.find_elements(By.CSS_SELECTOR, '[data-testid="refused-write"]')
    assert len(history.refused_writes) >= 1
    assert len(refused) == len(history.refused_writes)
    for row, rw in zip(refused, history.refused_writes, strict=True):
        assert str(rw.fencing_token) in row.text, row.text
        assert rw.write in row.text, row.text
    browser.assert_accessible()
    print(f"task timeline screenshot: {browser.screenshot('task-timeline')}")


def test_dead_letter_detail_shows_the_last_error(
    browser: Browser, dev: DevProcess, seeded: Seeded, api: Api
) -> None:
    task_id = seeded.dead[1]
    browser.get(dev.ui_url + f"tasks/{task_id}")
    assert browser.text_of("task-state") == "DEAD_LETTER"
    assert "boom" in browser.text_of("task-last-error")
    assert api.task(task_id).last_error in browser.html


def test_cancel_a_scheduled_task(
    browser: Browser, dev: DevProcess, seeded: Seeded, api: Api
) -> None:
    task_id = seeded.cancel_me
    assert api.state(task_id) in {"SCHEDULED", "PRELOADED"}
    browser.get(dev.ui_url + f"tasks/{task_id}")
    browser.click_and_wait(browser.by_testid("cancel"))
    browser.wait_for(
        lambda: (
            browser.driver.current_url.rstrip("/").endswith(f"/tasks/{task_id}")
            and browser.text_of("task-state") == "CANCELLED"
        ),
        what="the page to show CANCELLED",
    )
    assert api.state(task_id) == "CANCELLED"


def test_redrive_a_dead_lettered_task(
    browser: Browser, dev: DevProcess, seeded: Seeded, api: Api
) -> None:
    task_id = seeded.redrive_me
    assert api.state(task_id) == "DEAD_LETTER"
    browser.get(dev.ui_url + f"tasks/{task_id}")
    browser.click_and_wait(browser.by_testid("redrive"))
    browser.wait_for(
        lambda: browser.text_of("task-state") in {"SCHEDULED", "PRELOADED"},
        what="the page to show the redriven task due again",
    )
    assert api.state(task_id) in {"SCHEDULED", "PRELOADED"}
    assert browser.text_of("task-state") == api.state(task_id)


# --------------------------------------------------------------------------- bulk


def test_bulk_cancel_shows_the_server_count_and_never_widens(
    browser: Browser, dev: DevProcess, seeded: Seeded, api: Api
) -> None:
    kind = f"bulk-victim-{secrets.token_hex(3)}"
    with SyncClient(dev.target, api_key=dev.api_key) as client:
        client.submit_many(
            [TaskSpec(type=kind, payload={"n": i}, scheduled_at=_later(40)) for i in range(5)]
        )
    untouched_before = {t: api.state(t) for t in seeded.future[:6]}
    task_filter = pb.TaskFilter(type=kind)
    plan = maybe(
        lambda: api.call(
            api.sched.PlanBulkAction,
            pb.PlanBulkActionRequest(action=pb.BULK_ACTION_CANCEL, filter=task_filter),
        )
    )
    browser.get(dev.ui_url + f"tasks?type={kind}")
    browser.click_and_wait(browser.by_testid("bulk-cancel"))
    if plan is None:
        browser.wait_for(lambda: "not available" in browser.html.lower())
        return
    assert plan.count == 5
    browser.wait_for(lambda: browser.has_testid("bulk-count"), what="the confirm page")
    assert browser.int_of("bulk-count") == plan.count
    assert kind in browser.text_of("bulk-filter")
    browser.assert_accessible()
    form = browser.driver.find_element(By.CSS_SELECTOR, "form:has(input[name=plan_token])")
    names = {
        str(i.get_attribute("name"))
        for i in form.find_elements(By.CSS_SELECTOR, "input, select, textarea")
        if i.get_attribute("name")
    }
    assert names == {"plan_token", "csrf"}, f"the confirm form carries only the plan: {names}"

    # A reload of the confirm page shows the same plan: same count, same narrow filter.
    _reload(browser)
    assert browser.int_of("bulk-count") == 5
    assert kind in browser.text_of("bulk-filter")

    browser.click_and_wait(
        browser.driver.find_element(
            By.CSS_SELECTOR, "form:has(input[name=plan_token]) [type=submit]"
        )
    )
    browser.wait_for(lambda: browser.has_testid("bulk-changed"), what="the result page")
    changed = browser.int_of("bulk-changed")
    by_state, _ = api.counts(task_filter)
    assert changed == by_state["CANCELLED"] == 5
    assert {t: api.state(t) for t in untouched_before} == untouched_before

    # A task of the same type submitted after the run: reloading the result page
    # must not run the action again (or on anything new).
    with SyncClient(dev.target, api_key=dev.api_key) as client:
        late = str(client.submit(kind, {"n": "late"}, scheduled_at=_later(40)).id)
    _reload(browser)
    assert api.state(late) in {"SCHEDULED", "PRELOADED"}
    by_state, total = api.counts(task_filter)
    assert by_state["CANCELLED"] == 5
    assert total == 6


def _later(minutes: int) -> datetime:
    return datetime.now(UTC) + timedelta(minutes=minutes)


def _reload(browser: Browser) -> None:
    """Reload as a person would (accepting a resubmit prompt if the page was a POST)."""
    browser.driver.refresh()
    with contextlib.suppress(NoAlertPresentException):
        browser.driver.switch_to.alert.accept()
    browser.wait_for(
        lambda: browser.driver.execute_script("return document.readyState") == "complete"
    )


# --------------------------------------------------------------------------- tenants


def test_a_tenant_key_cannot_open_another_tenants_task(
    browser: Browser, dev: DevProcess, seeded: Seeded
) -> None:
    other = seeded.other_task_id
    # Logged in with the dev tenant's API key only (dev's default credentials also
    # carry the admin token, whose tenant picker lists every tenant by design).
    login(browser, dev, api_key=dev.api_key)
    assert not browser.has_testid("tenant-picker")
    assert http_status(browser, dev.ui_url + f"tasks/{other}") == 404
    browser.get(dev.ui_url + f"tasks/{other}")
    assert "not found" in browser.html.lower()
    assert not browser.has_testid("task-state")
    # The other tenant's data: its payload, tenant id, task id, type and idempotency key
    # (a value the request itself carried, such as a searched id, may be echoed back).
    leaks = (
        seeded.other_secret,
        seeded.other_tenant_id,
        other,
        f"{seeded.other_marker}-type",
        f"{seeded.other_marker}-key",
    )
    pages = [
        "",
        "tasks",
        f"tasks?q={other}",
        f"tasks?q={seeded.other_marker}-key",
        f"tasks?type={seeded.other_marker}-type",
        "schedules",
        "workflows",
        "expectations",
        "forecast",
        "api/overview",
    ]
    for page in pages:
        browser.get(dev.ui_url + page)
        html = browser.html
        for leak in leaks:
            if leak in page:
                continue
            assert leak not in html, f"{page or '/'} shows the other tenant's {leak}"

    # Logged in as the other tenant: its own task opens, the dev tenant's does not.
    login(browser, dev, api_key=seeded.other_api_key)
    browser.get(dev.ui_url + f"tasks/{other}")
    assert browser.text_of("task-type") == f"{seeded.other_marker}-type"
    browser.get(dev.ui_url + f"tasks/{seeded.completed[0]}")
    assert "not found" in browser.html.lower()
    assert not browser.has_testid("task-state")


# --------------------------------------------------------------------------- the rest


def test_schedules_page_and_pause_resume(
    browser: Browser, dev: DevProcess, seeded: Seeded, api: Api
) -> None:
    browser.get(dev.ui_url + "schedules")
    row = browser.by_testid(f"schedule-{seeded.schedule_name}")
    (schedule,) = [s for s in api.schedules() if s.name == seeded.schedule_name]
    assert schedule.task_type in row.text
    shown_times = [
        str(t.get_attribute("datetime"))[:19]
        for t in row.find_elements(By.CSS_SELECTOR, '[data-testid="schedule-next"] time')
    ]
    expected = [u.ToDatetime().isoformat()[:19] for u in schedule.upcoming_fire_at] or [
        schedule.next_fire_at.ToDatetime().isoformat()[:19]
    ]
    assert shown_times == expected
    row.find_element(By.CSS_SELECTOR, '[data-testid="pause"]').click()
    browser.wait_for(
        lambda: browser.by_testid(f"schedule-{seeded.schedule_name}").find_elements(
            By.CSS_SELECTOR, '[data-testid="resume"]'
        ),
        what="a resume button after pause",
    )
    assert [s.paused for s in api.schedules() if s.name == seeded.schedule_name] == [True]
    browser.assert_accessible()
    browser.by_testid(f"schedule-{seeded.schedule_name}").find_element(
        By.CSS_SELECTOR, '[data-testid="resume"]'
    ).click()
    browser.wait_for(
        lambda: browser.by_testid(f"schedule-{seeded.schedule_name}").find_elements(
            By.CSS_SELECTOR, '[data-testid="pause"]'
        ),
        what="a pause button after resume",
    )
    assert [s.paused for s in api.schedules() if s.name == seeded.schedule_name] == [False]


def test_workflow_dag_nodes_show_the_api_states(
    browser: Browser, dev: DevProcess, seeded: Seeded, api: Api
) -> None:
    browser.get(dev.ui_url + "workflows")
    assert seeded.workflow_id in browser.html or "browser-etl" in browser.html
    browser.assert_accessible()
    browser.get(dev.ui_url + f"workflows/{seeded.workflow_id}")
    wf = api.workflow(seeded.workflow_id)
    assert {n.id for n in wf.nodes} == set(seeded.workflow_nodes)
    for node in wf.nodes:
        element = browser.by_testid(f"dag-node-{node.id}")
        classes = str(element.get_attribute("class") or "").lower()
        state = state_name(node.task.state).lower()
        assert state in re.split(r"[\s_-]+", classes) or state in classes, (node.id, classes)
    browser.assert_accessible()


def test_expectations_page_shows_the_status(
    browser: Browser, dev: DevProcess, seeded: Seeded, api: Api
) -> None:
    browser.get(dev.ui_url + "expectations")
    row = browser.by_testid(f"expectation-{seeded.expectation_job}")
    (exp,) = [e for e in api.expectations() if e.job_id == seeded.expectation_job]
    status = row.find_element(By.CSS_SELECTOR, '[data-testid="expectation-status"]').text
    if exp.status == pb.EXPECTATION_STATUS_UNSPECIFIED:
        assert "not available" in status.lower() or status.strip() in {"", "-", "—"}
    else:
        name = pb.ExpectationStatus.Name(exp.status).removeprefix("EXPECTATION_STATUS_")
        assert status.strip().upper() == name
    browser.assert_accessible()


def test_forecast_page_table_equals_the_api(
    browser: Browser, dev: DevProcess, seeded: Seeded, api: Api
) -> None:
    browser.get(dev.ui_url + "forecast?bucket=60")
    if maybe(api.forecast) is None:
        assert_not_available(browser)
        return
    browser.by_testid("forecast-chart")
    table = browser.by_testid("forecast-table")
    first_row = table.find_element(By.CSS_SELECTOR, "tbody tr[data-start]")
    start = datetime.fromisoformat(str(first_row.get_attribute("data-start")))
    # The same request the page made: the window that starts at the page's first bucket.
    forecast = api.forecast(60, start=start, buckets=60)
    assert sum(b.firing for b in forecast.buckets) >= len(seeded.future)
    for pool in ("CRITICAL", "STANDARD", "BULK"):
        of_pool = [b for b in forecast.buckets if pool_name(b.pool) == pool]
        assert browser.int_of(f"forecast-total-{pool}-firing") == sum(b.firing for b in of_pool)
        assert browser.int_of(f"forecast-total-{pool}-nominal") == sum(b.nominal for b in of_pool)
    # Per bucket: jitter spreads the seeded minute-aligned tasks over later minutes.
    cells = browser.all_by_testid("forecast-STANDARD-firing")
    per_bucket = [b.firing for b in forecast.buckets if pool_name(b.pool) == "STANDARD"]
    assert [int(c.text) for c in cells] == per_bucket
    nominal = [b.nominal for b in forecast.buckets if pool_name(b.pool) == "STANDARD"]
    assert per_bucket != nominal, "jitter moved no seeded task out of its nominal minute"
    browser.assert_accessible()


@pytest.mark.parametrize(
    "page",
    ["", "tasks", "tasks?state=DEAD_LETTER", "schedules", "workflows", "expectations", "forecast"],
)
def test_every_page_has_landmarks_a_title_and_no_axe_violations(
    browser: Browser, dev: DevProcess, seeded: Seeded, page: str
) -> None:
    browser.get(dev.ui_url + page)
    assert browser.title.strip()
    for landmark in ("header", "nav", "main"):
        assert browser.driver.find_elements(By.CSS_SELECTOR, landmark), (page, landmark)
    browser.assert_accessible()


def test_login_page_has_no_axe_violations(browser: Browser, dev: DevProcess) -> None:
    browser.get(dev.ui_url + "login")
    browser.assert_accessible()


def test_admin_token_sees_every_tenant_and_picks_one(
    browser: Browser, dev: DevProcess, seeded: Seeded, admin_api: Api
) -> None:
    login(browser, dev, admin_token=dev.admin_token)
    browser.get(dev.ui_url + "?tenant=all")
    counted = maybe(admin_api.counts)
    if counted is None:
        assert_not_available(browser)
    else:
        assert browser.int_of("count-total") == counted[1]
    browser.assert_accessible()
    # Acting for the second tenant: its task opens, and the dev tenant's does not.
    browser.get(dev.ui_url + f"tasks/{seeded.other_task_id}?tenant={seeded.other_tenant_id}")
    assert browser.text_of("task-type") == f"{seeded.other_marker}-type"
    browser.get(dev.ui_url + f"tasks/{seeded.completed[0]}?tenant={seeded.other_tenant_id}")
    assert "not found" in browser.html.lower()


def test_bulk_redrive_of_the_dead_letters_of_a_type(
    browser: Browser, dev: DevProcess, seeded: Seeded, api: Api
) -> None:
    # Last in the file: it redrives the seeded `boom` dead letters the tests above read.
    task_filter = pb.TaskFilter(type="boom")
    dead_before, _ = api.counts(pb.TaskFilter(type="boom", states=[pb.TASK_STATE_DEAD_LETTER]))
    assert dead_before["DEAD_LETTER"] >= 1
    browser.get(dev.ui_url + "tasks?type=boom&state=DEAD_LETTER")
    browser.click_and_wait(browser.by_testid("bulk-redrive"))
    plan = api.call(
        api.sched.PlanBulkAction,
        pb.PlanBulkActionRequest(action=pb.BULK_ACTION_REDRIVE, filter=task_filter),
    )
    assert browser.int_of("bulk-count") == plan.count == dead_before["DEAD_LETTER"]
    assert "boom" in browser.text_of("bulk-filter")
    browser.click_and_wait(
        browser.driver.find_element(
            By.CSS_SELECTOR, "form:has(input[name=plan_token]) [type=submit]"
        )
    )
    assert browser.int_of("bulk-changed") == plan.count
    by_state, _ = api.counts(task_filter)
    assert by_state["DEAD_LETTER"] == 0
    assert by_state["SCHEDULED"] + by_state["PRELOADED"] >= plan.count
    browser.assert_accessible()
