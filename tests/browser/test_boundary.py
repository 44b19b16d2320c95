"""The dashboard's boundary in a real Chromium against ``tickwheel dev`` (issue 36): a
browser that has not logged in gets the login page and nothing else, the login link
logs it in and leaves no token in the address bar, a DNS-rebinding name gets a 421, and
another site's form cannot cancel a task even holding a valid CSRF token.

Chromium resolves ``rebind.attacker.example`` and ``evil.example`` to 127.0.0.1
(``--host-resolver-rules`` in ``_chrome``), as an attacker's DNS would."""

from __future__ import annotations

import html
import http.server
import threading
from collections.abc import Iterator
from datetime import timedelta
from urllib.parse import urlsplit

import pytest

from scheduler.client import SyncClient
from tests.browser._chrome import Browser
from tests.browser._devserver import Api, DevProcess, Seeded, open_login_link

ATTACK_PAGE = """<!doctype html><html lang="en"><head><title>Win a prize</title></head>
<body><form id="f" method="post" action="{action}">
<input type="hidden" name="csrf" value="{csrf}"></form>
<script>document.getElementById("f").submit();</script></body></html>"""


class _Attacker(http.server.BaseHTTPRequestHandler):
    page = b""

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(self.page)))
        self.end_headers()
        self.wfile.write(self.page)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def attacker() -> Iterator[tuple[type[_Attacker], int]]:
    """A web server another site would run (reached as http://evil.example:PORT)."""
    handler = type("Attacker", (_Attacker,), {})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield handler, int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()


def _ui_port(dev: DevProcess) -> int:
    return int(urlsplit(dev.ui_url).port or 0)


def test_a_browser_that_has_not_logged_in_sees_only_the_login_page(
    browser: Browser, dev: DevProcess, seeded: Seeded
) -> None:
    browser.get(dev.ui_url + "?tenant=all")
    assert urlsplit(browser.driver.current_url).path == "/login"
    assert browser.has_testid("login-form")
    assert seeded.other_tenant_id not in browser.html
    browser.get(dev.ui_url + f"tasks/{seeded.completed[0]}")
    assert urlsplit(browser.driver.current_url).path == "/login"
    assert seeded.completed[0] not in browser.html


def test_the_login_link_logs_in_and_leaves_no_token_behind(
    browser: Browser, dev: DevProcess, seeded: Seeded
) -> None:
    open_login_link(browser, dev)
    assert "token=" not in browser.driver.current_url
    assert browser.has_testid("count-total")
    browser.get(dev.ui_url + f"tasks/{seeded.completed[0]}")
    assert browser.text_of("task-state") == "COMPLETED"
    browser.click_and_wait(browser.by_testid("logout"))
    browser.get(dev.ui_url + "tasks")
    assert urlsplit(browser.driver.current_url).path == "/login"
    # The link of another start (or a guess) logs nobody in.
    browser.get("about:blank")
    browser.get(dev.ui_url + "login#token=" + "x" * 43)
    browser.wait_for(lambda: browser.has_testid("login-error"), what="the refusal")
    assert "not valid" in browser.text_of("login-error")


def test_a_dns_rebinding_name_gets_no_answer(
    browser: Browser, dev: DevProcess, seeded: Seeded
) -> None:
    open_login_link(browser, dev)  # even a logged-in browser: its cookie is not sent there
    rebound = f"http://rebind.attacker.example:{_ui_port(dev)}/"
    browser.get(rebound + "?tenant=all")
    body = browser.driver.find_element("tag name", "body").text
    assert "421 Misdirected Request" in body
    assert seeded.other_tenant_id not in browser.html
    browser.get(rebound + f"tasks/{seeded.completed[0]}")
    assert "421 Misdirected Request" in browser.driver.find_element("tag name", "body").text
    assert 'name="csrf"' not in browser.html
    browser.screenshot("boundary-dns-rebinding-421")


def test_another_sites_form_cannot_cancel_a_task_even_with_a_valid_token(
    browser: Browser,
    dev: DevProcess,
    api: Api,
    attacker: tuple[type[_Attacker], int],
) -> None:
    with SyncClient(dev.target, api_key=dev.api_key) as client:
        task_id = str(client.submit("report", {"n": "csrf"}, delay=timedelta(hours=2)).id)
    open_login_link(browser, dev)
    browser.get(dev.ui_url + f"tasks/{task_id}")
    csrf = browser.driver.find_element("css selector", 'input[name="csrf"]').get_attribute("value")
    assert csrf
    handler, port = attacker
    action = f"{dev.ui_url}tasks/{task_id}/cancel"
    handler.page = ATTACK_PAGE.format(action=html.escape(action), csrf=html.escape(csrf)).encode()
    browser.get(f"http://evil.example:{port}/prize")
    browser.wait_for(
        lambda: browser.driver.current_url == action, what="the forged post to be answered"
    )
    body = browser.driver.find_element("tag name", "body").text
    assert "403 Forbidden" in body
    assert "another site" in body
    assert api.state(task_id) in {"SCHEDULED", "PRELOADED"}
    # The same browser, on the dashboard's own page, can.
    browser.get(dev.ui_url + f"tasks/{task_id}")
    browser.click_and_wait(browser.by_testid("cancel"))
    browser.wait_for(
        lambda: browser.text_of("task-state") == "CANCELLED", what="the page to show CANCELLED"
    )
    assert api.state(task_id) == "CANCELLED"
