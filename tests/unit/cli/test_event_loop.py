"""The CLI's event loop (``TICKWHEEL_EVENT_LOOP``): uvloop by default where it is
installed, asyncio on request, and a clear error for anything else."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pytest
import uvloop

from scheduler.cli._runner import EVENT_LOOP_ENV, event_loop_factory, run_coro


async def _loop_type() -> type:
    return type(asyncio.get_running_loop())


@pytest.mark.parametrize("value", [None, "", "auto", "AUTO", "uvloop"])
def test_uvloop_by_default_and_on_request(
    monkeypatch: pytest.MonkeyPatch, value: str | None
) -> None:
    if value is None:
        monkeypatch.delenv(EVENT_LOOP_ENV, raising=False)
    else:
        monkeypatch.setenv(EVENT_LOOP_ENV, value)
    assert event_loop_factory() is uvloop.new_event_loop
    assert run_coro(_loop_type()) is uvloop.Loop


def test_asyncio_on_request(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(EVENT_LOOP_ENV, "asyncio")
    assert event_loop_factory() is None
    assert issubclass(run_coro(_loop_type()), asyncio.BaseEventLoop)
    assert not issubclass(run_coro(_loop_type()), uvloop.Loop)


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
    assert done.stderr == (
        "Error: TICKWHEEL_EVENT_LOOP='tokio': use one of auto, uvloop, asyncio\n"
    )


def test_uvloop_asked_for_and_missing_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(EVENT_LOOP_ENV, "uvloop")
    monkeypatch.setitem(sys.modules, "uvloop", None)  # import uvloop raises ImportError
    with pytest.raises(ValueError, match="uvloop is not installed"):
        event_loop_factory()
    monkeypatch.setenv(EVENT_LOOP_ENV, "auto")
    assert event_loop_factory() is None  # auto falls back to asyncio
