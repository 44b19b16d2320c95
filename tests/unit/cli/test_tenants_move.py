"""``tickwheel tenants move``: bad input is one ``Error:`` line naming what to fix, before
any database is reached (the move itself: tests/integration/store/test_tenant_move.py
and tests/acceptance/regions/test_move.py)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from click.testing import CliRunner

from scheduler.cli import main


def _directory(path: Path, *, eu_dsn: bool) -> Path:
    regions = {
        "us": {"endpoints": ["127.0.0.1:1"], "postgres_dsn": "postgresql://u@127.0.0.1:1/x"},
        "eu": {"endpoints": ["127.0.0.1:2"]},
    }
    if eu_dsn:
        regions["eu"]["postgres_dsn"] = "postgresql://u@127.0.0.1:2/x"
    path.write_text(json.dumps({"regions": regions}))
    return path


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["not-a-uuid", "--to", "eu", "--from", "us"],
            "tenant_id: 'not-a-uuid' is not a tenant id",
        ),
        ([str(uuid.UUID(int=1)), "--to", "mars", "--from", "us"], "unknown region 'mars'"),
        ([str(uuid.UUID(int=1)), "--to", "eu", "--from", "us"], "region 'eu' has no postgres_dsn"),
    ],
)
def test_bad_input_is_one_line_naming_it(tmp_path: Path, args: list[str], message: str) -> None:
    directory = _directory(tmp_path / "r.json", eu_dsn=False)
    result = CliRunner().invoke(main, ["tenants", "move", *args, "--regions-file", str(directory)])
    assert result.exit_code == 1, result.output
    assert result.output.startswith("Error: ")
    assert message in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_the_regions_file_is_required(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        main, ["tenants", "move", str(uuid.UUID(int=1)), "--to", "eu"], env={}
    )
    assert result.exit_code == 2
    assert "--regions-file" in result.output
