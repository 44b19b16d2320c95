"""``tickwheel serve`` rejects bad cluster flags before it touches any server."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from scheduler.cli import main


@pytest.mark.parametrize("name", ["", "a/b", "x" * 65, "sp ace"])
def test_a_bad_cluster_name_is_refused_naming_the_flag(name: str) -> None:
    result = CliRunner().invoke(main, ["serve", "--cluster-name", name])
    assert result.exit_code == 2
    assert "--cluster-name" in result.output
    assert "letters, digits" in result.output
