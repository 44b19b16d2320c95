"""``tickwheel bulk-cancel`` and ``bulk-redrive``: act on every task a filter matches,
after showing the count the server computed for exactly that filter (issue 18).

Plans with PlanBulkAction, asks for confirmation (or takes ``--yes``), then runs the
plan token with RunBulkAction, which can never act on more than was counted. Calls the
client SDK through ``_runner.with_client``; registered by ``_main``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import click

from scheduler.cli._options import api_key_option, client_options, json_option
from scheduler.cli._output import print_json
from scheduler.cli._runner import fail, run_coro, with_client
from scheduler.cli._tasks import parse_at
from scheduler.client import BulkPlan, BulkResult, Client, Pool, TaskState


def _describe(plan: BulkPlan) -> str:
    parts = [f"states {', '.join(s.value for s in plan.states)}"]
    if plan.type:
        parts.append(f"type {plan.type}")
    if plan.pools:
        parts.append(f"pools {', '.join(p.value for p in plan.pools)}")
    if plan.scheduled_from:
        parts.append(f"scheduled from {plan.scheduled_from.isoformat()}")
    if plan.scheduled_to:
        parts.append(f"scheduled before {plan.scheduled_to.isoformat()}")
    return "; ".join(parts)


def _command(action: str, verb: str, done: str) -> Callable[..., None]:
    def run(
        states: tuple[str, ...],
        task_type: str | None,
        pools: tuple[str, ...],
        scheduled_from: str | None,
        scheduled_to: str | None,
        yes: bool,
        as_json: bool,
        **kw: Any,
    ) -> None:
        async def go(c: Client) -> tuple[BulkPlan, BulkResult | None]:
            plan = await c.plan_bulk(
                action,
                states=[TaskState(s.upper()) for s in states],
                type=task_type,
                pools=[Pool(p) for p in pools],
                scheduled_from=parse_at(scheduled_from, "--from") if scheduled_from else None,
                scheduled_to=parse_at(scheduled_to, "--to") if scheduled_to else None,
            )
            if not as_json:
                click.echo(f"{plan.count} task(s) to {verb} ({_describe(plan)})")
            if plan.count == 0:
                return plan, None
            if not yes:
                try:
                    ok = await asyncio.to_thread(click.confirm, f"{verb.capitalize()} them?")
                except click.Abort:
                    # No answer (stdin closed, as in a script, or Ctrl-C): one line.
                    click.echo("", err=True)
                    fail(f"no answer, so none {done}; --yes {verb}s them without asking")
                if not ok:
                    return plan, None
            return plan, await c.run_bulk(plan.plan_token)

        plan, result = run_coro(with_client(kw, go))
        if as_json:
            print_json({"plan": plan, "result": result})
        elif result is not None:
            click.echo(f"{result.changed} of {result.matched} matching task(s) {done}")
        elif plan.count:
            click.echo("nothing done")

    return run


def _bulk(name: str, action: str, done: str, doc: str) -> click.Command:
    fn = _command(action, action, done)
    fn.__doc__ = doc
    for option in reversed(
        [
            click.option(
                "--state",
                "states",
                multiple=True,
                type=click.Choice([s.value for s in TaskState], case_sensitive=False),
                help="Only tasks in this state (repeatable; narrowed to the action's).",
            ),
            click.option("--type", "task_type", help="Only tasks of this type."),
            click.option(
                "--pool",
                "pools",
                multiple=True,
                type=click.Choice([p.value for p in Pool]),
                help="Only tasks of this pool (repeatable).",
            ),
            click.option("--from", "scheduled_from", help="Scheduled at or after (ISO time)."),
            click.option("--to", "scheduled_to", help="Scheduled before (ISO time)."),
            click.option("--yes", is_flag=True, help="Do not ask for confirmation."),
            client_options,
            api_key_option,
            json_option,
        ]
    ):
        fn = option(fn)
    return click.command(name=name)(fn)


bulk_cancel = _bulk(
    "bulk-cancel",
    "cancel",
    "cancelled",
    "Cancel every task a filter matches (not terminal), after showing the count.",
)
bulk_redrive = _bulk(
    "bulk-redrive",
    "redrive",
    "redriven",
    "Redrive every DEAD_LETTER task a filter matches, after showing the count.",
)
