"""The operator's UX of issue 36, part 2, in a real browser against a real
``tickwheel dev``: a DAG left to right that fits any width (pan and zoom), the "no
worker" badge of overdue tasks no connected worker takes, live refresh of the lists
(kept scroll, filter and a toggle), and a failed task's page with its error type,
traceback, attempts in milliseconds and links to its workflow and schedule.

Runs after test_operator_ux.py and before test_pages.py (file order); what it submits
it finishes (the orphan task is cancelled, the schedule deleted)."""

from __future__ import annotations

import re
import secrets
from collections.abc import Iterator
from datetime import datetime, timedelta

import pytest
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By

from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from scheduler.client import SyncClient, TaskSpec
from tests.browser._chrome import Browser
from tests.browser._devserver import Api, DevProcess, Seeded, open_login_link


@pytest.fixture(autouse=True)
def _logged_in(browser: Browser, dev: DevProcess) -> Iterator[None]:
    open_login_link(browser, dev)
    yield
    # localStorage outlives the cookies: leave live refresh on for the next tests.
    browser.driver.execute_script("localStorage.removeItem('tickwheel-live')")


def _screen(browser: Browser, width: int, height: int = 900) -> None:
    browser.driver.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
    )


@pytest.fixture
def screen(browser: Browser) -> Iterator[None]:
    try:
        yield
    finally:
        browser.driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})


# ------------------------------------------------------------------ the DAG


def _fan_out(dev: DevProcess) -> tuple[str, list[str]]:
    kids = [f"shard-{i:02}" for i in range(12)]
    nodes = {"fetch": TaskSpec(type="ok", payload={"n": "fetch"})}
    nodes |= {k: TaskSpec(type="ok", payload={"n": k}) for k in kids}
    nodes["merge"] = TaskSpec(type="ok", payload={"n": "merge"})
    edges = [("fetch", k) for k in kids] + [(k, "merge") for k in kids]
    with SyncClient(dev.target, api_key=dev.api_key) as client:
        wf = client.run(client.aio.submit_workflow(nodes, edges, name="browser-fan-out-12"))
    return str(wf.id), kids


_RECTS = """
const svg = document.querySelector('[data-testid="dag"]').getBoundingClientRect();
const nodes = {};
document.querySelectorAll('[data-testid^="dag-node-"]').forEach(g => {
  const r = g.getBoundingClientRect();
  nodes[g.dataset.testid.slice(9)] = [r.left, r.top, r.right, r.bottom];
});
return {svg: [svg.left, svg.top, svg.right, svg.bottom], nodes: nodes,
        page: [document.documentElement.scrollWidth, window.innerWidth],
        viewBox: document.querySelector('[data-testid="dag"]').getAttribute('viewBox'),
        zoom: document.querySelector('[data-testid="dag"]').dataset.zoom};
"""


@pytest.mark.parametrize("width", [1440, 800])
def test_a_12_wide_fan_out_lays_out_left_to_right_and_fits_the_width(
    browser: Browser, dev: DevProcess, seeded: Seeded, screen: None, width: int
) -> None:
    workflow_id, kids = _fan_out(dev)
    _screen(browser, width)
    browser.get(dev.ui_url + f"workflows/{workflow_id}")
    got = browser.driver.execute_script(_RECTS)
    scroll_w, inner_w = got["page"]
    assert scroll_w <= inner_w, f"the page scrolls sideways at {width}px: {scroll_w}"
    sl, st, sr, sb = got["svg"]
    assert sr <= inner_w
    nodes = got["nodes"]
    assert set(nodes) == {"fetch", "merge", *kids}
    for name, (left, top, right, bottom) in nodes.items():  # every node inside the box
        assert sl - 1 <= left, name
        assert right <= sr + 1, name
        assert st - 1 <= top, name
        assert bottom <= sb + 1, name
    # Left to right: the root, then the 12 in one column, then the join.
    assert all(nodes["fetch"][2] < nodes[k][0] for k in kids)
    assert all(nodes[k][2] < nodes["merge"][0] for k in kids)
    assert len({round(nodes[k][0]) for k in kids}) == 1
    assert len({round(nodes[k][1]) for k in kids}) == 12
    if width == 1440:
        browser.assert_accessible()
        print(f"12-wide DAG screenshot: {browser.screenshot('dag-12-wide')}")

    # The wheel zooms about the pointer, a drag pans, Fit shows the whole graph again.
    assert got["zoom"] == "1.000"
    browser.driver.execute_script(
        """
        const svg = document.querySelector('[data-testid="dag"]');
        const r = svg.getBoundingClientRect();
        svg.dispatchEvent(new WheelEvent('wheel', {deltaY: -120, clientX: r.left + r.width / 2,
            clientY: r.top + r.height / 2, bubbles: true, cancelable: true}));
        """
    )
    zoomed = browser.driver.execute_script(_RECTS)
    assert float(zoomed["zoom"]) > 1.0
    before = [float(v) for v in zoomed["viewBox"].split()]
    dag = browser.by_testid("dag")
    drag = ActionChains(browser.driver).move_to_element_with_offset(dag, 5, 5)
    drag.click_and_hold().move_by_offset(60, 30).release().perform()
    after = [float(v) for v in browser.driver.execute_script(_RECTS)["viewBox"].split()]
    assert after[0] < before[0], (before, after)  # the content moved right
    assert after[1] < before[1], (before, after)  # and down
    assert after[2:] == before[2:]
    assert browser.driver.current_url.endswith(f"workflows/{workflow_id}")  # a pan, no click
    browser.by_testid("dag-fit").click()
    assert browser.driver.execute_script(_RECTS)["zoom"] == "1.000"
    browser.by_testid("dag-zoom-in").click()
    assert float(browser.driver.execute_script(_RECTS)["zoom"]) > 1.0


# ------------------------------------------------------------------ no worker


def test_overdue_tasks_of_a_type_no_worker_takes_carry_a_no_worker_badge(
    browser: Browser, dev: DevProcess, seeded: Seeded, api: Api
) -> None:
    orphan_type = f"orphan-{secrets.token_hex(3)}"
    with SyncClient(dev.target, api_key=dev.api_key) as client:
        orphan = str(client.submit(orphan_type, {"n": 1}, strict_timing=True).id)
    try:
        # The server names the group (ListWorkers.unserved) once the task is due.
        def unserved() -> list[pb.UnservedTasks]:
            resp = api.call(api.sched.ListWorkers, pb.ListWorkersRequest())
            return [u for u in resp.unserved if u.type == orphan_type]

        (group,) = browser.wait_for(unserved, what="ListWorkers to name the orphan's type")
        assert group.count == 1
        browser.get(dev.ui_url + "tasks")
        row = browser.by_testid(f"task-row-{orphan}")
        badge = row.find_element(By.CSS_SELECTOR, '[data-testid="no-worker"]')
        assert badge.text == "no worker"
        assert orphan_type in str(badge.get_attribute("title"))
        assert orphan_type in browser.text_of("unserved-note")
        # A type the connected worker takes, and a task not due yet, carry none.
        for task_id in (*seeded.completed, seeded.future[0]):
            if browser.has_testid(f"task-row-{task_id}"):
                cells = browser.by_testid(f"task-row-{task_id}")
                assert not cells.find_elements(By.CSS_SELECTOR, '[data-testid="no-worker"]')
        browser.assert_accessible()

        browser.get(dev.ui_url)
        section = browser.by_testid("unserved-section")
        assert section.is_displayed()
        line = browser.by_testid(f"unserved-{orphan_type}")
        assert "1" in line.text
        assert "STANDARD" in line.text
        link = line.find_element(By.TAG_NAME, "a")
        assert f"type={orphan_type}" in str(link.get_attribute("href"))
        browser.assert_accessible()
        print(f"overview screenshot: {browser.screenshot('overview-no-worker')}")
    finally:
        with SyncClient(dev.target, api_key=dev.api_key) as client:
            client.cancel(orphan)
    # Live: once cancelled, the overview's poll takes the line away.
    browser.wait_for(
        lambda: not browser.by_testid("unserved-section").is_displayed(),
        what="the overview to drop the cancelled orphan",
    )


# ------------------------------------------------------------------ live refresh


def test_the_task_list_refreshes_live_keeping_scroll_and_filter_until_switched_off(
    browser: Browser, dev: DevProcess, seeded: Seeded, screen: None
) -> None:
    _screen(browser, 1440, 600)
    browser.get(dev.ui_url + "tasks")
    toggle = browser.by_testid("live-toggle")
    assert toggle.is_selected()
    assert browser.driver.execute_script("return window.tickwheelLive.running") is True
    # State a reload would lose: a marker, a scrolled page, a ticked (unsent) filter box.
    browser.driver.execute_script("window.__sameDocument = 1; window.scrollTo(0, 300);")
    box = browser.by_testid("filter-state-SCHEDULED")
    if box.is_selected():
        box.click()
    browser.driver.execute_script("arguments[0].click()", box)
    browser.driver.execute_script("document.activeElement.blur()")
    y = browser.driver.execute_script("return window.scrollY")
    assert y > 0
    with SyncClient(dev.target, api_key=dev.api_key) as client:
        fresh = str(client.submit("report", {"n": "live"}, delay=timedelta(minutes=40)).id)
    browser.wait_for(
        lambda: browser.has_testid(f"task-row-{fresh}"), what="the new task to appear live"
    )
    assert browser.driver.execute_script("return window.__sameDocument") == 1
    assert browser.driver.execute_script("return window.scrollY") == y
    assert browser.by_testid("filter-state-SCHEDULED").is_selected()
    refreshes = int(browser.driver.execute_script("return window.tickwheelLive.refreshes"))
    assert refreshes >= 1

    # Off: the timer stops, and stays off across a reload (remembered in the browser).
    browser.by_testid("live-toggle").click()
    assert browser.driver.execute_script("return window.tickwheelLive.running") is False
    assert browser.driver.execute_script("return document.documentElement.dataset.live") == "off"
    browser.get(dev.ui_url + "tasks")
    assert not browser.by_testid("live-toggle").is_selected()
    assert browser.driver.execute_script("return window.tickwheelLive.running") is False
    browser.get(dev.ui_url)  # the overview's poll asks the same switch
    assert not browser.by_testid("live-toggle").is_selected()
    assert browser.driver.execute_script("return window.tickwheelLive.on()") is False
    browser.by_testid("live-toggle").click()
    assert browser.driver.execute_script("return window.tickwheelLive.running") is True


# ------------------------------------------------------------------ a failed task


def test_a_failed_tasks_page_shows_its_error_type_traceback_and_attempts_in_ms(
    browser: Browser, dev: DevProcess, seeded: Seeded, api: Api
) -> None:
    task_id = seeded.dead[2]
    task = api.task(task_id)
    assert task.last_error_type == "ApplicationError"  # what the SDK sent, stored
    assert "Traceback (most recent call last)" in task.last_traceback
    browser.get(dev.ui_url + f"tasks/{task_id}")
    failure = browser.by_testid("task-failure")
    facts = browser.driver.find_element(By.CSS_SELECTOR, "dl.facts")
    assert failure.location["y"] < facts.location["y"]
    assert browser.text_of("task-error-type") == "ApplicationError"
    trace = browser.text_of("task-traceback")
    assert trace.startswith("Traceback (most recent call last):")
    assert "handlers.py" in trace
    assert "boom: browser-test failure" in trace
    at = browser.text_of("task-failed-at")
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\.\d{3}", at), at
    # One attempt: dispatched, started, ended in milliseconds, with its duration.
    row = browser.by_testid("attempt-1")
    assert row.get_attribute("data-outcome") == "DEAD_LETTER"
    duration = int(str(row.get_attribute("data-duration-ms")))
    assert duration >= 0
    times = [t.text for t in row.find_elements(By.TAG_NAME, "time")]
    assert len(times) == 3
    assert all(re.fullmatch(r"[\d-]+ [\d:]+\.\d{3}", t) for t in times), times
    ended = datetime.fromisoformat(times[2].replace(" ", "T") + "+00:00")
    started = datetime.fromisoformat(times[1].replace(" ", "T") + "+00:00")
    assert abs((ended - started) / timedelta(milliseconds=1) - duration) <= 1
    # The history to the millisecond too.
    first = browser.testid_prefix("transition")[0].find_element(By.TAG_NAME, "time").text
    assert re.fullmatch(r"[\d-]+ [\d:]+\.\d{3}", first), first
    browser.assert_accessible()
    print(f"failed task screenshot: {browser.screenshot('task-failed-traceback')}")


def test_a_tasks_page_links_to_its_workflow_and_its_schedule(
    browser: Browser, dev: DevProcess, seeded: Seeded, api: Api
) -> None:
    node_task = seeded.workflow_nodes["extract"]
    browser.get(dev.ui_url + f"tasks/{node_task}")
    link = browser.by_testid("task-workflow-link")
    assert link.text == seeded.workflow_id
    browser.click_and_wait(link)
    assert browser.driver.current_url.endswith(f"workflows/{seeded.workflow_id}")

    with SyncClient(dev.target, api_key=dev.api_key) as client:
        name = f"browser-every-2s-{secrets.token_hex(3)}"
        schedule = client.run(
            client.aio.create_schedule(name, "ok", {"n": "cron"}, cron="*/2 * * * * *")
        )
        try:

            def made() -> list[pb.Task]:
                listed = api.call(api.sched.ListTasks, pb.ListTasksRequest(type="ok", page_size=50))
                return [t for t in listed.tasks if t.schedule_id == str(schedule.id)]

            by_schedule = browser.wait_for(made, what="the schedule's first task")
        finally:
            client.run(client.aio.delete_schedule(schedule.id))
    browser.get(dev.ui_url + f"tasks/{by_schedule[0].id}")
    link = browser.by_testid("task-schedule-link")
    assert link.text == str(schedule.id)
    assert str(link.get_attribute("href")).endswith(f"/schedules#schedule-{schedule.id}")
    assert not browser.has_testid("task-workflow-link")
    browser.assert_accessible()


# ------------------------------------------------------------------ paused dispatch


def test_a_paused_type_shows_on_the_overview_with_its_held_tasks_until_resumed(
    browser: Browser, dev: DevProcess, seeded: Seeded, api: Api
) -> None:
    """Issue 43: the overview shows a dispatch pause and the tasks it holds, as the API
    answers them (ListDispatchPauses, GetForecast.held_paused)."""
    paused_type = f"paused-{secrets.token_hex(3)}"
    api.call(api.sched.PauseDispatch, pb.PauseDispatchRequest(task_type=paused_type))
    with SyncClient(dev.target, api_key=dev.api_key) as client:
        held = str(client.submit(paused_type, {"n": 1}, strict_timing=True).id)
    try:
        pauses = api.call(api.sched.ListDispatchPauses, pb.ListDispatchPausesRequest()).pauses
        assert [p.task_type for p in pauses] == [paused_type]
        browser.get(dev.ui_url)
        assert browser.by_testid("paused-section").is_displayed()
        row = browser.by_testid(f"pause-{paused_type}-any")
        assert "any pool" in row.text

        def held_count() -> int:
            resp = api.call(
                api.sched.GetForecast,
                pb.GetForecastRequest(bucket_s=60, buckets=1),
            )
            return int(resp.held_paused)

        browser.wait_for(held_count, what="the paused task to be held")
        browser.wait_for(
            lambda: browser.text_of("held-paused") == str(held_count()),
            what="the overview's held count to equal the API's",
        )
        browser.assert_accessible()
        print(f"overview screenshot: {browser.screenshot('overview-paused')}")
    finally:
        api.call(api.sched.ResumeDispatch, pb.ResumeDispatchRequest(task_type=paused_type))
        with SyncClient(dev.target, api_key=dev.api_key) as client:
            client.cancel(held)
    assert not api.call(api.sched.ListDispatchPauses, pb.ListDispatchPausesRequest()).pauses
    browser.get(dev.ui_url)
    assert not browser.by_testid("paused-section").is_displayed()
