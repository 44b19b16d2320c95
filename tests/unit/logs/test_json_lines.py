"""``scheduler.logs``: the JSON line (time, level, logger, message, the task fields),
fields bound in a context (and kept to that context), explicit ``extra=`` winning,
and the CLI's ``--log-format`` / ``--log-level`` on the group, after a subcommand and
from the environment."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import uuid
from collections.abc import Iterator
from datetime import datetime

import pytest
from click.testing import CliRunner

from scheduler import logs
from scheduler.cli import main

TASK = uuid.UUID("00000000-0000-4000-8000-000000000001")
TENANT = uuid.UUID("00000000-0000-4000-8000-000000000002")
TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


@pytest.fixture
def lines() -> Iterator[tuple[logging.Logger, io.StringIO]]:
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.addFilter(logs.ContextFields())
    handler.setFormatter(logs.JsonFormatter())
    log = logging.getLogger("tickwheel.test-logs")
    log.addHandler(handler)
    log.setLevel(logging.DEBUG)
    log.propagate = False
    try:
        yield log, out
    finally:
        log.removeHandler(handler)


def _objects(out: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in out.getvalue().splitlines()]


def test_a_line_is_one_object_with_time_level_logger_message_and_fields(
    lines: tuple[logging.Logger, io.StringIO],
) -> None:
    log, out = lines
    extra = logs.task_extra(
        task_id=TASK,
        tenant_id=TENANT,
        fencing_token=7,
        worker_id="w-1",
        trace_id=logs.trace_id_of(TRACEPARENT),
    )
    log.warning("task %s: two\nlines", TASK, extra=extra)
    (obj,) = _objects(out)
    assert list(obj) == [
        "time",
        "level",
        "logger",
        "message",
        "task_id",
        "tenant_id",
        "fencing_token",
        "worker_id",
        "trace_id",
    ]
    assert obj["level"] == "WARNING"
    assert obj["logger"] == "tickwheel.test-logs"
    assert obj["message"] == f"task {TASK}: two\nlines"
    assert obj["task_id"] == str(TASK)
    assert obj["tenant_id"] == str(TENANT)
    assert obj["fencing_token"] == 7
    assert obj["worker_id"] == "w-1"
    assert obj["trace_id"] == "4bf92f3577b34da6a3ce929d0e0e4736"
    when = str(obj["time"])
    assert when.endswith("Z")
    assert datetime.fromisoformat(when).utcoffset() is not None  # RFC 3339 with its zone


def test_a_line_without_fields_has_none_and_an_exception_is_text(
    lines: tuple[logging.Logger, io.StringIO],
) -> None:
    log, out = lines
    try:
        raise ValueError("boom")
    except ValueError:
        log.exception("failed")
    (obj,) = _objects(out)
    assert set(obj) == {"time", "level", "logger", "message", "exc_info"}
    assert "ValueError: boom" in str(obj["exc_info"])


def test_bound_fields_stay_in_their_task_and_extra_wins(
    lines: tuple[logging.Logger, io.StringIO],
) -> None:
    log, out = lines

    class Source:
        asked = 0

        def log_fields(self) -> dict[str, object]:
            Source.asked += 1
            return logs.task_extra(task_id=TASK, fencing_token=3)

    async def attempt() -> None:
        logs.bind_fields(Source())
        log.info("in the task")
        log.info("explicit", extra=logs.task_extra(fencing_token=4))

    async def main_() -> None:
        with logs.bind(worker_id="w-2"):
            await asyncio.create_task(attempt())
            log.info("after the task")
        log.info("outside")

    asyncio.run(main_())
    inside, explicit, after, outside = _objects(out)
    assert inside["task_id"] == str(TASK)
    assert inside["fencing_token"] == 3
    assert inside["worker_id"] == "w-2"
    assert explicit["fencing_token"] == 4
    assert "task_id" not in after
    assert after["worker_id"] == "w-2"
    assert "worker_id" not in outside
    assert Source.asked == 2  # asked per line logged, never when binding


def test_trace_id_of_rejects_what_is_not_a_traceparent() -> None:
    assert logs.trace_id_of(None) is None
    assert logs.trace_id_of("garbage") is None
    assert logs.trace_id_of("00-" + "0" * 32 + "-00f067aa0ba902b7-01") is None


@pytest.fixture
def root_logging() -> Iterator[None]:
    root = logging.getLogger()
    level, handlers = root.level, list(root.handlers)
    try:
        yield
    finally:
        for h in list(root.handlers):
            if h not in handlers:
                root.removeHandler(h)
        root.setLevel(level)


def _ours() -> logging.Handler:
    (handler,) = [h for h in logging.getLogger().handlers if isinstance(h, logs._Stderr)]
    return handler


@pytest.mark.usefixtures("root_logging")
@pytest.mark.parametrize(
    ("args", "env", "json_lines", "level"),
    [
        ([], {}, False, logging.WARNING),
        (["--log-format", "json"], {}, True, logging.WARNING),
        (["--log-format", "JSON", "--log-level", "debug"], {}, True, logging.DEBUG),
        ([], {"TICKWHEEL_LOG_FORMAT": "json", "TICKWHEEL_LOG_LEVEL": "error"}, True, 40),
        # After the subcommand; a flag wins over the env var wherever it is.
        (["submit", "x", "--log-format", "json", "-v"], {}, True, logging.INFO),
        (["--log-format", "text", "submit", "x", "--log-level", "debug"], {}, False, 10),
        (["submit", "x", "--log-format", "text"], {"TICKWHEEL_LOG_FORMAT": "json"}, False, 30),
        (["--log-format", "json", "submit", "x"], {"TICKWHEEL_LOG_FORMAT": "text"}, True, 30),
    ],
)
def test_the_cli_options(
    args: list[str], env: dict[str, str], json_lines: bool, level: int
) -> None:
    if "submit" not in args:
        args = [*args, "submit", "x"]
    # --at tomorrow stops the command after its options are parsed, before any I/O.
    result = CliRunner(env=env).invoke(main, [*args, "--at", "tomorrow", "--api-key", "k"])
    assert "--at" in result.output, result.output
    assert isinstance(_ours().formatter, logs.JsonFormatter) is json_lines
    assert logging.getLogger().level == level


def test_every_command_takes_the_log_options() -> None:
    from tests.unit.cli.test_first_hour import _options

    commands: dict[str, set[str]] = {}
    for path, _command, option in _options():
        commands.setdefault(path, set()).update(option.opts)
    assert commands
    for path, opts in commands.items():
        assert {"--log-format", "--log-level"} <= opts, path
