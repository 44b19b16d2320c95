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
