"""The ``tickwheel`` click group: global options, and every command group registered.

Each command group lives in its own module: ``_serve`` (serve, dev, migrate),
``_tasks`` (submit, get, cancel, redrive, list), ``_worker``, ``_workers`` (the
connected workers), ``_admin`` (tenants,
keys), ``_watchdog``, ``_orchestration`` (workflows, schedules, expectations) and ``_ui``
(the web dashboard);
shared options are in ``_options``, running and clients in ``_runner``. Called by the
``tickwheel`` entry point (``scheduler.cli:main``).
"""

from __future__ import annotations

import logging

import click
from click.core import ParameterSource

from scheduler import logs
from scheduler.cli import _move  # noqa: F401  (registers `tenants move`)
from scheduler.cli._admin import keys, tenants
from scheduler.cli._bulk import bulk_cancel, bulk_redrive
from scheduler.cli._concurrency import concurrency
from scheduler.cli._dr import dr
from scheduler.cli._flow import pause, pauses, rate_limits, resume
from scheduler.cli._orchestration import expectations, schedules, workflows
from scheduler.cli._serve import dev, migrate, serve
from scheduler.cli._tasks import cancel, get, history, list_, redrive, submit
from scheduler.cli._ui import ui
from scheduler.cli._watchdog import watchdog
from scheduler.cli._worker import worker
from scheduler.cli._workers import workers

_settings: dict[str, object] = {"verbose": 0, "level": None, "format": "text"}
"""The logging asked for so far: group options first, then the subcommand's."""

LEVELS = ("debug", "info", "warning", "error")


def _apply_logging() -> None:
    level = _settings["level"]
    verbose = int(_settings["verbose"])  # type: ignore[call-overload]
    number = (
        logging.getLevelNamesMapping()[str(level).upper()]
        if level
        else logging.WARNING - 10 * min(verbose, 2)
    )
    fmt: logs.LogFormat = "json" if _settings["format"] == "json" else "text"
    logs.configure(number, fmt)


def _verbose_after(ctx: click.Context, _param: click.Parameter, value: int) -> None:
    """``-v`` after a subcommand (``tickwheel worker -v``) adds to ``tickwheel -v``."""
    if value and not ctx.resilient_parsing:
        _settings["verbose"] = int(_settings["verbose"]) + value  # type: ignore[call-overload]
        _apply_logging()


def _log_option_after(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    """``--log-format`` / ``--log-level`` after a subcommand override the group's (the
    env var is the group option's: here only a flag counts, so a flag always wins)."""
    assert param.name is not None
    from_flag = ctx.get_parameter_source(param.name) is ParameterSource.COMMANDLINE
    if value and from_flag and not ctx.resilient_parsing:
        _settings["format" if param.name == "log_format_after" else "level"] = value.lower()
        _apply_logging()


VERBOSE_HELP = "More logging: -v for INFO (connects, drains), -vv for DEBUG."
LOG_FORMAT_HELP = (
    "Log lines on stderr as text (default) or JSON, one object a line with time, level, "
    "logger, message and the task's fields (docs/observability.md)."
)
LOG_LEVEL_HELP = "Log level (overrides -v)."


def _log_options() -> list[click.Option]:
    return [
        click.Option(
            ["--log-format", "log_format_after"],
            type=click.Choice(["text", "json"], case_sensitive=False),
            envvar="TICKWHEEL_LOG_FORMAT",
            expose_value=False,
            callback=_log_option_after,
            help=LOG_FORMAT_HELP,
        ),
        click.Option(
            ["--log-level", "log_level_after"],
            type=click.Choice(LEVELS, case_sensitive=False),
            envvar="TICKWHEEL_LOG_LEVEL",
            expose_value=False,
            callback=_log_option_after,
            help=LOG_LEVEL_HELP,
        ),
    ]


@click.group()
@click.option("-v", "--verbose", count=True, help=VERBOSE_HELP)
@click.option(
    "--log-format",
    type=click.Choice(["text", "json"], case_sensitive=False),
    envvar="TICKWHEEL_LOG_FORMAT",
    default="text",
    show_default=True,
    help=LOG_FORMAT_HELP,
)
@click.option(
    "--log-level",
    type=click.Choice(LEVELS, case_sensitive=False),
    envvar="TICKWHEEL_LOG_LEVEL",
    help=LOG_LEVEL_HELP,
)
@click.version_option(package_name="tickwheel", message="tickwheel %(version)s")
def main(verbose: int, log_format: str, log_level: str | None) -> None:
    """Tickwheel: a multi-tenant distributed task scheduler.

    Every option that can come from the environment says so in its command's --help
    ("env var: TICKWHEEL_..."): the flag wins over the variable."""
    _settings.update(
        verbose=verbose, level=log_level.lower() if log_level else None, format=log_format.lower()
    )
    _apply_logging()


def _every_command(group: click.Group) -> list[click.Command]:
    out: list[click.Command] = []
    for command in group.commands.values():
        if isinstance(command, click.Group):
            out += _every_command(command)
        else:
            out.append(command)
    return out


def finish_options(group: click.Group) -> None:
    """Give every command ``-v``, ``--log-format`` and ``--log-level`` and show every
    option's env var in ``--help``."""
    for command in _every_command(group):
        for param in command.params:
            if isinstance(param, click.Option) and param.envvar:
                param.show_envvar = True
        if not any(p.name == "verbose_after" for p in command.params):
            command.params.append(
                click.Option(
                    ["-v", "--verbose", "verbose_after"],
                    count=True,
                    expose_value=False,
                    callback=_verbose_after,
                    help=VERBOSE_HELP,
                )
            )
        if not any(p.name == "log_format_after" for p in command.params):
            command.params.extend(_log_options())
            for param in command.params[-2:]:
                assert isinstance(param, click.Option)
                param.show_envvar = True


for _command in (
    serve,
    dev,
    migrate,
    submit,
    get,
    cancel,
    redrive,
    bulk_cancel,
    bulk_redrive,
    list_,
    history,
    worker,
    workers,
    tenants,
    keys,
    concurrency,
    watchdog,
    workflows,
    schedules,
    expectations,
    ui,
    dr,
    rate_limits,
    pause,
    resume,
    pauses,
):
    main.add_command(_command)
finish_options(main)
