"""The CLI's event loop (``TICKWHEEL_EVENT_LOOP``): by default each command's own
choice (uvloop for ``tickwheel worker`` where installed, asyncio for the others), the
one named when set, and a clear error for anything else."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from typing import Any

import pytest
import uvloop

from scheduler.cli._runner import EVENT_LOOP_ENV, event_loop_factory, run_coro


async def _loop_type() -> type:
    return type(asyncio.get_running_loop())


def _standard(loop_type: type) -> bool:
    return issubclass(loop_type, asyncio.BaseEventLoop) and not issubclass(loop_type, uvloop.Loop)


@pytest.mark.parametrize("value", [None, "", "auto", "AUTO"])
def test_by_default_each_command_chooses(
    monkeypatch: pytest.MonkeyPatch, value: str | None
) -> None:
    if value is None:
        monkeypatch.delenv(EVENT_LOOP_ENV, raising=False)
    else:
        monkeypatch.setenv(EVENT_LOOP_ENV, value)
    assert event_loop_factory() is None
    assert _standard(run_coro(_loop_type()))
    assert event_loop_factory("uvloop") is uvloop.new_event_loop
    assert run_coro(_loop_type(), loop="uvloop") is uvloop.Loop


def test_the_environment_decides_for_every_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(EVENT_LOOP_ENV, "uvloop")
    assert run_coro(_loop_type()) is uvloop.Loop
    assert run_coro(_loop_type(), loop="uvloop") is uvloop.Loop
    monkeypatch.setenv(EVENT_LOOP_ENV, "asyncio")
    assert _standard(run_coro(_loop_type()))
    assert _standard(run_coro(_loop_type(), loop="uvloop"))


def test_another_value_is_a_one_line_error() -> None:
    code = (
        "from scheduler.cli._runner import run_coro\nasync def main(): return 1\nrun_coro(main())\n"
    )
    done = subprocess.run(
        [sys.executable, "-W", "error", "-c", code],
        env={EVENT_LOOP_ENV: "tokio", "PATH": ""},
        capture_output=True,
        text=True,
    )
    assert done.returncode == 1
    assert done.stderr == "Error: TICKWHEEL_EVENT_LOOP='tokio': use one of auto, uvloop, asyncio\n"


def test_uvloop_asked_for_and_missing_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "uvloop", None)  # import uvloop raises ImportError
    monkeypatch.setenv(EVENT_LOOP_ENV, "uvloop")
    with pytest.raises(ValueError, match="uvloop is not installed"):
        event_loop_factory()
    monkeypatch.setenv(EVENT_LOOP_ENV, "auto")
    assert event_loop_factory("uvloop") is None  # the worker falls back to asyncio


def test_the_worker_command_asks_for_uvloop(monkeypatch: pytest.MonkeyPatch) -> None:
    """``tickwheel worker`` runs its worker with ``loop="uvloop"`` (no server needed:
    the run is stopped before it starts)."""
    from click.testing import CliRunner

    import scheduler.cli._worker as worker_cli
    from scheduler.cli import main

    asked: list[str] = []

    def stop(coro: Any, *, loop: str = "asyncio") -> Any:
        coro.close()
        asked.append(loop)
        raise SystemExit(0)

    monkeypatch.setattr(worker_cli, "run_coro", stop)
    monkeypatch.setattr(worker_cli, "tune_gc", lambda: None)
    result = CliRunner().invoke(
        main,
        ["worker", "--api-key", "k", "--target", "127.0.0.1:1", "--type", "t=json:dumps"],
    )
    assert result.exit_code == 0, result.output
    assert asked == ["uvloop"]
