"""The server-protection flags of ``serve`` and ``dev`` reach the ServerConfig, from the
command line and from their ``TICKWHEEL_*`` env vars (issue 15)."""

from __future__ import annotations

from typing import Any

import pytest
from click.testing import CliRunner

from scheduler import limits
from scheduler.cli import _dev, _serve, main


@pytest.fixture
def captured(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    seen: dict[str, Any] = {}

    async def fake_serve(node_config: Any) -> None:
        seen["server"] = node_config.server

    async def fake_dev(**kw: Any) -> None:
        seen["dev"] = kw

    monkeypatch.setattr(_serve, "_serve", fake_serve)
    monkeypatch.setattr(_serve, "tune_gc", lambda: None)
    monkeypatch.setattr(_dev, "run_dev", fake_dev)
    return seen


def test_serve_takes_the_limits_from_flags_and_env(captured: dict[str, Any]) -> None:
    result = CliRunner().invoke(
        main,
        ["serve", "--max-streams-per-tenant", "7", "--auth-throttle-s", "2.5"],
        env={"TICKWHEEL_MAX_INFLIGHT_CALLS_PER_KEY": "9", "TICKWHEEL_STREAM_KEY_RECHECK_S": "1"},
    )
    assert result.exit_code == 0, result.output
    server = captured["server"]
    assert server.max_streams_per_tenant == 7
    assert server.auth_throttle_s == 2.5
    assert server.max_inflight_calls_per_key == 9
    assert server.stream_key_recheck_s == 1.0
    assert server.auth_failures_per_source == limits.AUTH_FAILURES_PER_SOURCE


def test_serve_refuses_a_limit_of_zero_naming_it(captured: dict[str, Any]) -> None:
    result = CliRunner().invoke(main, ["serve", "--max-streams-per-tenant", "0"])
    assert result.exit_code == 2
    assert "--max-streams-per-tenant must be positive" in result.output


def test_dev_passes_the_limits_on(captured: dict[str, Any]) -> None:
    result = CliRunner().invoke(
        main, ["dev", "--auth-failures-per-source", "4"], env={"TICKWHEEL_AUTH_THROTTLE_S": "3"}
    )
    assert result.exit_code == 0, result.output
    got = captured["dev"]["limits"]
    assert got["auth_failures_per_source"] == 4
    assert got["auth_throttle_s"] == 3.0
    assert got["max_streams_per_tenant"] == limits.MAX_STREAMS_PER_TENANT


def test_the_help_names_the_env_vars() -> None:
    out = CliRunner().invoke(main, ["serve", "--help"]).output
    for var in ("TICKWHEEL_MAX_STREAMS_PER_TENANT", "TICKWHEEL_AUTH_FAILURES_PER_SOURCE"):
        assert var in out
