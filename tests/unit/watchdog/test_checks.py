"""The watchdog's rule and its three cases, canary checks, config validation, --once."""

from __future__ import annotations

import sqlite3
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

from scheduler.cli._main import main
from scheduler.watchdog import CanaryFacts, Case, JobFacts, WatchdogConfig, check_canary, check_job

NOW = datetime(2026, 5, 1, 12, tzinfo=UTC)


def facts(**kw: object) -> JobFacts:
    base: dict[str, object] = {
        "tenant_id": uuid.UUID(int=1),
        "job_id": "daily_compliance_ledger",
        "schedule_id": None,
        "interval_s": 86_400,
        "tolerance_s": 300,
        "max_runtime_s": 3600,
        "registered_at": NOW - timedelta(days=30),
        "last_completed": NOW - timedelta(seconds=86_400 + 301),
        "oldest_running_since": None,
        "dead_lettered_since_completion": 0,
    }
    base.update(kw)
    return JobFacts(**base)  # type: ignore[arg-type]


def test_within_interval_plus_tolerance_is_quiet() -> None:
    assert check_job(facts(last_completed=NOW - timedelta(seconds=86_700)), NOW) is None


def test_never_started() -> None:
    alert = check_job(facts(), NOW)
    assert alert is not None
    assert alert.case is Case.NEVER_STARTED
    assert "daily_compliance_ledger" in alert.message


def test_failing() -> None:
    alert = check_job(facts(dead_lettered_since_completion=2), NOW)
    assert alert is not None
    assert alert.case is Case.FAILING


def test_started_not_finished_only_past_max_runtime() -> None:
    running = facts(oldest_running_since=NOW - timedelta(minutes=10))
    assert check_job(running, NOW) is None
    stuck = facts(oldest_running_since=NOW - timedelta(hours=2))
    alert = check_job(stuck, NOW)
    assert alert is not None
    assert alert.case is Case.STARTED_NOT_FINISHED


def test_never_completed_counts_from_registration() -> None:
    assert check_job(facts(last_completed=None, registered_at=NOW), NOW) is None
    assert check_job(facts(last_completed=None), NOW) is not None


def test_canary_lag_and_stop() -> None:
    cfg = WatchdogConfig(database_url="sqlite:///x.db", canary_stale_s=180, canary_max_lag_s=5)
    ok = CanaryFacts(NOW - timedelta(seconds=30), NOW - timedelta(days=1), NOW, NOW)
    assert check_canary(ok, NOW, cfg) == []
    lag = CanaryFacts(NOW, NOW, NOW - timedelta(seconds=10), NOW)
    assert [a.case for a in check_canary(lag, NOW, cfg)] == [Case.CANARY_LAGGING]
    stopped = CanaryFacts(NOW - timedelta(seconds=500), NOW, None, None)
    assert [a.case for a in check_canary(stopped, NOW, cfg)] == [Case.CANARY_STOPPED]


def test_config_is_validated() -> None:
    with pytest.raises(ValueError, match="check_interval_s"):
        WatchdogConfig(database_url="sqlite:///x", check_interval_s=0)
    with pytest.raises(ValueError, match="database_url"):
        WatchdogConfig(database_url="mysql://x")


def test_once_exit_code(tmp_path: Path) -> None:
    db = tmp_path / "wd.db"
    conn = sqlite3.connect(db)
    from scheduler.store import _sql

    conn.executescript(_sql.read_text("sqlite", "schema.sql"))
    conn.execute("INSERT INTO tenants (id, name, created_at) VALUES ('t', 'acme', 0)")
    conn.commit()
    runner = CliRunner()
    quiet = runner.invoke(main, ["watchdog", "--sqlite", str(db), "--once", "--no-canary"])
    assert quiet.exit_code == 0, quiet.output
    conn.execute(
        "INSERT INTO job_expectations (id, tenant_id, job_id, interval_s, tolerance_s, created_at)"
        " VALUES ('e', '00000000-0000-0000-0000-000000000001', 'j', 60, 0, 0)"
    )
    conn.commit()
    conn.close()
    loud = runner.invoke(main, ["watchdog", "--sqlite", str(db), "--once", "--no-canary"])
    assert loud.exit_code == 1, loud.output
