"""Issue 40's target: no input to the ``tickwheel`` command gives a traceback. Hypothesis
draws a command (every leaf of the click tree, so a new command or option is fuzzed
without a change here), a random subset of its options and arguments with hostile
values (numbers at and past their limits, nan and inf, text of any script, files that
are not what they should be, unknown flags), and runs the real argument parser and
command function in this process, against a ``tickwheel dev`` node started once for
the module. Every run ends with exit code 0, 1 or 2, and a failure says so on exactly
one ``Error:`` line, never a traceback.

Examples: ``TICKWHEEL_FUZZ_EXAMPLES`` (500 in ``make test``, more under ``make fuzz``).
Commands that would run until stopped (``serve``, ``dev``, ``worker``, ``ui`` and
``watchdog`` without ``--once``) run everything up to starting their service: the call
that would block is replaced by one that closes it. Values of options that name a
network address come from a fixed list of loopback or malformed ones, so the fuzzer
sends nothing off this machine.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass
from typing import Any

import click
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.cli import _runner, _serve, _ui, _watchdog, _worker, main
from tests.support.processes import CommandProcess, process_group
from tests.support.servers import free_port

EXAMPLES = int(os.environ.get("TICKWHEEL_FUZZ_EXAMPLES", "500"))

LOGGING = {"verbose_after", "log_format_after", "log_level_after"}
"""The logging options every command has (drawn like the others, but rarely)."""


@dataclass(frozen=True)
class Dev:
    """The node the client commands reach, and scratch files for path options."""

    target: str
    api_key: str
    admin_token: str
    tenant_id: str
    files: tuple[str, ...]


@pytest.fixture(scope="module")
def dev(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dev]:
    base = tmp_path_factory.mktemp("cli-fuzz")
    port = free_port()
    args = ["dev", "--db", str(base / "dev.db"), "--listen", f"127.0.0.1:{port}"]
    with process_group(base / "procs") as group:
        node = CommandProcess(
            group.dir / "dev", "dev", [*args, "--no-ui", "--json"], ready_log="^{"
        )
        group.procs.append(node)
        node.start()
        (line,) = [ln for ln in node.log().splitlines() if ln.startswith("{")]
        facts = json.loads(line)
        files = base / "files"
        files.mkdir()
        (files / "empty").write_text("")
        (files / "wf.json").write_text(
            json.dumps({"name": "f", "nodes": [{"id": "a", "type": "t", "max_retries": 0}]})
        )
        (files / "list.json").write_text("[1, 2]")
        (files / "bytes").write_bytes(bytes(range(256)))
        (files / "regions.json").write_text(json.dumps({"us": {"target": "127.0.0.1:1"}}))
        yield Dev(
            target=facts["target"],
            api_key=facts["api_key"],
            admin_token=facts["admin_token"],
            tenant_id=facts["tenant_id"],
            files=(*(str(p) for p in sorted(files.iterdir())), str(files), str(files / "nope")),
        )


def _leaves(
    group: click.Group, path: tuple[str, ...] = ()
) -> list[tuple[tuple[str, ...], click.Command]]:
    out = []
    for name, command in sorted(group.commands.items()):
        if isinstance(command, click.Group):
            out += _leaves(command, (*path, name))
        else:
            out.append(((*path, name), command))
    return out


COMMANDS = _leaves(main)

TEXT = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=24
)
NUMBERS = st.one_of(
    st.integers(-(2**70), 2**70).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(["nan", "inf", "-inf", "1e12", "1e300", "-0", "0x10", "1_000", "", " 5"]),
)
TIMES = st.sampled_from(
    ["12:07:13", "25:00", "2030-01-31T09:00:00Z", "2030-02-30", "tomorrow", "", "09:00+01:00",
     "9999-12-31T23:59:59Z", "0001-01-01T00:00:00Z", "1e9", "1h", "30d", "-5m"]
)  # fmt: skip
IDS = st.one_of(st.uuids().map(str), st.sampled_from(["", "not-a-uuid", "0" * 36, "nightly"]), TEXT)


def _addresses(dev: Dev) -> dict[str, list[str]]:
    """Every option that names something on a network: only these values (loopback,
    nothing listening there, or malformed), so the fuzzer reaches no other host."""
    closed = "127.0.0.1:1"
    hostports = [closed, "", "garbage", "127.0.0.1:notaport", "127.0.0.1:99999", "[::1"]
    dsns = ["postgresql://tw@127.0.0.1:1/x", "not a dsn", "", "mysql://127.0.0.1:1/x"]
    return {
        "target": [dev.target] * 6 + ["", "no-port", "127.0.0.1:notaport", "[::1"],
        "postgres_dsn": dsns,
        "standby_dsn": dsns,
        "primary_dsn": dsns,
        "store": ["sqlite:///fuzz.db", "memory://", "", "postgres://127.0.0.1:1/x", "x"],
        "etcd": hostports,
        "redis_url": ["redis://127.0.0.1:1/0", "", "garbage", "redis://"],
        "kafka_bootstrap": hostports,
        "webhook_url": ["http://127.0.0.1:1/hook", "", "ftp://x", "not a url"],
        "regions": ["us=127.0.0.1:1", "", "bad", "us=127.0.0.1:1,us=127.0.0.1:2", "=,="],
        "listen": ["127.0.0.1:0", *hostports],
        "advertise": ["127.0.0.1:0", *hostports],
        "metrics_host": ["127.0.0.1", "", "not a host", "::1"],
        "host": ["127.0.0.1", "", "not a host"],
        "types": ["hello=hello:handler", "x", "a=b", "a=nosuch:h", "a=json:loads", "=:", ""],
        "app_spec": ["hello:app", "nosuch", "json:loads", ":", ""],
    }


def _value(dev: Dev, param: click.Parameter) -> st.SearchStrategy[str]:
    name = param.name or ""
    fixed = _addresses(dev).get(name)
    if fixed is not None:
        return st.sampled_from(fixed)
    if name == "api_key":
        return st.sampled_from([dev.api_key, dev.api_key, "tw_bogus", "", "x" * 300])
    if name == "admin_token":
        return st.sampled_from([dev.admin_token, dev.admin_token, "short", "y" * 20, ""])
    if name.endswith("tenant_id"):
        return st.one_of(st.just(dev.tenant_id), IDS)
    if isinstance(param.type, (click.Path, click.File)):
        return st.sampled_from([*dev.files, "-", ""])
    if isinstance(param.type, click.Choice):
        return st.one_of(st.sampled_from([str(c) for c in param.type.choices]), TEXT)
    if isinstance(param.type, (click.types.IntParamType, click.types.FloatParamType)):
        return st.one_of(NUMBERS, TEXT)
    if name in ("at", "scheduled_from", "scheduled_to", "expires_at"):
        return st.one_of(TIMES, TEXT)
    if name in ("payload",):
        return st.one_of(
            st.sampled_from(['{"name": "world"}', "{}", "[]", "null", "1e999", '{"a": NaN}']), TEXT
        )
    if name.endswith("_id") or name in ("schedule", "key_id"):
        return IDS
    return st.one_of(TEXT, NUMBERS, TIMES)


@st.composite
def invocations(draw: st.DrawFn, dev: Dev) -> list[str]:
    """One command line: a command's path, some of its options, its arguments."""
    path, command = draw(st.sampled_from(COMMANDS))
    words: list[str] = []
    arguments: list[str] = []
    for param in command.params:
        if isinstance(param, click.Argument):
            if draw(st.integers(0, 9)):  # now and then a missing argument
                arguments.append(draw(_value(dev, param)))
            continue
        if not isinstance(param, click.Option):
            continue
        if draw(st.integers(0, 19 if param.name in LOGGING else 3)) != 0:
            continue
        flag = draw(st.sampled_from(param.opts))
        if param.is_flag or param.count:
            words.append(flag)
        else:
            words += [flag, draw(_value(dev, param))]
    if draw(st.integers(0, 9)) == 0:
        words.append(draw(st.sampled_from(["--bogus", "-x", "--", "--help", "extra"])))
    words = draw(st.permutations(words)) if draw(st.booleans()) else words
    return [*path, *words, *arguments]


def _stopped(*, code: int = 0) -> Callable[..., Any]:
    """In place of a call that would run a service until stopped: close it, exit."""

    def run(coro: Coroutine[Any, Any, Any], *args: Any, **kw: Any) -> Any:
        coro.close()
        raise SystemExit(code)

    return run


def _watchdog_run(coro: Coroutine[Any, Any, Any], *args: Any, **kw: Any) -> Any:
    """``watchdog --once`` runs; the watchdog's loop is stopped at its start."""
    if coro.cr_code.co_name == "_run":
        coro.close()
        raise SystemExit(0)
    return _runner.run_coro(coro, *args, **kw)


@pytest.fixture(scope="module")
def cli(dev: Dev, tmp_path_factory: pytest.TempPathFactory) -> Iterator[CliRunner]:
    """A runner in a scratch directory, its services stopped before they start."""
    scratch = tmp_path_factory.mktemp("cli-fuzz-cwd")
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(scratch)
        mp.setattr(_serve, "run_node", _stopped())
        mp.setattr(_serve, "tune_gc", lambda: None)
        mp.setattr(_worker, "run_coro", _stopped())
        mp.setattr(_worker, "tune_gc", lambda: None)
        mp.setattr(_ui, "run_coro", _stopped())
        mp.setattr(_watchdog, "run_coro", _watchdog_run)
        for name in list(os.environ):
            if name.startswith("TICKWHEEL_"):
                mp.delenv(name)
        mp.setenv("TICKWHEEL_TARGET", dev.target)
        mp.setenv("TICKWHEEL_API_KEY", dev.api_key)
        mp.setenv("TICKWHEEL_ADMIN_TOKEN", dev.admin_token)
        yield CliRunner()


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
def test_no_cli_input_gives_a_traceback(cli: CliRunner, dev: Dev, data: st.DataObject) -> None:
    args = data.draw(invocations(dev), label="argv")
    result = cli.invoke(main, args, catch_exceptions=True)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        import traceback

        trace = "".join(traceback.format_exception(*result.exc_info))  # type: ignore[misc]
        raise AssertionError(f"tickwheel {args!r} raised:\n{trace}\n{result.output}")
    assert result.exit_code in (0, 1, 2), (args, result.exit_code, result.output)
    assert "Traceback" not in result.output, (args, result.output)
    if result.exit_code:
        errors = [ln for ln in result.output.splitlines() if ln.startswith("Error:")]
        assert len(errors) == 1, (args, result.output)


def test_every_command_is_drawn() -> None:
    """The fuzzer's commands are the CLI's: each leaf of the click tree."""
    names = {" ".join(path) for path, _ in COMMANDS}
    assert {"submit", "tenants create", "workflows submit", "serve", "worker", "dr status"} <= names
    assert len(names) >= 35
