"""Session fixtures: real throwaway servers, started lazily, isolated per test.

- ``postgres_server`` / ``pg_dsn``: one PostgreSQL cluster per session; every test that
  asks for ``pg_dsn`` gets its own database cloned from a migrated template.
- ``redis_server`` + ``redis_prefix``, ``etcd_server`` + ``etcd_prefix``,
  ``kafka_server`` + ``kafka_prefix``: one server per session, a unique key/topic prefix
  per test.

A server that cannot start FAILS the test with the tail of its log.
"""

from __future__ import annotations

import itertools
import os
import uuid
from collections.abc import Callable, Iterator
from typing import TypeVar

import pytest

from tests.support.clock import FakeClock
from tests.support.servers import (
    EtcdServer,
    KafkaServer,
    PostgresServer,
    RedisServer,
    ServerProcess,
    ServerStartError,
    start_server,
)

# The harness forks this process to start servers (initdb, pg_basebackup: as another
# user, so a real fork, not vfork) while the tests' gRPC channels have threads inside
# gRPC. gRPC's fork handlers then give up mid-way ("Other threads are currently calling
# into gRPC, skipping fork() handlers") and the child can die before its exec (initdb
# exited with only gRPC's epoll error once in a full run). No child here uses gRPC: each
# execs at once, so the handlers are not needed. This runs before any test module
# imports gRPC (nothing imported above does).
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")

S = TypeVar("S", bound=ServerProcess)
TEMPLATE_DB = "tickwheel_template"
_db_counter = itertools.count()


def _session_server(factory: Callable[[], S]) -> Iterator[S]:
    try:
        server = start_server(factory)
    except ServerStartError as exc:
        pytest.fail(str(exc), pytrace=False)
    try:
        yield server
    finally:
        server.cleanup()


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """A real PostgreSQL server for the whole session."""
    yield from _session_server(PostgresServer)


@pytest.fixture(scope="session")
def pg_template(postgres_server: PostgresServer) -> str:
    """Name of a database with every migration applied; tests clone it."""
    from tests.support.db import migrate_sync

    postgres_server.ensure_app_role()
    owner = postgres_server.app_user
    postgres_server.psql(f"CREATE DATABASE {TEMPLATE_DB} OWNER {owner}")
    migrate_sync(postgres_server.app_dsn(TEMPLATE_DB))
    return TEMPLATE_DB


@pytest.fixture
def pg_dsn(postgres_server: PostgresServer, pg_template: str) -> Iterator[str]:
    """DSN of a fresh, migrated database of this test's own, as the application role
    that owns its tables (not a superuser: row-level security applies)."""
    name = f"t_{next(_db_counter)}_{uuid.uuid4().hex[:8]}"
    owner = postgres_server.app_user
    postgres_server.psql(f"CREATE DATABASE {name} TEMPLATE {pg_template} OWNER {owner}")
    try:
        yield postgres_server.app_dsn(name)
    finally:
        postgres_server.psql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture
def pg_empty_dsn(postgres_server: PostgresServer) -> Iterator[str]:
    """DSN of a fresh database with no schema at all (for migration tests), as the
    application role that owns it."""
    name = f"e_{next(_db_counter)}_{uuid.uuid4().hex[:8]}"
    postgres_server.ensure_app_role()
    postgres_server.psql(f"CREATE DATABASE {name} OWNER {postgres_server.app_user}")
    try:
        yield postgres_server.app_dsn(name)
    finally:
        postgres_server.psql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    """A real redis-server for the whole session."""
    yield from _session_server(RedisServer)


@pytest.fixture(scope="session")
def etcd_server() -> Iterator[EtcdServer]:
    """A real single-member etcd for the whole session."""
    yield from _session_server(EtcdServer)


@pytest.fixture(scope="session")
def kafka_server() -> Iterator[KafkaServer]:
    """A real Kafka-protocol broker (Tansu) for the whole session."""
    yield from _session_server(KafkaServer)


def _prefix() -> str:
    return f"tw-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def redis_prefix() -> str:
    """A key prefix of this test's own."""
    return _prefix()


@pytest.fixture
def etcd_prefix() -> str:
    """A key prefix of this test's own."""
    return f"/{_prefix()}"


@pytest.fixture
def kafka_prefix() -> str:
    """A topic prefix of this test's own."""
    return _prefix()


@pytest.fixture
def clock() -> FakeClock:
    """A clock that moves only when the test says (``FakeClock``): the engine's, and so
    the store's, time in the engine tests."""
    return FakeClock()
