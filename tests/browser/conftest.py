"""Fixtures of the browser tests: one headless Chromium and one real ``tickwheel dev``
with real tasks for the whole session.

- ``browser``: a :class:`~tests.browser._chrome.Browser` with its cookies cleared
  before each test (so each test starts as a browser that has not logged in).
- ``dev``: the ``tickwheel dev --json`` process (facts: target, api_key, admin_token,
  tenant_id, ui_url); ``seeded``: what was submitted to it (:func:`_devserver.seed`).
- ``api`` / ``admin_api`` / ``other_api``: the gRPC API as the dev tenant, the admin
  and the second tenant see it.

A browser or server that cannot start FAILS the test with its log (never skips).
Screenshots go to build/test-artifacts/ (listed at the end of the run).
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.browser._chrome import Browser, BrowserStartError, saved_artifacts
from tests.browser._devserver import Api, DevProcess, Seeded, seed
from tests.support.servers import ServerStartError


@pytest.fixture(scope="session")
def _chromium() -> Iterator[Browser]:
    try:
        browser = Browser()
    except BrowserStartError as exc:
        pytest.fail(str(exc), pytrace=False)
    try:
        yield browser
    finally:
        browser.close()


@pytest.fixture
def browser(_chromium: Browser) -> Browser:
    """The session's browser, logged out (no cookies), on a blank page."""
    _chromium.driver.delete_all_cookies()
    return _chromium


@pytest.fixture(scope="session")
def _dev_dir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="tickwheel-browser-") as d:
        yield Path(d)


@pytest.fixture(scope="session")
def dev(_dev_dir: Path) -> Iterator[DevProcess]:
    """``tickwheel dev --json`` with its dashboard, on a fresh SQLite file."""
    proc = DevProcess(_dev_dir / "dev")
    try:
        proc.start()
    except ServerStartError as exc:
        pytest.fail(str(exc), pytrace=False)
    try:
        yield proc
    finally:
        proc.stop()


@pytest.fixture(scope="session")
def seeded(dev: DevProcess, _dev_dir: Path) -> Iterator[Seeded]:
    """Tasks in several states, a workflow, a schedule, an expectation, a 2nd tenant."""
    try:
        yield from seed(dev, _dev_dir)
    except ServerStartError as exc:
        pytest.fail(str(exc), pytrace=False)


@pytest.fixture(scope="session")
def api(dev: DevProcess) -> Iterator[Api]:
    """The API as the dev tenant's key sees it."""
    client = Api(dev.target, api_key=dev.api_key)
    yield client
    client.close()


@pytest.fixture(scope="session")
def admin_api(dev: DevProcess) -> Iterator[Api]:
    """The API as the admin token sees it (every tenant)."""
    client = Api(dev.target, admin_token=dev.admin_token)
    yield client
    client.close()


@pytest.fixture(scope="session")
def other_api(dev: DevProcess, seeded: Seeded) -> Iterator[Api]:
    """The API as the second tenant's key sees it."""
    client = Api(dev.target, api_key=seeded.other_api_key)
    yield client
    client.close()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if saved_artifacts:
        terminalreporter.write_sep("-", "browser test artifacts")
        for path in saved_artifacts:
            terminalreporter.write_line(str(path))
