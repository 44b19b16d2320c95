"""Tickwheel itself as real child processes: ``tickwheel serve`` and ``tickwheel worker``.

Acceptance tests and benchmarks start the server and workers exactly as an operator
would, each in its own process group with its own log file, and drive them with real
signals: SIGTERM (graceful stop and drain), SIGKILL (``kill -9``), SIGSTOP / SIGCONT
(a frozen process: the seed's 45-second GC pause).

:class:`ProcessGroup` owns every process a test starts: on exit it stops them all, and
:meth:`ProcessGroup.explain` renders every log tail for a failure message.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from tests.support.servers import ServerProcess, port_open

REPO_ROOT = Path(__file__).resolve().parents[2]
TICKWHEEL = str(Path(sys.executable).with_name("tickwheel"))
ADMIN_TOKEN = "acceptance-admin-token-0123456789"


def _child_env(extra: Mapping[str, str] | None) -> dict[str, str]:
    env = dict(os.environ)
    # Handler modules live in the repository's tests/ package.
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
    env["PYTHONUNBUFFERED"] = "1"
    # Warnings are errors in the test run; children must not inherit that.
    env.pop("PYTHONWARNINGS", None)
    env.update(extra or {})
    return env


class TickwheelProcess(ServerProcess):
    """One ``tickwheel`` child process with a log file and signal helpers."""

    name = "tickwheel"

    def __init__(self, base_dir: Path, name: str, env: Mapping[str, str] | None = None) -> None:
        self.name = name
        super().__init__(base_dir)
        self.env = _child_env(env)

    def popen_kwargs(self) -> dict[str, object]:
        return {"env": self.env}

    @property
    def pid(self) -> int:
        """The child's pid (it leads its own process group)."""
        assert self.proc is not None, f"{self.name} is not running"
        return self.proc.pid

    def running(self) -> bool:
        """Whether the process is alive (a SIGSTOPped process counts as alive)."""
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> None:
        """SIGTERM (SIGCONT first, in case it is frozen), then SIGKILL after 20 s."""
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGCONT)
        super().stop()

    def log(self) -> str:
        """The whole log so far."""
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def log_has(self, pattern: str) -> bool:
        """Whether a line of the log matches the regular expression ``pattern``."""
        return re.search(pattern, self.log(), re.MULTILINE) is not None


class ServeProcess(TickwheelProcess):
    """``tickwheel serve`` on PostgreSQL, on a free loopback port."""

    def __init__(
        self,
        base_dir: Path,
        postgres_dsn: str,
        *,
        name: str = "serve",
        lease_ttl_s: float = 3.0,
        extra_args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(base_dir, name, env)
        self.postgres_dsn = postgres_dsn
        self.lease_ttl_s = lease_ttl_s
        self.extra_args = tuple(extra_args)

    @property
    def target(self) -> str:
        """``host:port`` for clients and workers."""
        return f"{self.host}:{self.port}"

    def command(self) -> Sequence[str]:
        return [
            TICKWHEEL,
            "-v",
            "serve",
            "--postgres-dsn",
            self.postgres_dsn,
            "--listen",
            self.target,
            "--admin-token",
            ADMIN_TOKEN,
            "--lease-ttl-s",
            str(self.lease_ttl_s),
            *self.extra_args,
        ]

    def _spawn(self) -> None:
        # A restart appends to the same log: readiness counts this run's lines only.
        self._log_mark = self.log_path.stat().st_size if self.log_path.exists() else 0
        super()._spawn()

    def ready(self) -> bool:
        # The port is bound before the engine starts (a node that cannot serve claims
        # no shard), so an open port is not enough: the CLI says when it serves.
        if not port_open(self.host, self.port):
            return False
        return "tickwheel serving on port" in self.log()[getattr(self, "_log_mark", 0) :]


class WorkerProcess(TickwheelProcess):
    """``tickwheel worker`` running handlers from a module under ``tests/``."""

    def __init__(
        self,
        base_dir: Path,
        target: str,
        api_key: str,
        types: Mapping[str, str],
        *,
        name: str = "worker",
        slots: int = 10,
        extra_args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(base_dir, name, {"TW_WORKER_NAME": name, **(env or {})})
        self.target = target
        self.api_key = api_key
        self.types = dict(types)
        self.slots = slots
        self.extra_args = tuple(extra_args)

    def command(self) -> Sequence[str]:
        type_args = [a for t, spec in self.types.items() for a in ("--type", f"{t}={spec}")]
        return [
            TICKWHEEL,
            "-v",
            "worker",
            *type_args,
            "--slots",
            str(self.slots),
            "--worker-id",
            self.name,
            "--target",
            self.target,
            "--api-key",
            self.api_key,
            "--grace-s",
            "2",
            *self.extra_args,
        ]

    def start(self, attempts: int = 1) -> None:
        """Start and wait until the server welcomed the worker's stream."""
        self.prepare()
        self._spawn()
        self._wait_ready()

    def ready(self) -> bool:
        return self.log_has(rf"worker {re.escape(self.name)} connected")


class ProcessGroup:
    """Every Tickwheel process of one test; all stopped at the end, logs on failure."""

    def __init__(self, base_dir: Path) -> None:
        self.dir = base_dir
        self.dir.mkdir(parents=True, exist_ok=True)
        self.procs: list[TickwheelProcess] = []

    def serve(self, postgres_dsn: str, **kw: object) -> ServeProcess:
        """Start ``tickwheel serve`` and wait until it listens."""
        proc = ServeProcess(self.dir / "serve", postgres_dsn, **kw)  # type: ignore[arg-type]
        self.procs.append(proc)
        proc.start()
        return proc

    def worker(
        self, target: str, api_key: str, types: Mapping[str, str], *, name: str, **kw: object
    ) -> WorkerProcess:
        """Start ``tickwheel worker`` and wait until it is connected."""
        proc = WorkerProcess(
            self.dir / name,
            target,
            api_key,
            types,
            name=name,
            **kw,  # type: ignore[arg-type]
        )
        self.procs.append(proc)
        proc.start()
        return proc

    def explain(self, lines: int = 30) -> str:
        """The log tail of every process, for an assertion message."""
        parts = []
        for p in self.procs:
            state = "running" if p.running() else "stopped"
            parts.append(f"----- {p.name} ({state}) {p.log_path}\n{p.log_tail(lines)}")
        return "\n".join(parts)

    def stop_all(self) -> None:
        """Stop every process (workers first, so they drain against a live server)."""
        for p in sorted(self.procs, key=lambda p: isinstance(p, ServeProcess)):
            p.stop()


@contextlib.contextmanager
def process_group(base_dir: Path) -> Iterator[ProcessGroup]:
    """A :class:`ProcessGroup` that is always cleaned up; on an exception, the logs of
    every process are attached to it (pytest prints them with the failure)."""
    group = ProcessGroup(base_dir)
    try:
        yield group
    except BaseException as exc:
        exc.add_note(group.explain())
        raise
    finally:
        group.stop_all()


class CommandProcess(TickwheelProcess):
    """Any long-running ``tickwheel`` command, ready when its log matches ``ready_log``."""

    def __init__(self, base_dir: Path, name: str, args: Sequence[str], *, ready_log: str) -> None:
        super().__init__(base_dir, name)
        self.args = tuple(args)
        self.ready_log = ready_log

    def command(self) -> Sequence[str]:
        return [TICKWHEEL, *self.args]

    def start(self, attempts: int = 1) -> None:
        """Start once (the command names its own port) and wait until ready."""
        self.prepare()
        self._spawn()
        self._wait_ready()

    def ready(self) -> bool:
        return self.log_has(self.ready_log)


def run_cli_result(
    args: Sequence[str], *, timeout_s: float = 60.0
) -> subprocess.CompletedProcess[str]:
    """Run a ``tickwheel`` command that is expected to exit by itself (e.g. a refused
    start); fails the test when it is still running after ``timeout_s``."""
    try:
        return subprocess.run(
            [TICKWHEEL, *args],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            env=_child_env(None),
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(
            f"tickwheel {' '.join(args)} was still running after {timeout_s} s:\n"
            f"{exc.stdout!r}\n{exc.stderr!r}"
        ) from None


def run_cli(args: Sequence[str], *, timeout_s: float = 60.0) -> str:
    """Run a one-shot ``tickwheel`` command; its stdout, or an error with its output."""
    result = subprocess.run(
        [TICKWHEEL, *args],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        env=_child_env(None),
        stdin=subprocess.DEVNULL,
    )
    if result.returncode != 0:
        raise AssertionError(
            f"tickwheel {' '.join(args)} exited {result.returncode}:\n"
            f"{result.stdout}\n{result.stderr}"
        )
    return result.stdout
