"""The browser harness itself: Chromium starts (or fails with its log), axe-core finds
real violations and passes a clean page, screenshots are kept, and the dev server
holds the seeded tasks."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator

import pytest

from tests.browser._chrome import ARTIFACTS, Browser, BrowserStartError
from tests.browser._devserver import Api, DevProcess, Seeded

CLEAN = b"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Smoke</title></head>
<body><header><h1>Smoke page</h1></header><nav aria-label="Main"><a href="/">Home</a></nav>
<main><p data-testid="answer">1,234</p>
<form><label for="q">Search</label><input id="q" name="q"></form></main></body></html>"""

BROKEN = b"""<!doctype html>
<html><head></head><body><img src="x.png"><input name="q">
<p style="color:#bbb;background:#fff">low contrast</p></body></html>"""


class _Pages(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = CLEAN if self.path.startswith("/clean") else BROKEN
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def pages() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Pages)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_clean_page_has_no_axe_violations_and_is_saved(browser: Browser, pages: str) -> None:
    browser.get(pages + "/clean")
    assert browser.title == "Smoke"
    assert browser.int_of("answer") == 1234
    browser.assert_accessible()
    path = browser.screenshot("harness-smoke")
    assert path.parent == ARTIFACTS
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_axe_reports_violations_of_a_broken_page(browser: Browser, pages: str) -> None:
    browser.get(pages + "/broken")
    ids = {v["id"] for v in browser.axe_violations()}
    assert {"image-alt", "label", "html-has-lang", "document-title"} <= ids, ids
    with pytest.raises(AssertionError, match="image-alt"):
        browser.assert_accessible()


def test_browser_that_cannot_start_fails_with_the_driver_log() -> None:
    with pytest.raises(BrowserStartError) as info:
        Browser(chromium="/nonexistent/chromium")
    message = str(info.value)
    assert "chromedriver log tail" in message
    assert "/nonexistent/chromium" in message


def test_dev_server_holds_the_seeded_tasks(dev: DevProcess, seeded: Seeded, api: Api) -> None:
    assert dev.target.startswith("127.0.0.1:")
    assert all(api.state(t) == "COMPLETED" for t in seeded.completed)
    assert all(api.state(t) == "DEAD_LETTER" for t in seeded.dead)
    assert all(api.state(t) in {"SCHEDULED", "PRELOADED"} for t in seeded.future)
    assert seeded.other_api_key
    assert seeded.other_api_key != dev.api_key
