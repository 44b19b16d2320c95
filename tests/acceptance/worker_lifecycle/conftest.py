"""A real ``tickwheel serve`` on this test's own PostgreSQL database (3 s leases), a
tenant with an API key, and ``tickwheel worker`` children started on demand."""

from __future__ import annotations

import dataclasses
import json
import signal
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from scheduler.client import AdminClient, Client
from tests.acceptance.worker_lifecycle.procs import HANDLERS, Proc
from tests.support.servers import free_port, port_open
from tests.support.waiting import eventually

ADMIN_TOKEN = "worker-lifecycle-admin-token"
LEASE_TTL_S = 3.0


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """On failure, attach the log tail of every process the test started."""
    outcome = yield
    report = outcome.get_result()
    procs: list[Proc] | None = getattr(item, "_worker_lifecycle_procs", None)
    if report.failed and procs:
        report.sections.append(("tickwheel logs", "\n".join(p.tail() for p in procs)))


@dataclasses.dataclass
class Lifecycle:
    """The served cluster of one test."""

    target: str
    api_key: str
    client: Client
    dir: Path
    procs: list[Proc]

    @property
    def events_path(self) -> str:
        """Where the handlers append their events (put it in the payload as ``log``)."""
        return str(self.dir / "events.jsonl")

    def events(self, event: str | None = None) -> list[dict[str, Any]]:
        """Events the handlers logged so far (of one kind, if given)."""
        path = Path(self.events_path)
        if not path.exists():
            return []
        lines = [json.loads(line) for line in path.read_text().splitlines() if line]
        return [e for e in lines if event is None or e["event"] == event]

    async def worker(self, name: str, *types: str, grace_s: float = 10.0, slots: int = 4) -> Proc:
        """Start ``tickwheel worker`` and wait until its stream is welcomed."""
        args = ["-v", "worker", "--worker-id", name, "--target", self.target]
        args += ["--api-key", self.api_key, "--grace-s", str(grace_s), "--slots", str(slots)]
        for t in types:
            args += ["--type", f"{t}={HANDLERS}:{t}"]
        proc = Proc(name, args, self.dir, TW_WORKER=name)
        self.procs.append(proc)
        await eventually(
            lambda: _value(proc.returncode() is not None or " connected (session" in proc.log()),
            what=f"worker {name} connected",
        )
        assert proc.returncode() is None, proc.tail()
        return proc

    async def cli(self, *args: str) -> Proc:
        """Run a one-shot ``tickwheel`` client command to its end."""
        proc = Proc(f"cli-{len(self.procs)}", [*args], self.dir)
        self.procs.append(proc)
        await eventually(lambda: _value(proc.returncode() is not None), what=f"tickwheel {args}")
        return proc


async def _value(value: Any) -> Any:
    return value


@pytest.fixture
async def lifecycle(
    pg_dsn: str, tmp_path: Path, request: pytest.FixtureRequest
) -> AsyncIterator[Lifecycle]:
    port = free_port()
    target = f"127.0.0.1:{port}"
    procs: list[Proc] = []
    request.node._worker_lifecycle_procs = procs
    server = Proc(
        "serve",
        [
            "serve",
            "--listen",
            target,
            "--postgres-dsn",
            pg_dsn,
            "--admin-token",
            ADMIN_TOKEN,
            "--lease-ttl-s",
            str(LEASE_TTL_S),
        ],
        tmp_path,
    )
    procs.append(server)
    try:
        await eventually(
            lambda: _value(server.returncode() is not None or port_open("127.0.0.1", port)),
            what="tickwheel serve listening",
        )
        assert server.returncode() is None, server.tail()
        async with await AdminClient.connect(target, admin_token=ADMIN_TOKEN) as admin:
            tenant = await admin.create_tenant("lifecycle")
            key = (await admin.create_api_key(tenant.id, "k")).secret
        client = await Client.connect(target, api_key=key)
        try:
            yield Lifecycle(target, key, client, tmp_path, procs)
        finally:
            await client.close()
    finally:
        for proc in reversed(procs):
            if proc is server and proc.returncode() is None:
                proc.signal(signal.SIGTERM)
                try:
                    proc.proc.wait(10)
                except Exception:
                    proc.stop()
            proc.stop()
