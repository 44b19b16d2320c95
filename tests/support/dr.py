"""Disaster-recovery fixtures (issue 16): a fresh PostgreSQL primary with a real
streaming standby, the primary killed with SIGKILL, and ``tickwheel dr`` run as a real
process.

Each pair is its own (a promote ends the standby's life as a standby), made with
``pg_basebackup -R`` and a slot by :class:`~tests.support.servers.StandbyServer`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from tests.support.db import migrate_sync
from tests.support.processes import ServeProcess
from tests.support.servers import PostgresServer, StandbyServer, port_open, start_server
from tests.support.waiting import eventually

DATABASE = "tickwheel_dr"
TICKWHEEL = str(Path(sys.executable).with_name("tickwheel"))
STANDBY_NAME = "region_b"
"""The standby's application_name, as docs/regions.md's set-up gives it."""
SYNCHRONOUS_SETTING = f"FIRST 1 ({STANDBY_NAME})"
"""docs/regions.md's ``synchronous_standby_names`` (tests/integration/dr checks the docs
say so)."""


@dataclasses.dataclass
class Pair:
    """A primary, its standby, and the application's DSN on each."""

    primary: PostgresServer
    standby: StandbyServer

    @property
    def primary_dsn(self) -> str:
        """The application role's DSN on the primary."""
        return self.primary.app_dsn(DATABASE)

    @property
    def standby_dsn(self) -> str:
        """The application role's DSN on the standby (read-only until promoted)."""
        return self.standby.app_dsn(DATABASE)

    @property
    def standby_admin_dsn(self) -> str:
        """The superuser's DSN on the standby (pg_promote needs it, or a GRANT)."""
        return self.standby.dsn(DATABASE)

    def kill_primary(self) -> None:
        """SIGKILL the primary's process group (no shutdown checkpoint, no goodbye to
        the standby): a region lost. Its slot dies with it."""
        proc = self.primary.proc
        assert proc is not None
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        self.primary.proc = None
        self.standby._slot_created = False  # the slot was on the dead primary


@contextlib.contextmanager
def replicated_pair(
    slot: str = "tickwheel_dr", application_name: str = STANDBY_NAME
) -> Iterator[Pair]:
    """A migrated primary and a standby streaming from it, reporting itself as
    ``application_name`` (docs/regions.md's set-up); both removed after."""
    primary = start_server(PostgresServer)
    try:
        primary.ensure_app_role()
        primary.psql(f"GRANT pg_monitor TO {primary.app_user}")
        primary.psql(f"CREATE DATABASE {DATABASE} OWNER {primary.app_user}")
        migrate_sync(primary.app_dsn(DATABASE))
        standby = start_server(
            lambda: StandbyServer(primary, slot, application_name=application_name)
        )
        try:
            deadline = time.monotonic() + 60
            while not standby.streaming():
                if time.monotonic() > deadline:
                    raise AssertionError(
                        f"standby did not stream within 60 s:\n{standby.log_tail()}"
                    )
                time.sleep(0.05)
            yield Pair(primary, standby)
        finally:
            standby.cleanup()
    finally:
        primary.cleanup()


def tickwheel_json(*args: str) -> Any:
    """Run ``tickwheel <args> --json`` as a real process; its JSON output (fails with
    its stderr on a non-zero exit)."""
    result = subprocess.run(
        [TICKWHEEL, *args, "--json"], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, f"tickwheel {' '.join(args)} failed:\n{result.stderr}"
    return json.loads(result.stdout)


class StandbyServeProcess(ServeProcess):
    """``tickwheel serve --standby`` on a standby: ready once it holds its port (it
    says "serving on" only after the promote)."""

    def ready(self) -> bool:
        return port_open(self.host, self.port) and self.log_has("standby node on")

    def serving(self) -> bool:
        """Whether the node has opened its engine and serves (after the promote)."""
        return self.log_has("tickwheel serving on port")


async def synchronous_loss(pair: Pair, writers: int = 4, at_least: int = 500) -> tuple[int, int]:
    """One synchronous-mode failover: the primary made synchronous, ``writers``
    concurrent submitters inserting until the primary is SIGKILLed (after ``at_least``
    acknowledged inserts), then ``tickwheel dr promote``. Returns (acknowledged, present
    on the promoted standby): equal when no acknowledged submission was lost."""
    import asyncpg

    from scheduler.store import StoreConfig, open_store
    from scheduler.types import Tenant
    from tests.support.stores import new_task

    pair.primary.psql(f"ALTER SYSTEM SET synchronous_standby_names = '{SYNCHRONOUS_SETTING}'")
    pair.primary.psql("SELECT pg_reload_conf()")

    async def sync_state() -> str:
        return pair.primary.psql("SELECT sync_state FROM pg_stat_replication").strip()

    await eventually(sync_state, until=lambda s: s == "sync", what="a synchronous standby")
    store = await open_store(pair.primary_dsn, config=StoreConfig(preload_sweep_interval_s=0))
    acked: list[uuid.UUID] = []
    tenant = await store.create_tenant(Tenant(id=uuid.uuid4(), name="sync"))

    async def submitter() -> None:
        while True:
            now = datetime.now(UTC)
            try:
                results = await store.insert_tasks(
                    [new_task(tenant, now + timedelta(minutes=5)) for _ in range(10)], now
                )
            except Exception:  # the primary died mid-insert: not acknowledged
                return
            acked.extend(r.task.id for r in results)

    async def count() -> int:
        return len(acked)

    tasks = [asyncio.create_task(submitter(), name=f"submitter-{i}") for i in range(writers)]
    await eventually(count, until=lambda n: n >= at_least, what="inserts")
    pair.kill_primary()
    await asyncio.wait_for(asyncio.gather(*tasks), timeout=60)
    await store.close()
    report = tickwheel_json("dr", "promote", "--standby-dsn", pair.standby_admin_dsn)
    assert report["fenced"] is True
    conn = await asyncpg.connect(pair.standby_admin_dsn)
    try:
        present = await conn.fetchval("SELECT count(*) FROM tasks WHERE id = ANY($1)", acked)
    finally:
        await conn.close()
    return len(acked), int(present)
