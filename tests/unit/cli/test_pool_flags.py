"""The pool flags of ``serve`` and ``dev`` reach the EngineConfig, from the command line
and from their ``TICKWHEEL_*`` env vars, and ``tickwheel worker --pools`` reaches the
worker (issue 43)."""

from __future__ import annotations

from typing import Any

import pytest
from click.testing import CliRunner

from scheduler.cli import _dev, _serve, main
from scheduler.cli import _worker as cli_worker
from scheduler.engine import SlotReserve
from scheduler.types import Pool
from scheduler.worker import ClusterWorker, DrainReport, Worker


@pytest.fixture
def captured(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    seen: dict[str, Any] = {}

    async def fake_serve(node_config: Any) -> None:
        seen["engine"] = node_config.engine

    async def fake_dev(**kw: Any) -> None:
        seen["dev"] = kw

    monkeypatch.setattr(_serve, "_serve", fake_serve)
    monkeypatch.setattr(_serve, "tune_gc", lambda: None)
    monkeypatch.setattr(_dev, "run_dev", fake_dev)
    return seen


def test_serve_takes_the_pool_settings_from_flags_and_env(captured: dict[str, Any]) -> None:
    result = CliRunner().invoke(
        main,
        ["serve", "--reserve", "critical=10%,standard=2", "--bulk-max-slots", "40"],
        env={"TICKWHEEL_CRITICAL_RESERVED_SLOTS": "12"},
    )
    assert result.exit_code == 0, result.output
    engine = captured["engine"]
    assert engine.reserves == (
        SlotReserve(pool=Pool.CRITICAL, share=0.1),
        SlotReserve(pool=Pool.STANDARD, slots=2),
    )
    assert engine.bulk_max_slots == 40
    assert engine.critical_reserved_slots == 12


def test_serve_keeps_the_defaults_without_flags(captured: dict[str, Any]) -> None:
    env = {"TICKWHEEL_RESERVE": None, "TICKWHEEL_RESERVE_ALWAYS": None}
    result = CliRunner().invoke(main, ["serve"], env=env)
    assert result.exit_code == 0, result.output
    engine = captured["engine"]
    # The defaults are EngineConfig's: 10% of each worker for critical, while in sight.
    assert engine.reserves == (SlotReserve(pool=Pool.CRITICAL, share=0.1),)
    assert engine.reserves == type(engine)().reserves
    assert engine.reserve_linger_s == 300.0
    assert (engine.critical_reserved_slots, engine.bulk_max_slots) == (500, 150)


@pytest.mark.parametrize("value", ["none", "off", "0", ""])
def test_serve_reserve_none_turns_it_off(captured: dict[str, Any], value: str) -> None:
    result = CliRunner().invoke(main, ["serve", "--reserve", value])
    assert result.exit_code == 0, result.output
    assert captured["engine"].reserves == ()


def test_serve_reserve_always_holds_it_at_all_times(captured: dict[str, Any]) -> None:
    result = CliRunner().invoke(main, ["serve"], env={"TICKWHEEL_RESERVE_ALWAYS": "1"})
    assert result.exit_code == 0, result.output
    assert captured["engine"].reserve_linger_s is None


def test_dev_takes_a_reserve_from_env(captured: dict[str, Any]) -> None:
    result = CliRunner().invoke(main, ["dev"], env={"TICKWHEEL_RESERVE": "critical=3"})
    assert result.exit_code == 0, result.output
    assert captured["dev"]["timing"]["reserves"] == (SlotReserve(pool=Pool.CRITICAL, slots=3),)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("bulk=2", "no pool comes after bulk"),
        ("critical", "expected POOL=SLOTS or POOL=PERCENT%"),
        ("critical=100%", "share must be >= 0 and < 1"),
        ("critical=1,critical=2", "given twice"),
    ],
)
def test_a_bad_reserve_is_refused_naming_the_flag(
    captured: dict[str, Any], value: str, message: str
) -> None:
    result = CliRunner().invoke(main, ["serve", "--reserve", value])
    assert result.exit_code == 2
    assert "--reserve" in result.output
    assert message in " ".join(result.output.split())
    assert "engine" not in captured


BASE = ["worker", "--type", "t=os:getcwd", "--target", "127.0.0.1:1", "--api-key", "k"]


@pytest.fixture
def built(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    seen: list[Any] = []

    async def run(w: Any, grace_s: float, host: str, port: int | None, token: Any) -> DrainReport:
        seen.append(w)
        return DrainReport()

    monkeypatch.setattr(cli_worker, "_run_with_metrics", run)
    monkeypatch.setattr(cli_worker, "tune_gc", lambda: None)
    return seen


def test_worker_pools_reach_the_hello(built: list[Any]) -> None:
    result = CliRunner().invoke(main, [*BASE, "--one-node", "--pools", "standard,critical"])
    assert result.exit_code == 0, result.output
    (w,) = built
    assert isinstance(w, Worker)
    assert w._stream.pools == (Pool.CRITICAL, Pool.STANDARD)


def test_worker_pools_from_env_reach_every_member(built: list[Any]) -> None:
    result = CliRunner().invoke(main, BASE, env={"TICKWHEEL_WORKER_POOLS": "critical"})
    assert result.exit_code == 0, result.output
    (w,) = built
    assert isinstance(w, ClusterWorker)
    assert w._kwargs["pools"] == [Pool.CRITICAL]


def test_worker_without_pools_runs_every_pool(built: list[Any]) -> None:
    result = CliRunner().invoke(main, [*BASE, "--one-node"])
    assert result.exit_code == 0, result.output
    assert built[0]._stream.pools == ()


def test_a_bad_worker_pool_is_refused_naming_the_flag(built: list[Any]) -> None:
    result = CliRunner().invoke(main, [*BASE, "--pools", "urgent"])
    assert result.exit_code == 2
    assert "--pools" in result.output
    assert "pools are critical, standard, bulk" in result.output
    assert not built
