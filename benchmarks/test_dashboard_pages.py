"""The dashboard's pages over HTTP with 1,000,000 tasks in PostgreSQL.

Issue 18's target: every page renders in under 300 ms. The database, the tenants and the
``tickwheel serve`` process are those of ``test_dashboard.py`` (its module fixture, so
the same 900,000 + 100,000 tasks); here the dashboard app (``scheduler.ui``) runs in a
thread of its own, as ``tickwheel ui`` would, and each round is one full GET of a page
by a browser without a session (page render included: every RPC the page makes, the
template, the response).

Run: ``.venv/bin/pytest benchmarks/test_dashboard_pages.py --benchmark-only
-p no:cacheprovider -s`` (figures in docs/benchmarks.md).
"""

from __future__ import annotations

import asyncio
import http.cookiejar
import re
import threading
import urllib.parse
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from benchmarks.test_dashboard import BUDGET_MS, Dashboard
from benchmarks.test_dashboard import dashboard as dashboard  # the module fixture
from tests.support.processes import ADMIN_TOKEN

from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from scheduler.ui import UIConfig, start_ui


class _UIThread:
    """The dashboard app on its own event loop in a thread; ``url`` once it listens."""

    def __init__(self, config: UIConfig) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self.running = asyncio.run_coroutine_threadsafe(start_ui(config), self._loop).result(30)
        self.url = self.running.url
        self.opener = _logged_in(self.running.login_url or "")

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self.running.stop(), self._loop).result(30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()


@pytest.fixture(scope="module")
def pages(dashboard: Dashboard) -> Iterator[tuple[_UIThread, Dashboard]]:
    key = dict(dashboard.key)["x-api-key"]
    target = dashboard.channel._channel.target().decode()  # type: ignore[attr-defined]
    ui = _UIThread(UIConfig(target=target, api_key=key, admin_token=ADMIN_TOKEN, port=0))
    try:
        yield ui, dashboard
    finally:
        ui.close()


def _logged_in(login_url: str) -> urllib.request.OpenerDirector:
    """A cookie-keeping opener logged in as the login link's script does it (the pages
    answer nothing but /login to a browser that has not logged in)."""
    base, _, token = login_url.partition("login#token=")
    assert token, f"no login link: {login_url!r}"
    opener = urllib.request.build_opener(
        urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar())
    )
    with opener.open(base + "login", timeout=60) as resp:
        page = resp.read().decode()
    match = re.search(r'name="csrf" value="([^"]+)"', page)
    assert match, "no CSRF field on the login page"
    form = urllib.parse.urlencode({"csrf": match.group(1), "link_token": token}).encode()
    with opener.open(base + "login", data=form, timeout=60) as resp:
        assert resp.url.rstrip("/") == base.rstrip("/"), resp.url
    return opener


def _get(opener: urllib.request.OpenerDirector, url: str) -> str:
    with opener.open(url, timeout=60) as resp:
        assert resp.status == 200
        assert resp.url.rstrip("/").split("?")[0] == url.rstrip("/").split("?")[0], resp.url
        return str(resp.read().decode())


def _bench(benchmark: Any, opener: urllib.request.OpenerDirector, url: str) -> str:
    _get(opener, url)  # warm
    out = benchmark.pedantic(lambda: _get(opener, url), rounds=15, iterations=1)
    stats = benchmark.stats.stats
    benchmark.extra_info.update(
        mean_ms=stats.mean * 1000, median_ms=stats.median * 1000, max_ms=stats.max * 1000
    )
    # Recorded against BUDGET_MS, not asserted: a loaded machine can be several times
    # slower, and docs/benchmarks.md says what was measured and where.
    benchmark.extra_info["budget_ms"] = BUDGET_MS
    return str(out)


@pytest.mark.parametrize(
    "path",
    [
        "/",
        "/?tenant=all",
        "/tasks",
        "/tasks?state=SCHEDULED&pool=BULK&type=type-1",
        "/forecast",
        "/forecast?bucket=1",
        "/schedules",
        "/expectations",
        "/api/overview",
    ],
)
def test_page(benchmark: Any, pages: tuple[_UIThread, Dashboard], path: str) -> None:
    ui, _ = pages
    html = _bench(benchmark, ui.opener, ui.url.rstrip("/") + path)
    assert "not available" not in html


def test_task_page(benchmark: Any, pages: tuple[_UIThread, Dashboard]) -> None:
    ui, d = pages
    found = d.call("ListTasks", pb.ListTasksRequest(idempotency_key="key-4242"), d.key)
    (task,) = found.tasks
    html = _bench(benchmark, ui.opener, f"{ui.url}tasks/{task.id}")
    assert 'data-testid="task-timeline"' in html
