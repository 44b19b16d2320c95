"""A PostgreSQL primary of its own with a real streaming standby, for the replication
metrics.

The session-wide ``postgres_server`` never gets a standby (its slot would hold WAL for
every other test); this module's primary is started for the tests here alone, with a
migrated database the application role owns and ``pg_monitor`` granted to that role
(so it may read ``pg_stat_replication``'s lag columns, as docs/observability.md says).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator

import pytest

from tests.support.servers import PostgresServer, ServerStartError, StandbyServer, start_server

DATABASE = "tickwheel_replicated"
SLOT = "tickwheel_test_standby"


@dataclasses.dataclass(frozen=True)
class Replicated:
    """A primary, its standby and the application's DSN on the primary."""

    primary: PostgresServer
    standby: StandbyServer
    dsn: str


@pytest.fixture(scope="module")
def replicated() -> Iterator[Replicated]:
    """A fresh primary and a standby streaming from it through the slot ``SLOT``;
    stopped (the slot dropped) after the module."""
    from tests.support.db import migrate_sync

    try:
        primary = start_server(PostgresServer)
    except ServerStartError as exc:
        pytest.fail(str(exc), pytrace=False)
    try:
        primary.ensure_app_role()
        primary.psql(f"GRANT pg_monitor TO {primary.app_user}")
        primary.psql(f"CREATE DATABASE {DATABASE} OWNER {primary.app_user}")
        migrate_sync(primary.app_dsn(DATABASE))
        try:
            standby = start_server(lambda: StandbyServer(primary, SLOT))
        except ServerStartError as exc:
            pytest.fail(str(exc), pytrace=False)
        try:
            _wait_streaming(standby)
            yield Replicated(primary, standby, primary.app_dsn(DATABASE))
        finally:
            standby.cleanup()
    finally:
        primary.cleanup()


def _wait_streaming(standby: StandbyServer, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not standby.streaming():
        if time.monotonic() > deadline:
            pytest.fail(
                f"the standby on port {standby.port} did not stream from slot "
                f"{standby.slot} within {timeout_s:.0f}s; log tail:\n{standby.log_tail()}",
                pytrace=False,
            )
        time.sleep(0.05)
