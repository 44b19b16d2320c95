"""Issue 19, items 5-7 without a server: clean errors, ``-v`` after the subcommand, env
vars in ``--help``, one naming scheme for them, ``--version``, the list flags."""

from __future__ import annotations

import importlib.metadata
import logging
from collections.abc import Iterator
from pathlib import Path

import click
import pytest
from click.testing import CliRunner, Result

from scheduler.cli import main
from scheduler.cli._runner import flag_words, user_error


def _run(*args: str, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(main, list(args), env=env)


def _one_error_line(result: Result) -> str:
    """The result's only ``Error:`` line; no traceback anywhere."""
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    assert "Traceback" not in result.output
    lines = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert len(lines) == 1, result.output
    return lines[0]


def test_submit_at_tomorrow_is_a_usage_error_naming_the_accepted_formats() -> None:
    result = _run("submit", "hello", "--at", "tomorrow", "--api-key", "k")
    assert result.exit_code == 2
    line = _one_error_line(result)
    assert "--at" in line
    assert "'tomorrow' is not a time" in line
    assert "ISO 8601" in line
    assert "2030-01-31T09:00:00Z" in line
    assert "--in SECONDS" in line


def test_watchdog_on_a_missing_sqlite_file_says_so(tmp_path: Path) -> None:
    missing = tmp_path / "nonexistent.db"
    result = _run("watchdog", "--sqlite", str(missing), "--once")
    assert result.exit_code == 2
    line = _one_error_line(result)
    assert "--sqlite" in line
    assert "does not exist" in line
    assert not missing.exists()  # nothing was created on the way


def test_a_short_admin_token_says_the_rule_not_a_class_name() -> None:
    result = _run("serve", "--admin-token", "short")
    assert result.exit_code == 2
    line = _one_error_line(result)
    assert "--admin-token" in line
    assert "at least 16 characters" in line
    assert "Config" not in result.output


@pytest.mark.parametrize("listen", ["garbage", "127.0.0.1:99999", "host:port"])
def test_a_listen_address_that_cannot_be_bound_is_refused_before_starting(listen: str) -> None:
    for command in ("serve", "dev"):
        result = _run(command, "--listen", listen)
        assert result.exit_code == 2
        line = _one_error_line(result)
        assert "--listen" in line
        assert "expected HOST:PORT" in line


def test_configuration_errors_name_the_flag() -> None:
    assert flag_words("ServerConfig.admin_token must be at least 16 characters") == (
        "--admin-token must be at least 16 characters"
    )
    assert flag_words("EngineConfig.lease_ttl_s must be > 0") == "--lease-ttl-s must be > 0"
    assert user_error(ValueError("EngineConfig.lease_ttl_s must be > 0")) == (
        "--lease-ttl-s must be > 0"
    )
    assert user_error(FileNotFoundError(2, "No such file or directory", "/x.pem")) == (
        "No such file or directory: /x.pem"
    )
    assert user_error(KeyError("a bug")) is None  # a bug keeps its traceback


def test_version_prints_the_package_version() -> None:
    result = _run("--version")
    assert result.exit_code == 0
    assert result.output.strip() == f"tickwheel {importlib.metadata.version('tickwheel')}"


@pytest.fixture
def root_level() -> Iterator[None]:
    root = logging.getLogger()
    level = root.level
    try:
        yield
    finally:
        root.setLevel(level)


@pytest.mark.usefixtures("root_level")
@pytest.mark.parametrize(
    ("args", "level"),
    [
        (["submit", "x", "-v"], logging.INFO),
        (["submit", "x", "-vv"], logging.DEBUG),
        (["-v", "submit", "x", "-v"], logging.DEBUG),
    ],
)
def test_verbose_works_after_the_subcommand(args: list[str], level: int) -> None:
    logging.getLogger().setLevel(logging.WARNING)
    # --at tomorrow stops the command after its options are parsed, before any I/O.
    result = _run(*args, "--at", "tomorrow", "--api-key", "k")
    assert "--at" in _one_error_line(result)
    assert logging.getLogger().level == level


def _options() -> Iterator[tuple[str, click.Command, click.Option]]:
    def walk(prefix: str, group: click.Group) -> Iterator[tuple[str, click.Command]]:
        for name, command in group.commands.items():
            if isinstance(command, click.Group):
                yield from walk(f"{prefix} {name}", command)
            else:
                yield f"{prefix} {name}".strip(), command

    for path, command in walk("", main):
        for param in command.params:
            if isinstance(param, click.Option):
                yield path, command, param


def test_every_env_var_is_shown_in_help_and_named_tickwheel() -> None:
    seen = 0
    for path, _command, option in _options():
        if not option.envvar:
            continue
        names = [option.envvar] if isinstance(option.envvar, str) else list(option.envvar)
        assert all(n.startswith("TICKWHEEL_") for n in names), (path, names)
        result = _run(*path.split(), "--help")
        assert result.exit_code == 0, result.output
        assert names[0] in result.output.replace("\n", " ").replace("  ", ""), (path, names)
        assert option.show_envvar, (path, option.name)
        seen += 1
    assert seen > 50


def test_the_watchdog_reads_the_same_dsn_variable_as_serve_and_the_old_one_still() -> None:
    watchdog, serve = main.commands["watchdog"], main.commands["serve"]
    (dsn,) = [p for p in serve.params if p.name == "postgres_dsn"]
    assert dsn.envvar == "TICKWHEEL_POSTGRES_DSN"
    for var in ("TICKWHEEL_POSTGRES_DSN", "TICKWHEEL_WATCHDOG_POSTGRES_DSN"):
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv(var, "postgresql://h/db")
            ctx = watchdog.make_context("watchdog", [])
        assert ctx.params["postgres_dsn"] == "postgresql://h/db", var


def test_dev_has_the_lease_and_heartbeat_flags_of_serve() -> None:
    def timing(name: str) -> dict[str, object]:
        return {
            p.name: (p.envvar, p.default)
            for p in main.commands[name].params
            if p.name
            in {
                "lookahead_s",
                "lease_ttl_s",
                "heartbeat_interval_s",
                "preload_interval_s",
                "retry_base_s",
            }
        }

    assert len(timing("dev")) == 5
    assert timing("dev") == timing("serve")
    ctx = main.commands["dev"].make_context("dev", ["--lease-ttl-s", "9", "--retry-base-s", "0.5"])
    assert ctx.params["lease_ttl_s"] == 9.0
    assert ctx.params["retry_base_s"] == 0.5


@pytest.mark.parametrize("limit", ["0", "-1"])
def test_list_limit_below_one_is_refused(limit: str) -> None:
    result = _run("list", "--limit", limit, "--api-key", "k")
    assert result.exit_code == 2
    assert "--limit" in _one_error_line(result)


def test_list_has_sort_order_page_token_and_wide() -> None:
    names = {p.name for p in main.commands["list"].params}
    assert {"sort", "order", "limit", "page_token", "wide"} <= names
    ctx = main.commands["list"].make_context("list", ["--api-key", "k"])
    assert (ctx.params["sort"], ctx.params["order"]) == ("created", "desc")  # newest first


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (("--tls-cert", "EMPTY", "--tls-key", "JSON"), "--tls-cert: not a PEM file"),
        (("--tls-ca", "JSON"), "--tls-ca: not a PEM file"),
        (("--tls-cert", "JSON"), "--tls-cert and --tls-key go together"),
    ],
)
def test_tls_files_that_are_not_pem_are_a_usage_error(
    tmp_path: Path, flags: tuple[str, ...], said: str
) -> None:
    """Issue 40's CLI fuzzer: an empty --tls-cert made gRPC's C core abort the process
    (exit 134, a core dump); a file that is not PEM is now a one-line usage error."""
    files = {"EMPTY": tmp_path / "empty", "JSON": tmp_path / "regions.json"}
    files["EMPTY"].write_text("")
    files["JSON"].write_text('{"us": {"target": "127.0.0.1:1"}}')
    args = [str(files[f]) if f in files else f for f in flags]
    result = _run("list", "--api-key", "k", "--target", "127.0.0.1:1", *args)
    assert result.exit_code == 2
    assert said in _one_error_line(result)


@pytest.mark.parametrize("flag", ["--api-key", "--admin-token"])
def test_a_key_a_header_cannot_carry_is_one_error_line(flag: str) -> None:
    """Issue 40's CLI fuzzer: `--api-key $'\\x1f'` was a gRPC ExecuteBatchError traceback."""
    command = ["tenants", "list"] if flag == "--admin-token" else ["list"]
    result = _run(*command, "--target", "127.0.0.1:1", flag, "tw_\x1fkey")
    assert result.exit_code == 1
    line = _one_error_line(result)
    assert "holds '\\x1f' (U+001F), which a gRPC header cannot carry" in line


def test_a_regions_file_that_is_not_text_is_a_usage_error(tmp_path: Path) -> None:
    """Issue 40's CLI fuzzer: a binary --regions-file was a UnicodeDecodeError traceback."""
    path = tmp_path / "regions.json"
    path.write_bytes(bytes(range(256)))
    result = _run("worker", "--type", "a=json:loads", "--api-key", "k", "--regions-file", str(path))
    assert result.exit_code == 2
    assert "--regions-file: not UTF-8 text" in _one_error_line(result)


def test_a_notice_is_one_line_whatever_its_length(capsys: pytest.CaptureFixture[str]) -> None:
    """Found walking the README: the worker's "draining: … (signal again to release
    them now)" was wrapped at 80 columns in a log file, and "[...]" read as markup."""
    from scheduler.cli._output import note

    text = "draining: taking no more work; 3 task(s) running, 30 s grace " + "x" * 80 + " [::1]"
    note(text)
    assert capsys.readouterr().err == text + "\n"
