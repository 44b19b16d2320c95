"""``tickwheel dev``, ``serve`` and ``worker`` serve ``/metrics`` as real processes.

``dev`` by default (its address in ``dev --json``'s ``metrics_url``), ``serve`` through
``TICKWHEEL_METRICS_PORT``, ``worker`` through ``--metrics-port``; each scraped over HTTP.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
from collections.abc import Iterator, Sequence
from pathlib import Path

from tests.support.metrics import scrape
from tests.support.processes import TICKWHEEL
from tests.support.servers import free_port
from tests.support.waiting import eventually


@contextlib.contextmanager
def process(
    args: Sequence[str], log: Path, env: dict[str, str] | None = None
) -> Iterator[subprocess.Popen[str]]:
    with log.open("w") as err:
        proc = subprocess.Popen(
            [TICKWHEEL, *args],
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            env={**os.environ, **(env or {})},
            cwd=log.parent,
        )
        try:
            yield proc
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(20)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(5)
            if proc.stdout is not None:
                proc.stdout.close()


async def _scraped(url: str, family: str, log: Path) -> None:
    async def probe() -> bool:
        try:
            return any(name.startswith(family) for name in await scrape(url))
        except OSError:
            return False

    await eventually(probe, timeout_s=30, what=f"{url} to serve {family} (log: {log})")


async def test_dev_serve_and_worker_expose_metrics(tmp_path: Path) -> None:
    with process(
        ["dev", "--json", "--listen", "127.0.0.1:0", "--db", str(tmp_path / "dev.db")],
        tmp_path / "dev.log",
    ) as dev:
        assert dev.stdout is not None
        facts = json.loads(dev.stdout.readline())
        assert facts["metrics_url"].startswith("http://127.0.0.1:")
        await _scraped(facts["metrics_url"], "tickwheel_wheel_timers", tmp_path / "dev.log")

        worker_port = free_port()
        worker_args = ["worker", "--type", "t=os:getcwd", "--metrics-port", str(worker_port)]
        with process(
            [*worker_args, "--target", facts["target"], "--api-key", facts["api_key"]],
            tmp_path / "worker.log",
        ):
            await _scraped(
                f"http://127.0.0.1:{worker_port}/metrics",
                "tickwheel_worker_slots_free",
                tmp_path / "worker.log",
            )

    serve_port = free_port()
    with process(
        ["serve", "--listen", "127.0.0.1:0", "--store", f"sqlite:///{tmp_path}/serve.db"],
        tmp_path / "serve.log",
        env={"TICKWHEEL_METRICS_PORT": str(serve_port)},
    ):
        await _scraped(
            f"http://127.0.0.1:{serve_port}/metrics",
            "tickwheel_queue_depth",
            tmp_path / "serve.log",
        )
    assert (
        f"metrics on http://127.0.0.1:{serve_port}/metrics" in (tmp_path / "serve.log").read_text()
    )
