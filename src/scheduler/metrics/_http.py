"""The ``/metrics`` HTTP endpoint: an aiohttp server on the process's event loop.

Serving on the loop (not in a thread) lets the collectors read the engine's and the
worker's counters without locks: a scrape runs between two loop steps, so no dict
changes size under it. Owns the aiohttp runner; knows nothing of what it exposes.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
from collections.abc import Iterator

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import Metric

log = logging.getLogger("tickwheel.metrics")


class _Collected:
    """Families already collected, posing as a registry for ``generate_latest``."""

    def __init__(self, families: list[Metric]) -> None:
        self._families = families

    def collect(self) -> Iterator[Metric]:
        return iter(self._families)


class MetricsServer:
    """Serves ``registry`` in the Prometheus text format at ``/metrics``.

    ``start``/``stop`` are idempotent; ``stop`` is safe before ``start``."""

    def __init__(
        self,
        registry: CollectorRegistry,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        token: str | None = None,
    ):
        self.registry = registry
        self._token = token
        self.host = host
        self._want_port = port
        self.port = 0
        """The bound port (0 before start)."""
        self._runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        """``http://host:port/metrics`` (a wildcard host shown as 127.0.0.1)."""
        host = "127.0.0.1" if self.host in ("", "0.0.0.0", "::") else self.host
        if ":" in host:
            host = f"[{host}]"
        return f"http://{host}:{self.port}/metrics"

    def _authorized(self, request: web.Request) -> bool:
        if self._token is None:
            return True
        given = request.headers.get("Authorization", "")
        return hmac.compare_digest(given.encode(), f"Bearer {self._token}".encode())

    async def _handle(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return web.Response(
                status=401,
                text="401: /metrics needs Authorization: Bearer <the metrics token>\n",
                headers={"WWW-Authenticate": 'Bearer realm="tickwheel-metrics"'},
            )
        # Collect on the loop (the collectors read live counters), format in a thread:
        # the text of a few thousand series takes tens of ms the loop need not wait for.
        families = _Collected(list(self.registry.collect()))
        body = await asyncio.to_thread(generate_latest, families)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def start(self) -> None:
        """Bind and serve (OSError naming the metrics port when it is taken)."""
        if self._runner is not None:
            return
        app = web.Application()
        app.router.add_get("/metrics", self._handle)
        runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await runner.setup()
        try:
            site = web.TCPSite(runner, self.host, self._want_port)
            await site.start()
        except OSError as exc:
            await runner.cleanup()
            where = f"{self.host}:{self._want_port}"
            raise OSError(exc.errno, f"metrics port {where}: {exc.strerror or exc}") from exc
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        self.port = int(runner.addresses[0][1])
        log.info("metrics on %s", self.url)

    async def stop(self) -> None:
        """Stop serving; safe twice or before start."""
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()
