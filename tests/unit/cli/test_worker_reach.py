"""``tickwheel worker`` reaches every node by default (issue 42): which worker it builds.

The run itself is replaced (no server here): the test sees the worker the command made
from its flags. Real processes on a real cluster are in
``tests/acceptance/test_members.py``.
"""

from __future__ import annotations

from typing import Any

import pytest
from click.testing import CliRunner

from scheduler.cli import _worker as cli_worker
from scheduler.cli import main
from scheduler.worker import ClusterWorker, DrainReport, Worker

BASE = ["worker", "--type", "t=os:getcwd", "--target", "127.0.0.1:1", "--api-key", "k"]


@pytest.fixture
def built(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The workers the command built, each with the metrics port it was given."""
    seen: list[Any] = []

    async def run(w: Any, grace_s: float, host: str, port: int | None, token: Any) -> DrainReport:
        seen.append((w, port))
        return DrainReport()

    monkeypatch.setattr(cli_worker, "_run_with_metrics", run)
    monkeypatch.setattr(cli_worker, "tune_gc", lambda: None)
    return seen


@pytest.mark.parametrize(
    ("flags", "kind"),
    [
        ([], ClusterWorker),
        (["--all-nodes"], ClusterWorker),  # the old opt-in, accepted as the default
        (["--one-node"], Worker),
        (["--kafka-bootstrap", "127.0.0.1:1"], Worker),  # Kafka mode: one stream
        (["--metrics-port", "0"], ClusterWorker),  # metrics served for every node's streams
    ],
)
def test_the_worker_each_flag_builds(built: list[Any], flags: list[str], kind: type) -> None:
    result = CliRunner().invoke(main, [*BASE, *flags])
    assert result.exit_code == 0, result.output
    ((w, _),) = built
    assert type(w) is kind


def test_one_node_and_all_nodes_contradict(built: list[Any]) -> None:
    result = CliRunner().invoke(main, [*BASE, "--one-node", "--all-nodes"])
    assert result.exit_code == 2
    assert "contradict" in result.output
    assert not built


def test_help_says_the_default_and_the_opt_out() -> None:
    result = CliRunner().invoke(main, ["worker", "--help"])
    text = " ".join(result.output.split())
    assert "--one-node" in text
    assert "every live node" in text
    assert "Kafka mode (--kafka-bootstrap) always streams to --target only" in text
    assert "--all-nodes" not in text  # hidden: a no-op alias
