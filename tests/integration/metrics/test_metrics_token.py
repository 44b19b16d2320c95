"""``/metrics`` with a token (issue 36: it names every tenant's task types): a scrape
without ``Authorization: Bearer <token>``, or with another token, is a 401; with it, the
text format. Without a token it stays open, on loopback by default."""

from __future__ import annotations

import secrets

import aiohttp
import pytest
from prometheus_client import CollectorRegistry, Counter

from scheduler.metrics import MetricsConfig
from scheduler.metrics._http import MetricsServer


async def _scrape(url: str, headers: dict[str, str] | None = None) -> tuple[int, str]:
    async with aiohttp.ClientSession() as http, http.get(url, headers=headers) as resp:
        return resp.status, await resp.text()


async def test_a_token_is_required_when_configured() -> None:
    registry = CollectorRegistry()
    Counter("tickwheel_probe", "a probe", registry=registry).inc()
    token = secrets.token_urlsafe(24)
    server = MetricsServer(registry, token=token)
    await server.start()
    try:
        assert server.host == "127.0.0.1"
        status, body = await _scrape(server.url)
        assert status == 401
        assert "tickwheel_probe" not in body
        for wrong in (f"Bearer {token}x", token, f"Basic {token}", "Bearer "):
            assert (await _scrape(server.url, {"Authorization": wrong}))[0] == 401, wrong
        status, body = await _scrape(server.url, {"Authorization": f"Bearer {token}"})
        assert status == 200
        assert "tickwheel_probe_total 1.0" in body
    finally:
        await server.stop()


async def test_without_a_token_it_is_open_on_loopback() -> None:
    config = MetricsConfig()
    assert config.host == "127.0.0.1"
    assert config.token is None
    server = MetricsServer(CollectorRegistry())
    await server.start()
    try:
        assert (await _scrape(server.url))[0] == 200
    finally:
        await server.stop()


def test_a_short_token_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 16"):
        MetricsConfig(token="short")
