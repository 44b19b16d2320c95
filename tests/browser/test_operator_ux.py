"""The operator's UX of issue 36 in a real browser against a real ``tickwheel dev``:
the admin's tenant picker, the dense task list, unicode and bidi text, the charts' UTC
axes, a read-only key's pages and a failed task's page.

Runs before test_pages.py (file order), whose last tests cancel ``cancel_me`` and redrive
the seeded dead letters that these tests read."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterator
from datetime import timedelta

import pytest
from selenium.webdriver.common.by import By

from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from scheduler.client import AdminClient, SyncClient
from tests.browser._chrome import Browser
from tests.browser._devserver import Api, DevProcess, Seeded, open_login_link
from tests.browser.test_pages import login

RLO = "\u202e"


@pytest.fixture(autouse=True)
def _logged_in(browser: Browser, dev: DevProcess) -> None:
    open_login_link(browser, dev)


@pytest.fixture
def screen_1440x900(browser: Browser) -> Iterator[None]:
    """The viewport of a 1440x900 laptop screen (exactly, whatever the window)."""
    browser.driver.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": 1440, "height": 900, "deviceScaleFactor": 1, "mobile": False},
    )
    try:
        yield
    finally:
        browser.driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})


# ------------------------------------------------------------------ admin: pick a tenant


@pytest.mark.parametrize(
    "page", ["tasks", "tasks?state=DEAD_LETTER", "schedules", "workflows", "expectations"]
)
def test_the_admins_all_tenants_view_offers_tenant_names_not_an_error(
    browser: Browser, dev: DevProcess, seeded: Seeded, admin_api: Api, page: str
) -> None:
    login(browser, dev, admin_token=dev.admin_token)
    browser.get(dev.ui_url + page)
    assert "INVALID_ARGUMENT" not in browser.html
    assert "x-tenant-id" not in browser.html
    browser.by_testid("pick-tenant")
    tenants = admin_api.call(admin_api.admin.ListTenants, pb.ListTenantsRequest(page_size=500))
    names = {t.id: t.name for t in tenants.tenants}
    other = browser.by_testid(f"tenant-choice-{seeded.other_tenant_id}")
    assert names[seeded.other_tenant_id] in other.text
    browser.assert_accessible()
    # The link keeps the page and its filter, for that tenant.
    browser.click_and_wait(
        browser.by_testid(f"tenant-choice-{dev.tenant_id}").find_element(By.TAG_NAME, "a")
    )
    assert f"tenant={dev.tenant_id}" in browser.driver.current_url
    assert browser.driver.current_url.split("?")[0].endswith(page.split("?")[0])
    if "state=DEAD_LETTER" in page:
        assert "state=DEAD_LETTER" in browser.driver.current_url
    assert not browser.has_testid("pick-tenant")
    assert "INVALID_ARGUMENT" not in browser.html


def test_the_admins_overview_counts_tasks_per_tenant_by_name(
    browser: Browser, dev: DevProcess, seeded: Seeded, admin_api: Api
) -> None:
    login(browser, dev, admin_token=dev.admin_token)
    browser.get(dev.ui_url + "?tenant=all")
    tenants = admin_api.call(admin_api.admin.ListTenants, pb.ListTenantsRequest(page_size=500))
    names = {t.id: t.name for t in tenants.tenants}
    counted = admin_api.call(admin_api.sched.CountTasks, pb.CountTasksRequest())
    by_tenant: dict[str, int] = {}
    for c in counted.counts:
        by_tenant[c.tenant_id] = by_tenant.get(c.tenant_id, 0) + c.count
    row = browser.by_testid(f"tenant-{seeded.other_tenant_id}")
    assert names[seeded.other_tenant_id] in row.text
    assert (
        browser.int_of(f"tenant-count-{seeded.other_tenant_id}")
        == by_tenant[seeded.other_tenant_id]
    )
    # Workers name their tenant, not its UUID.
    worker = browser.by_testid(f"worker-{seeded.ok_worker}")
    assert names[dev.tenant_id] in worker.text
    assert dev.tenant_id not in worker.text
    browser.assert_accessible()
    browser.click_and_wait(row.find_element(By.TAG_NAME, "a"))
    assert f"tenant={seeded.other_tenant_id}" in browser.driver.current_url
    assert browser.has_testid(f"task-row-{seeded.other_task_id}")


# ------------------------------------------------------------------ the dense task list


def test_the_task_list_shows_25_one_line_rows_on_a_1440x900_screen(
    browser: Browser, dev: DevProcess, seeded: Seeded, api: Api, screen_1440x900: None
) -> None:
    _, total = api.counts()
    assert total >= 30, "the seed makes more tasks than one screen"
    browser.get(dev.ui_url + "tasks")
    assert browser.int_of("tasks-total") == total
    visible = browser.driver.execute_script(
        """
        const rows = document.querySelectorAll('[data-testid^="task-row-"]');
        const fits = r => r.getBoundingClientRect().bottom <= window.innerHeight;
        return Array.from(rows).filter(fits).length;
        """
    )
    assert visible >= 25, f"only {visible} task rows within a 1440x900 screen"
    rows = browser.testid_prefix("task-row-")
    for row in rows:
        task_id = str(row.get_attribute("data-testid")).removeprefix("task-row-")
        link = row.find_element(By.CSS_SELECTOR, "th a")
        assert link.text == task_id[:8]
        assert link.get_attribute("title") == task_id
        assert row.find_element(By.CSS_SELECTOR, "button.copy").get_attribute("data-copy") == (
            task_id
        )
        height = row.size["height"]
        assert height < 30, f"row {task_id} is {height}px high: it wraps"
    # Relative times with the ISO UTC time on hover; attempts as failed/allowed.
    first = rows[0]
    task = api.task(str(first.get_attribute("data-testid")).removeprefix("task-row-"))
    stamp = first.find_elements(By.TAG_NAME, "time")[0]
    assert re.fullmatch(r"(in \d+[smhd]|\d+[smhd] ago|now)", stamp.text), stamp.text
    title = str(stamp.get_attribute("title"))
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\.\d{3} UTC", title), title
    attempts = first.find_element(By.CSS_SELECTOR, '[data-testid="attempts"]').text
    assert attempts == f"{task.retry_count}/{task.max_retries + 1}"
    browser.assert_accessible()
    print(f"task list screenshot: {browser.screenshot('tasks')}")


def test_the_idempotency_key_column_shows_only_keys_other_than_the_id(
    browser: Browser, dev: DevProcess, seeded: Seeded
) -> None:
    browser.get(dev.ui_url + "tasks?type=boom")
    headers = [h.text for h in browser.driver.find_elements(By.CSS_SELECTOR, "thead th")]
    assert "idempotency key" not in headers, "boom tasks have no key of their own"
    browser.get(dev.ui_url + "tasks?type=ok")
    headers = [h.text for h in browser.driver.find_elements(By.CSS_SELECTOR, "thead th")]
    assert "idempotency key" in headers
    assert "done-0" in browser.text_of(f"task-row-{seeded.completed[0]}")


# ------------------------------------------------------------------ unicode and bidi


def test_unicode_payloads_show_as_text_and_bidi_controls_cannot_flip_the_page(
    browser: Browser, dev: DevProcess, seeded: Seeded
) -> None:
    payload = {
        "ar": "مرحبا بالعالم",
        "zh": "你好，世界",
        "emoji": "🎉🚀",
        "trick": f"abc{RLO}def",
    }
    with SyncClient(dev.target, api_key=dev.api_key) as client:
        task = client.submit(
            "report", payload, delay=timedelta(minutes=55), idempotency_key=f"key{RLO}-flip"
        )
    browser.get(dev.ui_url + f"tasks/{task.id}")
    shown = browser.text_of("task-payload")
    for text in ("مرحبا بالعالم", "你好，世界", "🎉🚀"):
        assert text in shown
    assert "\\u0645" not in shown
    assert "\\u4f60" not in shown
    assert json.loads(shown) == payload, "the escaped control is still the same JSON value"
    assert RLO not in browser.html, "no raw U+202E reaches the page"
    assert browser.text_of("task-idempotency-key") == "key[U+202E]-flip"
    browser.get(dev.ui_url + "tasks?q=" + f"key{RLO}-flip".replace(RLO, "%E2%80%AE"))
    assert browser.driver.current_url.split("?")[0].endswith(f"/tasks/{task.id}")
    browser.assert_accessible()


# ------------------------------------------------------------------ charts


def test_charts_speak_iso_24_hour_utc_and_fit_their_labels(
    browser: Browser, dev: DevProcess, seeded: Seeded
) -> None:
    browser.get(dev.ui_url + "forecast")
    ticks = browser.wait_for(
        lambda: browser.driver.execute_script(
            "const c = window.tickwheelCharts && window.tickwheelCharts['chart-forecast'];"
            "return c && c.axes[0]._values && c.axes[0]._values.length ? c.axes[0]._values : null;"
        ),
        what="the forecast chart's time axis",
    )
    for tick in ticks:
        assert re.fullmatch(r"\d{2}:\d{2}(:\d{2})?", str(tick)), f"{tick!r} is not 24-hour"
    # 10,000 tasks a minute: the value axis grows to fit "10,000", never cuts it.
    browser.driver.execute_script(
        "const c = window.tickwheelCharts['chart-forecast'];"
        "c.setData(c.data.map((s, i) => i === 0 ? s : s.map(() => 10000)));"
    )
    fit = browser.wait_for(
        lambda: browser.driver.execute_script(
            """
            const c = window.tickwheelCharts['chart-forecast'], a = c.axes[1];
            if (!a._values || !a._values.some(v => String(v).length >= 6)) return null;
            const longest = a._values.map(String)
              .reduce((x, v) => v.length > x.length ? v : x, '');
            c.ctx.font = a.font[0];
            const need = c.ctx.measureText(longest).width / devicePixelRatio + a.ticks.size + a.gap;
            return {longest: longest, need: need, size: a._size};
            """
        ),
        what="the value axis to show 10,000",
    )
    assert fit["longest"] == "10,000", fit
    assert fit["size"] >= fit["need"], fit


# ------------------------------------------------------------------ scopes


def _read_only_key(dev: DevProcess) -> str:
    async def make() -> str:
        async with await AdminClient.connect(dev.target, admin_token=dev.admin_token) as admin:
            key = await admin.create_api_key(dev.tenant_id, "browser-read-only", scopes=["read"])
            return key.secret

    return asyncio.run(make())


def test_a_read_only_key_sees_no_cancel_redrive_bulk_or_pause_buttons(
    browser: Browser, dev: DevProcess, seeded: Seeded
) -> None:
    login(browser, dev, api_key=_read_only_key(dev))
    browser.get(dev.ui_url + f"tasks/{seeded.cancel_me}")
    assert browser.text_of("task-state") in ("SCHEDULED", "PRELOADED"), "cancellable"
    assert not browser.has_testid("cancel")
    browser.get(dev.ui_url + f"tasks/{seeded.dead[2]}")
    assert not browser.has_testid("redrive")
    browser.get(dev.ui_url + "tasks")
    assert browser.testid_prefix("task-row-"), "a read-only key still reads"
    assert not browser.has_testid("bulk-cancel")
    assert not browser.has_testid("bulk-redrive")
    browser.by_testid("read-only")
    browser.get(dev.ui_url + "schedules")
    assert not browser.has_testid("pause")
    assert not browser.has_testid("resume")
    assert "PERMISSION_DENIED" not in browser.html
    browser.assert_accessible()
    # The full key still sees them.
    open_login_link(browser, dev)
    browser.get(dev.ui_url + f"tasks/{seeded.cancel_me}")
    browser.by_testid("cancel")


# ------------------------------------------------------------------ a failed task


def test_a_failed_tasks_page_opens_with_its_whole_error(
    browser: Browser, dev: DevProcess, seeded: Seeded, api: Api
) -> None:
    task_id = seeded.dead[1]
    task = api.task(task_id)
    browser.get(dev.ui_url + f"tasks/{task_id}")
    failure = browser.by_testid("task-failure")
    facts = browser.driver.find_element(By.CSS_SELECTOR, "dl.facts")
    assert failure.location["y"] < facts.location["y"], "the failure comes first"
    assert browser.text_of("task-last-error") == task.last_error
    heading = failure.find_element(By.TAG_NAME, "h2").text
    assert heading.startswith("Dead-lettered"), heading
    assert "no attempts left" in heading or "not retryable" in heading, heading
    assert f"failed attempts {task.retry_count} of {task.max_retries + 1}" in failure.text
    browser.assert_accessible()
    print(f"failed task screenshot: {browser.screenshot('task-failed')}")
