"""``tickwheel dr``: disaster recovery of a region's PostgreSQL (issue 16,
docs/regions.md "Disaster recovery").

``dr status`` shows a standby's replication state and lag (so what a promote now would
lose); ``dr promote`` promotes the standby and raises the fencing generation, so no
worker or node of the lost primary can write after it. Calls ``scheduler.store.postgres.dr``.
"""

from __future__ import annotations

from typing import Any

import click

from scheduler.cli._output import console, print_json
from scheduler.cli._runner import run_coro
from scheduler.store.postgres import dr as _dr


def _witness_options(fn: Any) -> Any:
    for option in reversed(
        [
            click.option(
                "--etcd",
                "witness_etcd",
                envvar="TICKWHEEL_WITNESS_ETCD",
                help="Comma-separated host:port of the witnessed etcd cluster holding the "
                "region lease (docs/regions.md, Automatic failover).",
            ),
            click.option("--region", envvar="TICKWHEEL_REGION", default="local", show_default=True),
            click.option(
                "--site",
                envvar="TICKWHEEL_WITNESS_SITE",
                default="b",
                show_default=True,
                help="This (the standby's) site.",
            ),
            click.option("--prefix", default="/tickwheel", show_default=True),
        ]
    ):
        fn = option(fn)
    return fn


def _witness_config(etcd: str, region: str, site: str, prefix: str) -> Any:
    from scheduler.dr import WitnessConfig

    try:
        return WitnessConfig(
            etcd_endpoints=tuple(e.strip() for e in etcd.split(",") if e.strip()),
            region=region,
            site=site,
            prefix=prefix,
        )
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None


async def _region_state(config: Any) -> Any:
    from scheduler.dr import read_state
    from scheduler.dr._witness import ERRORS, new_client

    for endpoint in config.etcd_endpoints:
        client = new_client(endpoint, config.etcd_timeout_s)
        try:
            return await read_state(client, config)
        except ERRORS:
            continue
        finally:
            await client.close()
    return None


@click.group()
def dr() -> None:
    """Disaster recovery: a standby's status, and its promote with the fence."""


@dr.command("status")
@click.option(
    "--standby-dsn",
    envvar="TICKWHEEL_STANDBY_DSN",
    required=True,
    help="The standby's PostgreSQL DSN.",
)
@click.option(
    "--primary-dsn",
    envvar="TICKWHEEL_POSTGRES_DSN",
    help="The primary's DSN: adds the lag in bytes and replay_lag (skipped if it is down).",
)
@click.option("--json", "as_json", is_flag=True, help="One JSON object.")
@_witness_options
def status(
    standby_dsn: str,
    primary_dsn: str | None,
    as_json: bool,
    witness_etcd: str | None,
    region: str,
    site: str,
    prefix: str,
) -> None:
    """Replication state and lag; what a promote now would lose; with --etcd, which
    site holds the region and which of its nodes hold their lease."""
    result = run_coro(_dr.status(standby_dsn, primary_dsn))
    held: Any = None
    if witness_etcd:
        held = run_coro(_region_state(_witness_config(witness_etcd, region, site, prefix)))
    if as_json:
        import dataclasses

        doc: dict[str, Any] = dataclasses.asdict(result)
        if witness_etcd:
            doc["region"] = (
                {"reachable": False}
                if held is None
                else {
                    "reachable": True,
                    "active": held.active,
                    "alive": {k: list(v) for k, v in held.alive.items()},
                }
            )
        print_json(doc)
        return
    if witness_etcd:
        if held is None:
            console.print("region:            witness unreachable (no quorum)")
        else:
            nodes = "; ".join(f"{k}: {', '.join(v)}" for k, v in sorted(held.alive.items()))
            console.print(
                f"region {region}:     held by site {held.active} "
                f"(nodes holding a lease: {nodes or 'none'})"
            )
    role = "standby (in recovery)" if result.standby_in_recovery else "PRIMARY (promoted)"
    console.print(f"database:          {role}, fencing generation {result.generation}")
    console.print(
        f"standby replayed:  {result.standby_replay_lsn} (received {result.standby_receive_lsn})"
    )
    if result.replay_delay_s is not None:
        console.print(f"last replayed commit: {result.replay_delay_s:.1f} s ago")
    if not result.primary_reachable:
        console.print("primary:           unreachable (standby side only)")
        return
    console.print(
        f"primary:           at {result.primary_lsn}, {result.sync_state or 'no'} standby"
    )
    console.print(
        f"lag:               {result.lag_bytes} bytes"
        + (f", replay_lag {result.replay_lag_s:.3f} s" if result.replay_lag_s is not None else "")
    )
    console.print(
        f"a promote now would lose {result.lag_bytes} bytes of WAL"
        if result.lag_bytes
        else "a promote now would lose nothing"
    )


@dr.command("promote")
@click.option(
    "--standby-dsn",
    envvar="TICKWHEEL_STANDBY_DSN",
    required=True,
    help="The standby's PostgreSQL DSN (a superuser, or a role granted pg_promote).",
)
@click.option("--json", "as_json", is_flag=True, help="One JSON object.")
@_witness_options
def promote(
    standby_dsn: str,
    as_json: bool,
    witness_etcd: str | None,
    region: str,
    site: str,
    prefix: str,
) -> None:
    """Promote the standby (pg_promote) and raise the fence: every in-flight task's token
    jumps above every token the lost primary issued, and its lease expires now.

    With --etcd (the manual override of `dr watch`): first move the region lease to
    --site unconditionally, so the old site's nodes stop dispatching at their next renewal
    and cannot start again.

    Idempotent: on a database already promoted and fenced it changes nothing."""
    if witness_etcd:
        run_coro(_take(_witness_config(witness_etcd, region, site, prefix)))
    report = run_coro(_dr.promote(standby_dsn))
    if as_json:
        print_json(report)
        return
    if not report.fenced:
        console.print(
            f"already promoted and fenced (generation {report.generation}, "
            f"raised at {report.raised_at}): nothing to do"
        )
        return
    console.print(
        ("promoted" if report.promoted else "already promoted")
        + f" in {report.promote_s:.3f} s; fence raised in {report.fence_s:.3f} s: "
        f"generation {report.old_generation} -> {report.generation}, "
        f"{report.tasks_fenced} in-flight task(s) fenced, {report.shards} shard epoch(s) raised"
    )


async def _take(config: Any) -> None:
    from scheduler.dr import take_region
    from scheduler.dr._witness import new_client

    client = new_client(config.etcd_endpoints[0], config.etcd_timeout_s)
    try:
        await take_region(client, config, from_site=None, revision=None)
    finally:
        await client.close()


@dr.command("watch")
@click.option(
    "--standby-dsn",
    envvar="TICKWHEEL_STANDBY_DSN",
    required=True,
    help="The standby's PostgreSQL DSN (a superuser, or a role granted pg_promote).",
)
@_witness_options
@click.option(
    "--from-site",
    default="a",
    show_default=True,
    help="The site serving the region now (the primary's).",
)
@click.option(
    "--detection-s",
    type=float,
    default=5.0,
    show_default=True,
    help="How long no node of --from-site may hold its lease (after etcd expired the "
    "last one) before the promotion.",
)
@click.option("--poll-interval-s", type=float, default=0.5, show_default=True)
@click.option("--dry-run", is_flag=True, help="Decide and log, never take or promote.")
@click.option(
    "--metrics-port",
    type=int,
    help="Serve tickwheel_dr_* metrics on this port (/metrics); off by default.",
)
def watch(
    standby_dsn: str,
    witness_etcd: str | None,
    region: str,
    site: str,
    prefix: str,
    from_site: str,
    detection_s: float,
    poll_interval_s: float,
    dry_run: bool,
    metrics_port: int | None,
) -> None:
    """Promote the standby automatically once the witness lets this site take the
    region: no node of --from-site has held its lease for --detection-s (docs/regions.md,
    Automatic failover). Logs every decision; runs until stopped."""
    from scheduler.dr import Orchestrator, OrchestratorConfig

    if not witness_etcd:
        raise click.UsageError("dr watch needs --etcd (the witnessed etcd cluster)")
    try:
        config = OrchestratorConfig(
            witness=_witness_config(witness_etcd, region, site, prefix),
            from_site=from_site,
            standby_dsn=standby_dsn,
            detection_s=detection_s,
            poll_interval_s=poll_interval_s,
            dry_run=dry_run,
        )
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    orchestrator = Orchestrator(config)
    if metrics_port is not None:
        from scheduler.dr._metrics import serve_metrics

        serve_metrics(orchestrator, metrics_port)
    console.print(
        f"dr watch: site {site} watching region {region} (from site {from_site}, "
        f"detection {detection_s:.1f} s{', dry run' if dry_run else ''})"
    )
    from scheduler.cli._runner import run_node

    run_node(orchestrator.run())
