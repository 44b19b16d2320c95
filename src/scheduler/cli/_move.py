"""``tickwheel tenants move TENANT --to REGION``: move a tenant's home (issue 16).

An operator command: it talks to the two regions' PostgreSQL databases (their
``postgres_dsn`` in the region directory file), not to a node; the nodes of both
regions learn of the move from their database (``tenant_moves``). Calls
:func:`scheduler.store.postgres.move.move_tenant`; registered on the ``tenants`` group
by ``_main``.
"""

from __future__ import annotations

import uuid

import click

from scheduler._errors import InvalidArgument
from scheduler.cli._admin import tenants
from scheduler.cli._output import print_json
from scheduler.cli._runner import run_coro
from scheduler.regions import RegionDirectory


async def _source_of(tenant_id: uuid.UUID, directory: RegionDirectory) -> str:
    """The region whose database holds the tenant at home."""
    import asyncpg

    for region in directory:
        if region.postgres_dsn is None:
            continue
        conn = await asyncpg.connect(
            region.postgres_dsn, timeout=10, server_settings={"tickwheel.tenant": "*"}
        )
        try:
            home = await conn.fetchval("SELECT home_region FROM tenants WHERE id = $1", tenant_id)
        finally:
            await conn.close()
        if home == region.name:
            return region.name
    raise InvalidArgument("from", f"no region of the directory holds tenant {tenant_id} at home")


def _dsn(directory: RegionDirectory, name: str, flag: str) -> str:
    dsn = directory.get(name).postgres_dsn
    if not dsn:
        raise InvalidArgument(flag, f"region {name!r} has no postgres_dsn in the regions file")
    return dsn


@tenants.command(name="move")
@click.argument("tenant_id")
@click.option("--to", "to_region", required=True, help="The tenant's new home region.")
@click.option(
    "--from",
    "from_region",
    default=None,
    help="Its current home (default: the region whose database holds it at home).",
)
@click.option(
    "--regions-file",
    required=True,
    envvar="TICKWHEEL_REGIONS_FILE",
    type=click.Path(dir_okay=False),
    help="The region directory (JSON) with each region's postgres_dsn.",
)
@click.option(
    "--settle-s",
    type=click.FloatRange(min=0),
    default=0.3,
    show_default=True,
    help="How long the freeze is given to reach the source's nodes before the copy "
    "(at least their move poll interval, 0.2 s by default).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def tenants_move(
    tenant_id: str,
    to_region: str,
    from_region: str | None,
    regions_file: str,
    settle_s: float,
    as_json: bool,
) -> None:
    """Move a tenant's home to another region: freeze it at its home, copy its live
    rows, flip its home and open it there. Its calls and dispatches pause meanwhile
    (retried by the SDKs); nothing is lost or run twice. Safe to run again after a
    failure: it resumes."""
    from scheduler.store.postgres.move import move_tenant

    async def run() -> dict[str, object]:
        try:
            tid = uuid.UUID(tenant_id)
        except ValueError:
            raise InvalidArgument("tenant_id", f"{tenant_id!r} is not a tenant id") from None
        directory = RegionDirectory.load(regions_file)
        directory.get(to_region)
        source = from_region or await _source_of(tid, directory)
        report = await move_tenant(
            tid,
            source_dsn=_dsn(directory, source, "from"),
            target_dsn=_dsn(directory, to_region, "to"),
            source_region=source,
            target_region=to_region,
            settle_s=settle_s,
            on_step=None if as_json else lambda s: click.echo(f"  {s}"),
        )
        return report.as_dict()

    doc = run_coro(run())
    if as_json:
        print_json(doc)
    else:
        click.echo(
            f"tenant {doc['tenant_id']} moved {doc['from_region']} -> {doc['to_region']}: "
            f"{doc['tasks_moved']} live tasks, {doc['schedules_moved']} schedules, "
            f"paused {doc['paused_s']} s ({doc['copies']} copy round(s), "
            f"flip {doc['flip_s']} s)"
        )
