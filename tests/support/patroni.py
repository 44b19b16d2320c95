"""A real Patroni-managed PostgreSQL pair on loopback, for the HA test and drill (issue 42).

Two Patroni members (PyPI ``patroni``, etcd v3 as its DCS: the suite's etcd server)
each run a PostgreSQL of their own, as the unprivileged user the suite runs
PostgreSQL as (initdb refuses root). Patroni bootstraps the first, clones the second
from it and, with ``synchronous_mode``, makes it the synchronous standby. Every member
is its own process group, so ``kill9`` takes Patroni and its PostgreSQL together, as
a lost machine would.

Patroni's validator holds ``ttl`` at 20 s at least: a primary lost with its Patroni is
replaced once its leader key lapses, about ``ttl`` after its last renewal. A primary
whose PostgreSQL crashes under a live Patroni is failed over within a ``loop_wait``
(``primary_start_timeout`` 0).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

from tests.support.servers import (
    PostgresServer,
    ServerStartError,
    _pg_bindir,
    _tail,
    _unprivileged_ids,
    free_port,
)

TTL_S = 20
"""Patroni's least leader-key TTL (its validator refuses less)."""
LOOP_WAIT_S = 1
RETRY_TIMEOUT_S = 5
PATRONI = "/opt/tickwheel-patroni/bin/patroni"
"""Installed by ``scripts/install-deps`` (PyPI ``patroni``) where the unprivileged user
can run it (the project's interpreter may live under /root)."""


class PatroniMember:
    """One Patroni process and the PostgreSQL it manages."""

    def __init__(self, base: Path, name: str, scope: str, etcd: str) -> None:
        self.name = name
        self.dir = base / name
        self.dir.mkdir(parents=True)
        self.pg_port = free_port()
        self.api_port = free_port()
        self.log_path = self.dir / "patroni.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.ids = _unprivileged_ids()
        config = {
            "scope": scope,
            "namespace": "/tickwheel-test/",
            "name": name,
            "restapi": {
                "listen": f"127.0.0.1:{self.api_port}",
                "connect_address": f"127.0.0.1:{self.api_port}",
            },
            "etcd3": {"hosts": etcd},
            "bootstrap": {
                "dcs": {
                    "ttl": TTL_S,
                    "loop_wait": LOOP_WAIT_S,
                    "retry_timeout": RETRY_TIMEOUT_S,
                    # A crashed primary PostgreSQL is failed over at once rather than
                    # restarted in place: safe in synchronous_mode (docs/ha.md).
                    "primary_start_timeout": 0,
                    "maximum_lag_on_failover": 1048576,
                    "synchronous_mode": True,
                    "postgresql": {
                        "use_pg_rewind": False,
                        "parameters": {
                            "max_connections": 200,
                            "max_locks_per_transaction": 256,
                            "wal_level": "replica",
                            "max_wal_senders": 10,
                            "max_replication_slots": 10,
                        },
                    },
                },
                "initdb": [{"encoding": "UTF8"}, "no-locale", {"auth": "trust"}],
                "pg_hba": [
                    "local all all trust",
                    "host replication all 127.0.0.1/32 trust",
                    "host all all 127.0.0.1/32 trust",
                ],
            },
            "postgresql": {
                "listen": f"127.0.0.1:{self.pg_port}",
                "connect_address": f"127.0.0.1:{self.pg_port}",
                "data_dir": str(self.dir / "data"),
                "bin_dir": str(_pg_bindir()),
                "pgpass": str(self.dir / "pgpass"),
                "authentication": {
                    "superuser": {"username": "postgres", "password": "postgres"},
                    "replication": {"username": "replicator", "password": "replicator"},
                },
                "parameters": {"unix_socket_directories": str(self.dir)},
            },
            "tags": {"nofailover": False, "noloadbalance": False},
        }
        self.config_path = self.dir / "patroni.yml"
        # JSON is YAML: no YAML writer needed.
        self.config_path.write_text(json.dumps(config, indent=2))
        if self.ids is not None:
            os.chmod(self.dir, 0o755)
            for path in (self.dir, self.config_path):
                os.chown(path, *self.ids)

    def start(self) -> None:
        """Start the Patroni process (in a process group of its own)."""
        log = self.log_path.open("ab")
        extra: dict[str, object] = {}
        if self.ids is not None:
            uid, gid = self.ids
            extra = {"user": uid, "group": gid, "extra_groups": []}
        env = {**os.environ, "HOME": str(self.dir)}
        try:
            self.proc = subprocess.Popen(
                [PATRONI, str(self.config_path)],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=self.dir,
                env=env,
                start_new_session=True,
                **extra,  # type: ignore[call-overload]
            )
        finally:
            log.close()

    def role(self) -> str | None:
        """``primary``, ``replica`` (and ``sync`` for the synchronous one), or None."""
        for path, name in (("primary", "primary"), ("sync", "sync"), ("replica", "replica")):
            with contextlib.suppress(urllib.error.URLError, OSError, TimeoutError):
                url = f"http://127.0.0.1:{self.api_port}/{path}"
                with urllib.request.urlopen(url, timeout=1) as reply:
                    if reply.status == 200:
                        return name
        return None

    def kill9(self) -> None:
        """kill -9 the member's whole process group: Patroni and its PostgreSQL."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        # PostgreSQL's children may have their own group: end whatever still runs there.
        _kill_postmaster(self.dir / "data")

    def kill9_postgres(self) -> None:
        """kill -9 the member's PostgreSQL (its postmaster's process group: every
        backend), leaving Patroni running, as a crashed or OOM-killed database would."""
        pid = _postmaster_pid(self.dir / "data")
        if pid is None:
            raise AssertionError(f"{self.name}: no postmaster.pid\n{self.log_tail()}")
        with contextlib.suppress(ProcessLookupError):
            if os.getpgid(pid) == pid:
                os.killpg(pid, signal.SIGKILL)
            else:
                os.kill(pid, signal.SIGKILL)

    def stop(self) -> None:
        """Stop Patroni (which stops its PostgreSQL); safe twice."""
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            _kill_postmaster(self.dir / "data")
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        _kill_postmaster(self.dir / "data")

    def log_tail(self, lines: int = 40) -> str:
        return _tail(self.log_path, lines)


def _postmaster_pid(data: Path) -> int | None:
    with contextlib.suppress(OSError, ValueError, IndexError):
        return int((data / "postmaster.pid").read_text().splitlines()[0])
    return None


def _kill_postmaster(data: Path) -> None:
    pid = _postmaster_pid(data)
    if pid is not None:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


class PatroniPair:
    """Two members; :attr:`dsn` names both hosts with ``target_session_attrs``."""

    def __init__(self, etcd_endpoint: str) -> None:
        self.base = Path(tempfile.mkdtemp(prefix="tickwheel-patroni-"))
        os.chmod(self.base, 0o755)
        scope = f"tw{uuid.uuid4().hex[:10]}"
        self.members = [PatroniMember(self.base, f"m{i}", scope, etcd_endpoint) for i in (1, 2)]

    def explain(self) -> str:
        return "\n".join(f"----- {m.name}\n{m.log_tail()}" for m in self.members)

    def wait(self, until: str, timeout_s: float = 90.0) -> dict[str, str | None]:
        """Wait until the roles satisfy ``until``: ``"pair"`` (a primary and a sync
        standby) or ``"primary"`` (some live member is primary)."""
        deadline = time.monotonic() + timeout_s
        roles: dict[str, str | None] = {}
        while time.monotonic() < deadline:
            roles = {m.name: m.role() for m in self.members if m.proc is not None}
            values = list(roles.values())
            if until == "pair" and "primary" in values and "sync" in values:
                return roles
            if until == "primary" and "primary" in values:
                return roles
            time.sleep(0.2)
        raise ServerStartError(
            f"patroni: no {until} within {timeout_s} s: {roles}\n{self.explain()}"
        )

    def new_primary(self, old: PatroniMember, timeout_s: float = 90.0) -> PatroniMember:
        """Wait until a member other than ``old`` is the primary; that member."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for m in self.members:
                if m is not old and m.proc is not None and m.role() == "primary":
                    return m
            time.sleep(0.1)
        raise ServerStartError(f"patroni: no new primary within {timeout_s} s\n{self.explain()}")

    def primary(self) -> PatroniMember:
        for m in self.members:
            if m.proc is not None and m.role() == "primary":
                return m
        raise AssertionError("no primary")

    def dsn(self, user: str, database: str) -> str:
        hosts = ",".join(f"127.0.0.1:{m.pg_port}" for m in self.members)
        return f"postgresql://{user}@{hosts}/{database}?target_session_attrs=read-write"

    def psql(self, sql: str, database: str = "postgres") -> str:
        """Run SQL on the primary as the superuser."""
        m = self.primary()
        result = subprocess.run(
            [
                str(_pg_bindir() / "psql"),
                "-X",
                "-q",
                "-A",
                "-t",
                "-v",
                "ON_ERROR_STOP=1",
                "-h",
                "127.0.0.1",
                "-p",
                str(m.pg_port),
                "-U",
                "postgres",
                "-d",
                database,
                "-c",
                sql,
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        if result.returncode != 0:
            raise ServerStartError(f"psql failed: {result.stderr}")
        return result.stdout

    def cleanup(self) -> None:
        for m in self.members:
            m.stop()
        shutil.rmtree(self.base, ignore_errors=True)


@contextlib.contextmanager
def patroni_pair(etcd_endpoint: str) -> Iterator[PatroniPair]:
    """A running pair (a primary and its synchronous standby), removed at the end."""
    pair = PatroniPair(etcd_endpoint)
    try:
        pair.members[0].start()
        pair.wait("primary")
        pair.members[1].start()
        pair.wait("pair")
        yield pair
    finally:
        pair.cleanup()


APP_USER = PostgresServer.app_user


def app_database(pair: PatroniPair, database: str = "tickwheel") -> str:
    """Create the application's role and a migrated database on the primary; the DSN
    that names both members (the new primary is found after a failover)."""
    from tests.support.db import migrate_sync

    pair.psql(
        "DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = "
        f"'{APP_USER}') THEN CREATE ROLE {APP_USER} LOGIN NOSUPERUSER NOBYPASSRLS; "
        f"END IF; END $$; ALTER ROLE {APP_USER} SET tickwheel.tenant = '*'"
    )
    pair.psql(f"CREATE DATABASE {database} OWNER {APP_USER}")
    dsn = pair.dsn(APP_USER, database)
    migrate_sync(dsn)
    return dsn
