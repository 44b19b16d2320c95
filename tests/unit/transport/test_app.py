"""``App.from_env()`` (issue 40, item 6): the explicit door from the environment to a
task module's App, and the wrapping that lets a handle give back the return value."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from scheduler.cli._worker import _load_app
from scheduler.client import App
from scheduler.client._app import unwrap_result, wrap_result


def test_from_env_reads_the_commands_variables() -> None:
    app = App.from_env(environ={"TICKWHEEL_TARGET": "h:1", "TICKWHEEL_API_KEY": "k"})
    assert (app.target, app.api_key) == ("h:1", "k")
    bare = App.from_env(environ={})
    assert bare.target == "localhost:50051"


def test_from_env_without_a_key_fails_only_when_it_connects() -> None:
    app = App.from_env(environ={})

    @app.task(type="t")
    def t() -> None: ...

    with pytest.raises(ValueError, match=r"App has no API key: .* set TICKWHEEL_API_KEY"):
        app.sync_client()
    with pytest.raises(ValueError, match="TICKWHEEL_API_KEY"):
        app.worker()


def test_a_module_with_from_env_loads_under_worker_app(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "tw_env_mod.py").write_text(
        "from scheduler.client import App\n"
        "app = App.from_env()\n"
        "@app.task(type='add')\n"
        "def add(x: int, y: int) -> int:\n"
        "    return x + y\n"
    )
    monkeypatch.delenv("TICKWHEEL_API_KEY", raising=False)
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        assert set(_load_app("tw_env_mod:app")) == {"add"}
    finally:
        sys.modules.pop("tw_env_mod", None)


@pytest.mark.parametrize(
    "value", [None, 0, 5, "x", [1, {"result": 2}], {}, {"a": 1}, {"result": 1}, {"result": {}}]
)
def test_every_return_value_round_trips(value: Any) -> None:
    stored = wrap_result(value)
    assert isinstance(stored, dict)
    assert unwrap_result(stored) == value


def test_a_plain_dict_is_stored_as_it_is() -> None:
    assert wrap_result({"sent": True}) == {"sent": True}
    assert wrap_result(5) == {"result": 5}  # the wire form before: readers see the same


def test_a_batch_task_function_is_a_batch_handler_over_keyword_payloads() -> None:
    from scheduler.worker import Batch

    app = App("h:1", api_key="k")

    @app.task(type="rows", batch_size=50, batch_max_wait_s=0.5)
    def rows(ctxs: list[Any]) -> list[Any]:
        return [{"n": c.payload["n"]} if c.payload["n"] else 7 for c in ctxs]

    assert rows.payload(n=1, extra="x") == {"n": 1, "extra": "x"}
    with pytest.raises(TypeError, match="keyword arguments only"):
        rows.payload(1)
    handler = app.handlers()["rows"]
    assert isinstance(handler, Batch)
    assert (handler.size, handler.max_wait_s) == (50, 0.5)

    class Ctx:
        def __init__(self, n: int) -> None:
            self.payload = {"n": n}

    # Values are stored as a task function's results are; an exception stays one.
    assert handler.fn([Ctx(1), Ctx(0)]) == [{"n": 1}, {"result": 7}]
    with pytest.raises(ValueError, match=">= 0"):
        app.task(type="bad", batch_size=-1)
