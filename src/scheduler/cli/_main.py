"""The ``tickwheel`` click group: global options, and every command group registered.

Each command group lives in its own module: ``_serve`` (serve, dev, migrate),
``_tasks`` (submit, get, cancel, redrive, list), ``_worker``, ``_admin`` (tenants,
keys), ``_watchdog``, ``_orchestration`` (workflows, schedules, expectations) and ``_ui``
(the web dashboard);
shared options are in ``_options``, running and clients in ``_runner``. Called by the
``tickwheel`` entry point (``scheduler.cli:main``).
"""

from __future__ import annotations

import logging

import click

from scheduler.cli._admin import keys, tenants
from scheduler.cli._bulk import bulk_cancel, bulk_redrive
from scheduler.cli._orchestration import expectations, schedules, workflows
from scheduler.cli._serve import dev, migrate, serve
from scheduler.cli._tasks import cancel, get, history, list_, redrive, submit
from scheduler.cli._ui import ui
from scheduler.cli._watchdog import watchdog
from scheduler.cli._worker import worker

_verbosity = {"global": 0}


def _set_logging(count: int) -> None:
    level = logging.WARNING - 10 * min(count, 2)
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger().setLevel(level)


def _verbose_after(ctx: click.Context, _param: click.Parameter, value: int) -> None:
    """``-v`` after a subcommand (``tickwheel worker -v``) adds to ``tickwheel -v``."""
    if value and not ctx.resilient_parsing:
        _set_logging(_verbosity["global"] + value)


VERBOSE_HELP = "More logging: -v for INFO (connects, drains), -vv for DEBUG."


@click.group()
@click.option("-v", "--verbose", count=True, help=VERBOSE_HELP)
@click.version_option(package_name="tickwheel", message="tickwheel %(version)s")
def main(verbose: int) -> None:
    """Tickwheel: a multi-tenant distributed task scheduler.

    Every option that can come from the environment says so in its command's --help
    ("env var: TICKWHEEL_..."): the flag wins over the variable."""
    _verbosity["global"] = verbose
    _set_logging(verbose)


def _every_command(group: click.Group) -> list[click.Command]:
    out: list[click.Command] = []
    for command in group.commands.values():
        if isinstance(command, click.Group):
            out += _every_command(command)
        else:
            out.append(command)
    return out


def finish_options(group: click.Group) -> None:
    """Give every command ``-v`` and show every option's env var in ``--help``."""
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
    tenants,
    keys,
    watchdog,
    workflows,
    schedules,
    expectations,
    ui,
):
    main.add_command(_command)
finish_options(main)
