"""The ``tickwheel`` click group: global options, and every command group registered.

Each command group lives in its own module: ``_serve`` (serve, dev, migrate),
``_tasks`` (submit, get, cancel, redrive, list), ``_worker``, ``_admin`` (tenants,
keys), ``_watchdog`` and ``_orchestration`` (workflows, schedules, expectations);
shared options are in ``_options``, running and clients in ``_runner``. Called by the
``tickwheel`` entry point (``scheduler.cli:main``).
"""

from __future__ import annotations

import logging

import click

from scheduler.cli._admin import keys, tenants
from scheduler.cli._orchestration import expectations, schedules, workflows
from scheduler.cli._serve import dev, migrate, serve
from scheduler.cli._tasks import cancel, get, list_, redrive, submit
from scheduler.cli._watchdog import watchdog
from scheduler.cli._worker import worker


@click.group()
@click.option("-v", "--verbose", count=True, help="More logging (-vv for debug).")
def main(verbose: int) -> None:
    """Tickwheel: a multi-tenant distributed task scheduler."""
    level = logging.WARNING - 10 * min(verbose, 2)
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")


for _command in (
    serve,
    dev,
    migrate,
    submit,
    get,
    cancel,
    redrive,
    list_,
    worker,
    tenants,
    keys,
    watchdog,
    workflows,
    schedules,
    expectations,
):
    main.add_command(_command)
