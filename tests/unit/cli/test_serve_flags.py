"""``tickwheel serve`` and ``tickwheel worker`` reject bad flags before touching a server."""

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


def test_a_worker_cannot_start_on_delivery_in_kafka_mode() -> None:
    args = ["worker", "--type", "t=os:getcwd", "--api-key", "k", "--target", "127.0.0.1:9"]
    kafka = ["--kafka-bootstrap", "127.0.0.1:9", "--start-on-delivery"]
    result = CliRunner().invoke(main, [*args, *kafka])
    assert result.exit_code == 2
    assert "--start-on-delivery applies to the stream, not to Kafka mode" in result.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--region", "ap", "--regions", "us=127.0.0.1:1,eu=127.0.0.1:2"],
            "--region 'ap' is not in the region directory (known: eu, us)",
        ),
        (["--region", "Not_A_Region"], "--region: 'Not_A_Region' is not a region name"),
        (["--regions", "us=nowhere"], "--regions: region 'us': 'nowhere' is not HOST:PORT"),
        (["--regions-file", "/nonexistent/regions.json"], "--regions-file: cannot read"),
        (["--regions", "us=h:1", "--regions-file", "x.json"], "not both"),
    ],
)
@pytest.mark.parametrize("command", ["serve", "dev"])
def test_a_bad_region_or_directory_is_refused_naming_the_flag(
    command: str, args: list[str], message: str
) -> None:
    extra = ["--store", "sqlite://:memory:"] if command == "serve" else []
    result = CliRunner().invoke(main, [command, *extra, *args])
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.output.split())
