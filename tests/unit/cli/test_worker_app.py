"""``tickwheel worker --app module:app`` runs the task functions of a ``@app.task`` App."""

from __future__ import annotations

import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from scheduler.cli import main
from scheduler.cli._worker import _load_app

APP_MODULE = """
from scheduler.client import App

app = App("localhost:1", "key")

@app.task(type="email")
async def send_email(to: str) -> dict:
    return {"sent": to}

@app.task()
def resize(width: int) -> int:
    return width

not_an_app = object()
empty = App("localhost:1", "key")
"""


@pytest.fixture
def app_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    (tmp_path / "tw_app_mod.py").write_text(APP_MODULE)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "tw_app_mod"
    sys.modules.pop("tw_app_mod", None)


def test_app_gives_every_registered_type_a_handler(app_module: str) -> None:
    handlers = _load_app(f"{app_module}:app")
    assert set(handlers) == {"email", "tw_app_mod.resize"}  # default: module.function
    assert all(callable(h) for h in handlers.values())


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("tw_app_mod:not_an_app", "not a scheduler.client.App"),
        ("tw_app_mod:empty", "no task registered"),
        ("tw_app_mod:missing", "has no attribute"),
        ("tw_app_mod", "expected module:app"),
        ("no_such_module_xyz:app", "No module named"),
    ],
)
def test_a_bad_app_is_named(app_module: str, spec: str, says: str) -> None:
    with pytest.raises(click.BadParameter, match=says):
        _load_app(spec)


def test_worker_needs_types_or_an_app() -> None:
    result = CliRunner().invoke(main, ["worker", "--api-key", "k"])
    assert result.exit_code == 2
    assert "--type NAME=module:function or --app module:app" in result.output
