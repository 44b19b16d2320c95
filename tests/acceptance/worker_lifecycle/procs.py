"""Small process helpers for the worker lifecycle tests: ``tickwheel serve`` and
``tickwheel worker`` as real children, each with a log file and signal helpers."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[3]
TICKWHEEL = str(Path(sys.executable).with_name("tickwheel"))
HANDLERS = "tests.acceptance.worker_lifecycle.handlers"


class Proc:
    """One ``tickwheel`` child in its own process group, logging to ``log_path``."""

    def __init__(self, name: str, args: Sequence[str], log_dir: Path, **env: str) -> None:
        self.name = name
        self.log_path = log_dir / f"{name}.log"
        child_env = dict(os.environ)
        child_env.pop("PYTHONWARNINGS", None)  # the test run's warnings-as-errors
        child_env["PYTHONUNBUFFERED"] = "1"
        child_env["PYTHONPATH"] = str(REPO_ROOT)
        child_env.update(env)
        with self.log_path.open("wb") as log:
            self.proc = subprocess.Popen(
                [TICKWHEEL, *args],
                cwd=REPO_ROOT,
                env=child_env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def log(self) -> str:
        """Everything the process wrote so far."""
        return self.log_path.read_text(errors="replace")

    def signal(self, sig: signal.Signals) -> None:
        """Send ``sig`` to the process (not its group: handler threads share it)."""
        self.proc.send_signal(sig)

    def returncode(self) -> int | None:
        """The exit code, or None while it runs."""
        return self.proc.poll()

    def stop(self) -> None:
        """Kill it if it still runs (test teardown)."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def tail(self, lines: int = 30) -> str:
        """The last lines of the log, for failure messages."""
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        return f"--- {self.name} ---\n" + "\n".join(text.splitlines()[-lines:])
