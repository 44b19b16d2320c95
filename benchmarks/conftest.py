"""Benchmark fixtures: reuse the test suite's real servers and print a ratio table.

Benchmarks run only on request (``pytest benchmarks/ --benchmark-only``); figures are
reported as ratios against baselines measured in the same run, since the machine is shared.
"""

from __future__ import annotations

import contextlib
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.conftest import etcd_server, redis_server
from tests.support.db import migrate_sync
from tests.support.servers import PostgresServer, start_server

__all__ = ["etcd_server", "redis_server"]

#: name -> figures, filled by the benchmarks, printed at the end of the session.
RESULTS: dict[str, dict[str, float]] = {}


@pytest.fixture(scope="session")
def wheel_results() -> dict[str, dict[str, float]]:
    """Where the wheel benchmarks put their figures for the summary table."""
    return RESULTS


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not RESULTS:
        return
    write = terminalreporter.write_line
    write("")
    write("timing wheel: 1,000,000 timers over 1 h, 80% cancelled, 20% fired")
    write(
        f"{'variant':<18}{'ns/timer':>10}{'timers/s':>12}{'add/s':>12}{'cancel/s':>12}"
        f"{'expire/s':>12}{'B/timer':>9}"
    )
    for name, r in RESULTS.items():
        write(
            f"{name:<18}{r['ns_per_timer']:>10.0f}{r['timers_per_s']:>12,.0f}"
            f"{r['add_per_s']:>12,.0f}{r['cancel_per_s']:>12,.0f}{r['expire_per_s']:>12,.0f}"
            f"{r.get('bytes_per_timer', float('nan')):>9.1f}"
        )
    for wheel in ("wheel_add", "wheel_add_many"):
        if wheel not in RESULTS:
            continue
        base = RESULTS[wheel]["ns_per_timer"]
        for other in ("heapq", "asyncio", "redis_zset"):
            if other in RESULTS:
                ratio = RESULTS[other]["ns_per_timer"] / base
                write(f"{other} / {wheel} cost per timer: {ratio:.1f}x")


# -- the vertical slice (benchmarks/test_slice.py) -------------------------------------


@pytest.fixture(scope="session")
def slice_postgres() -> Iterator[PostgresServer]:
    """A PostgreSQL server of the slice benchmarks' own (fsync on, as in the tests)."""
    server = start_server(PostgresServer)
    try:
        yield server
    finally:
        server.cleanup()


@pytest.fixture
def slice_dsn(slice_postgres: PostgresServer) -> Iterator[str]:
    """A fresh migrated database for one slice benchmark, dropped afterwards; owned by
    the application role (not a superuser), so row-level security applies as in
    production."""
    with slice_database(slice_postgres) as dsn:
        yield dsn


@pytest.fixture
def new_slice_database(
    slice_postgres: PostgresServer,
) -> Callable[[], contextlib.AbstractContextManager[str]]:
    """Make more fresh databases like ``slice_dsn`` (a context manager per database)."""
    return lambda: slice_database(slice_postgres)


@contextlib.contextmanager
def slice_database(server: PostgresServer) -> Iterator[str]:
    """Create and migrate a database as the application role; drop it afterwards."""
    name = f"slice_{uuid.uuid4().hex[:10]}"
    server.ensure_app_role()
    server.psql(f"CREATE DATABASE {name} OWNER {server.app_user}")
    try:
        dsn = server.app_dsn(name)
        migrate_sync(dsn)
        yield dsn
    finally:
        server.psql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
