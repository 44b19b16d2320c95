"""``tickwheel dr``: disaster recovery of a region's PostgreSQL (issue 16,
docs/regions.md "Disaster recovery").

``dr status`` shows a standby's replication state and lag (so what a promote now would
lose); ``dr promote`` promotes the standby and raises the fencing generation, so no
worker or node of the lost primary can write after it. Calls ``scheduler.store.dr``.
"""

from __future__ import annotations

import click

from scheduler.cli._output import console, print_json
from scheduler.cli._runner import run_coro
from scheduler.store import dr as _dr


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
def status(standby_dsn: str, primary_dsn: str | None, as_json: bool) -> None:
    """Replication state and lag; what a promote now would lose."""
    result = run_coro(_dr.status(standby_dsn, primary_dsn))
    if as_json:
        print_json(result)
        return
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
def promote(standby_dsn: str, as_json: bool) -> None:
    """Promote the standby (pg_promote) and raise the fence: every in-flight task's token
    jumps above every token the lost primary issued, and its lease expires now.

    Idempotent: on a database already promoted and fenced it changes nothing."""
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
