"""Fixtures of the dashboard tests: an embedded node (SQLite in memory, a real gRPC
server on a free port) with two tenants, and the dashboard app in an aiohttp test
client logged in through its login link (so it acts with the first tenant's API key and
the admin token, as ``tickwheel dev``'s link does)."""

from __future__ import annotations

import dataclasses
import re
import uuid
from collections.abc import AsyncIterator
from html.parser import HTMLParser

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from scheduler.client import Client
from scheduler.engine import EngineConfig
from scheduler.testing import LocalEnvironment, start_local
from scheduler.ui import UIConfig, create_app
from scheduler.ui._app import login_path

VOID = {"input", "br", "meta", "link", "img", "hr", "col", "source"}


class _ByTestId(HTMLParser):
    """Text and attributes of every element with a ``data-testid``."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: dict[str, list[dict[str, str]]] = {}
        self._open: list[tuple[str, dict[str, str], list[str]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag in VOID:
            if "data-testid" in a:
                self.found.setdefault(a["data-testid"], []).append({**a, "_text": ""})
            return
        self._open.append((tag, a, []))

    def handle_endtag(self, tag: str) -> None:
        while self._open:
            t, a, parts = self._open.pop()
            text = "".join(parts)
            if self._open:
                self._open[-1][2].append(text)
            if "data-testid" in a:
                self.found.setdefault(a["data-testid"], []).append({**a, "_text": text})
            if t == tag:
                break

    def handle_data(self, data: str) -> None:
        if self._open:
            self._open[-1][2].append(data)


@dataclasses.dataclass
class Page:
    status: int
    html: str
    url: str

    def all(self, testid: str) -> list[dict[str, str]]:
        parser = _ByTestId()
        parser.feed(self.html)
        parser.close()
        return parser.found.get(testid, [])

    def has(self, testid: str) -> bool:
        return bool(self.all(testid))

    def text(self, testid: str) -> str:
        found = self.all(testid)
        assert found, f"no element data-testid={testid!r} in {self.url}"
        return found[0]["_text"].strip()

    @property
    def csrf(self) -> str:
        match = re.search(r'name="csrf" value="([^"]+)"', self.html)
        assert match, "no CSRF field on the page"
        return match.group(1)


@dataclasses.dataclass
class Dashboard:
    env: LocalEnvironment
    http: TestClient  # type: ignore[type-arg]
    other_key: str
    other_tenant: uuid.UUID
    other: Client

    async def get(self, path: str, **kw: object) -> Page:
        resp = await self.http.get(path, **kw)  # type: ignore[arg-type]
        return Page(resp.status, await resp.text(), str(resp.url))

    async def post(self, path: str, data: object, **kw: object) -> Page:
        resp = await self.http.post(path, data=data, **kw)  # type: ignore[arg-type]
        return Page(resp.status, await resp.text(), str(resp.url))


async def log_in_with_link(
    http: TestClient | aiohttp.ClientSession,  # type: ignore[type-arg]
    app: web.Application,
) -> None:
    """Open the app's login link as a browser would: the login page, then the form
    its script posts with the fragment's token."""
    path = login_path(app)
    assert path is not None, "the dashboard was started without credentials"
    token = path.partition("#token=")[2]
    page = await http.get("/login")
    match = re.search(r'name="csrf" value="([^"]+)"', await page.text())
    assert match, "no CSRF field on the login page"
    resp = await http.post(
        "/login", data={"csrf": match.group(1), "link_token": token}, allow_redirects=False
    )
    assert resp.status == 303, await resp.text()


@pytest.fixture
async def dashboard() -> AsyncIterator[Dashboard]:
    # Exact counts (no count cache): the pages are compared with counts just taken.
    async with start_local(tenant_name="ui-a", engine=EngineConfig(count_cache_ttl_s=0)) as env:
        other = await env.admin.create_tenant("ui-b")
        other_key = (await env.admin.create_api_key(other.id, "ui-b")).secret
        other_client = await Client.connect(env.target, api_key=other_key)
        app = create_app(
            UIConfig(target=env.target, api_key=env.api_key, admin_token=env.admin_token)
        )
        try:
            async with TestClient(TestServer(app)) as http:
                await log_in_with_link(http, app)
                yield Dashboard(env, http, other_key, uuid.UUID(str(other.id)), other_client)
        finally:
            await other_client.close()
