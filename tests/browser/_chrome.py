"""Headless Chromium for the browser tests: start it, check a page with axe-core, keep
screenshots.

Debian's ``chromium`` and ``chromium-driver`` (installed by ``scripts/install-deps``)
are driven by Selenium through ``Service(CHROMEDRIVER)``, so Selenium Manager never
looks for, or downloads, a driver or a browser. A browser that cannot start raises
:class:`BrowserStartError` with chromedriver's log; the fixtures turn that into a test
failure (never a skip).
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException, WebDriverException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webelement import WebElement

REPO_ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = os.environ.get("TICKWHEEL_TEST_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("TICKWHEEL_TEST_CHROMEDRIVER", "/usr/bin/chromedriver")
ARTIFACTS = REPO_ROOT / "build" / "test-artifacts"
AXE_VERSION = "4.14.1"
AXE_JS = Path(__file__).with_name("vendor") / "axe-core" / "axe.min.js"

# Without the background-networking switches Chromium keeps dialling out (updates,
# sync, QUIC probes); this network refuses those connections, and the tests must
# never depend on anything but the loopback servers they start.
CHROME_ARGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--window-size=1280,900",
    # Names an attacker would point at 127.0.0.1 (DNS rebinding; a cross-site page):
    # resolved here, never asked of a DNS server.
    "--host-resolver-rules=MAP rebind.attacker.example 127.0.0.1, MAP evil.example 127.0.0.1",
)

saved_artifacts: list[Path] = []
"""Every artifact written this session (the terminal summary lists them)."""


class BrowserStartError(RuntimeError):
    """Chromium or chromedriver did not start; the message holds the driver's log."""


def _tail(path: Path, lines: int = 60) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError as exc:
        return f"<no log at {path}: {exc}>"
    return "\n".join(text.splitlines()[-lines:]) or "<empty log>"


class Browser:
    """One headless Chromium with its own fresh profile directory and driver log."""

    def __init__(self, *, chromium: str = CHROMIUM, chromedriver: str = CHROMEDRIVER) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="tickwheel-chromium-"))
        self.log_path = self.dir / "chromedriver.log"
        options = webdriver.ChromeOptions()
        options.binary_location = chromium
        for arg in CHROME_ARGS:
            options.add_argument(arg)
        options.add_argument(f"--user-data-dir={self.dir / 'profile'}")
        service = Service(
            executable_path=chromedriver,
            log_output=str(self.log_path),
            service_args=["--verbose"],
        )
        try:
            self.driver = webdriver.Chrome(service=service, options=options)
        except (WebDriverException, OSError, ValueError) as exc:
            log = _tail(self.log_path)
            shutil.rmtree(self.dir, ignore_errors=True)
            raise BrowserStartError(
                f"headless Chromium did not start ({chromium} via {chromedriver}; run "
                f"scripts/install-deps): {type(exc).__name__}: {exc}\n"
                f"chromedriver log tail:\n{log}"
            ) from exc
        self.driver.set_page_load_timeout(30)
        self.driver.set_script_timeout(30)

    def close(self) -> None:
        """Quit the browser and remove its profile; safe to call twice."""
        with contextlib.suppress(WebDriverException, OSError):
            self.driver.quit()
        shutil.rmtree(self.dir, ignore_errors=True)

    def log_tail(self) -> str:
        """The end of chromedriver's log (for failure messages)."""
        return _tail(self.log_path)

    # -- pages -----------------------------------------------------------------------
    def get(self, url: str) -> None:
        """Load ``url`` and wait until the document is complete."""
        self.driver.get(url)
        self.wait_for(
            lambda: self.driver.execute_script("return document.readyState") == "complete",
            what=f"{url} to load",
        )

    @property
    def html(self) -> str:
        """The current DOM as HTML."""
        return str(self.driver.page_source)

    @property
    def title(self) -> str:
        return str(self.driver.title)

    def by_testid(self, testid: str) -> WebElement:
        """The element with ``data-testid=testid`` (fails naming the page if absent)."""
        found = self.driver.find_elements(By.CSS_SELECTOR, f'[data-testid="{testid}"]')
        assert found, f'no element data-testid="{testid}" on {self.driver.current_url}'
        return found[0]

    def all_by_testid(self, testid: str) -> list[WebElement]:
        return list(self.driver.find_elements(By.CSS_SELECTOR, f'[data-testid="{testid}"]'))

    def testid_prefix(self, prefix: str) -> list[WebElement]:
        """Every element whose data-testid starts with ``prefix``."""
        return list(self.driver.find_elements(By.CSS_SELECTOR, f'[data-testid^="{prefix}"]'))

    def has_testid(self, testid: str) -> bool:
        return bool(self.driver.find_elements(By.CSS_SELECTOR, f'[data-testid="{testid}"]'))

    def text_of(self, testid: str) -> str:
        return str(self.by_testid(testid).text).strip()

    def int_of(self, testid: str) -> int:
        """The integer shown in ``testid`` (thousands separators allowed)."""
        text = self.text_of(testid)
        digits = re.sub(r"[,\s\u00a0\u202f_]", "", text)
        assert re.fullmatch(r"\d+", digits), f"{testid} shows {text!r}, not an integer"
        return int(digits)

    def click_and_wait(self, element: WebElement) -> None:
        """Click ``element`` and wait until the next page has replaced this one."""
        old = self.driver.find_element(By.TAG_NAME, "html")
        element.click()

        def replaced() -> bool:
            try:
                old.is_enabled()
            except StaleElementReferenceException:
                return True
            return False

        self.wait_for(replaced, what="the next page after a click")
        self.wait_for(
            lambda: self.driver.execute_script("return document.readyState") == "complete",
            what="the next page to load",
        )

    def wait_for(
        self, probe: Callable[[], Any], *, timeout_s: float = 15.0, what: str = "condition"
    ) -> Any:
        """Poll ``probe`` until it returns something true; fail after ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        last: Any = None
        while True:
            with contextlib.suppress(WebDriverException, AssertionError):
                last = probe()
                if last:
                    return last
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"timed out after {timeout_s}s waiting for {what} on "
                    f"{self.driver.current_url}; last: {last!r}"
                )
            time.sleep(0.1)

    # -- accessibility -----------------------------------------------------------------
    def axe_violations(self) -> list[dict[str, Any]]:
        """Inject the vendored axe-core into the current page and run it; the
        violations as axe reports them (id, impact, help, nodes)."""
        if not self.driver.execute_script("return typeof window.axe === 'object'"):
            self.driver.execute_script(AXE_JS.read_text())
        result = self.driver.execute_async_script(
            """
            const done = arguments[arguments.length - 1];
            window.axe.run(document, {resultTypes: ['violations']})
              .then(r => done(JSON.stringify(r.violations)))
              .catch(e => done(JSON.stringify({error: String(e)})));
            """
        )
        parsed = json.loads(result)
        if isinstance(parsed, dict):
            raise AssertionError(f"axe-core failed on {self.driver.current_url}: {parsed}")
        return list(parsed)

    def assert_accessible(self) -> None:
        """axe-core reports 0 violations on the current page (else: every violation,
        with the elements it names)."""
        violations = self.axe_violations()
        assert not violations, (
            f"axe-core {AXE_VERSION}: {len(violations)} violation(s) on "
            f"{self.driver.current_url}:\n{format_violations(violations)}"
        )

    # -- artifacts ---------------------------------------------------------------------
    def screenshot(self, name: str) -> Path:
        """Save the whole page (beyond the window) as ``build/test-artifacts/NAME.png``."""
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        path = ARTIFACTS / f"{name}.png"
        metrics = self.driver.execute_cdp_cmd("Page.getLayoutMetrics", {})
        size = metrics["cssContentSize"]
        shot = self.driver.execute_cdp_cmd(
            "Page.captureScreenshot",
            {
                "format": "png",
                "captureBeyondViewport": True,
                "clip": {
                    "x": 0,
                    "y": 0,
                    "width": size["width"],
                    "height": min(size["height"], 8000),
                    "scale": 1,
                },
            },
        )
        path.write_bytes(base64.b64decode(shot["data"]))
        assert path.stat().st_size > 0, f"{path} is empty"
        saved_artifacts.append(path)
        return path


def format_violations(violations: list[dict[str, Any]]) -> str:
    lines = []
    for v in violations:
        lines.append(f"- {v.get('id')} ({v.get('impact')}): {v.get('help')} [{v.get('helpUrl')}]")
        for node in v.get("nodes", [])[:10]:
            target = node.get("target")
            summary = (node.get("failureSummary") or "").replace("\n", " ")
            lines.append(f"    {target}: {node.get('html', '')[:200]} -- {summary}")
    return "\n".join(lines)


@contextlib.contextmanager
def started_browser() -> Iterator[Browser]:
    """A browser for a ``with`` block (closed at the end)."""
    browser = Browser()
    try:
        yield browser
    finally:
        browser.close()
