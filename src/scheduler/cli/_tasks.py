"""``tickwheel submit``, ``get``, ``cancel``, ``redrive``, ``list`` and ``history``
(client commands).

Calls the client SDK through ``_runner.with_client``; registered by ``_main``.
"""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime, time, timedelta
from typing import Any

import click

from scheduler.cli._options import api_key_option, client_options, json_option, wide_option
from scheduler.cli._output import (
    print_history,
    print_json,
    print_task,
    print_task_json,
    print_tasks,
    task_doc,
)
from scheduler.cli._runner import run_coro, with_client
from scheduler.client import (
    Client,
    Debounce,
    DebouncePayload,
    IdempotencyScope,
    JitterMode,
    Pool,
    Task,
    TaskOrder,
    TaskState,
    Throttle,
)
from scheduler.limits import MAX_TIMESTAMP_SECONDS, TIMESTAMP_RANGE_TEXT


def _when(at: str | None, in_s: float | None) -> datetime | None:
    if at and in_s is not None:
        raise click.UsageError("give --at or --in, not both")
    if in_s is not None:
        return after_seconds(in_s)
    if at:
        return parse_at(at, time_of_day=True)
    return None


def after_seconds(in_s: float, hint: str = "--in") -> datetime:
    """Now plus ``in_s`` seconds; a value that is not a number of seconds inside the
    accepted range (nan, inf, 1e12, negative) is a usage error naming the option."""
    now = datetime.now(UTC)
    latest = (_EPOCH + timedelta(seconds=MAX_TIMESTAMP_SECONDS - 1) - now).total_seconds()
    if not (math.isfinite(in_s) and 0 <= in_s <= latest):
        raise click.BadParameter(
            f"{in_s!r} is not a delay: give a number of seconds, 0 or more, that ends "
            f"within {TIMESTAMP_RANGE_TEXT}",
            param_hint=hint,
        )
    return now + timedelta(seconds=in_s)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

AT_FORMATS = (
    "an ISO 8601 time such as 2030-01-31T09:00:00Z, 2030-01-31 09:00+01:00 or "
    "2030-01-31 (UTC when no offset is given)"
)
TIME_OF_DAY = "a time of day such as 21:38:40 or 09:00+01:00 (its next occurrence)"


def parse_at(at: str, hint: str = "--at", *, time_of_day: bool = False) -> datetime:
    """``--at`` as an aware time; anything else is a usage error naming the formats.

    With ``time_of_day``, a bare time (``21:38:40``, ``09:00+01:00``) means its next
    occurrence, as at(1) reads it: today when it is still ahead, else tomorrow; UTC
    when no offset is given, like a full time without one."""
    text = at.strip()
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        clock = _time_of_day(text) if time_of_day else None
        if clock is None:
            formats = f"{AT_FORMATS}, {TIME_OF_DAY}" if time_of_day else AT_FORMATS
            raise click.BadParameter(
                f"{at!r} is not a time: give {formats}, or use --in SECONDS", param_hint=hint
            ) from None
        return _next_occurrence(clock)
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def _time_of_day(text: str) -> time | None:
    try:
        clock = time.fromisoformat(text)
    except ValueError:
        return None
    return clock if clock.tzinfo else clock.replace(tzinfo=UTC)


def _next_occurrence(clock: time, now: datetime | None = None) -> datetime:
    """The first instant at or after ``now`` whose wall clock in ``clock``'s offset
    reads ``clock``."""
    assert clock.tzinfo is not None
    now = (now or datetime.now(UTC)).astimezone(clock.tzinfo)
    when = datetime.combine(now.date(), clock)
    return when if when >= now else when + timedelta(days=1)


@click.command()
@click.argument("task_type")
@click.option("--payload", default="{}", help="JSON object.")
@click.option(
    "--at",
    help=(
        "When to run: an ISO 8601 time (2030-01-31T09:00:00Z), or a time of day "
        "(21:38:40) meaning its next occurrence: today if still ahead, else tomorrow. "
        "UTC unless an offset is given (09:00+01:00)."
    ),
)
@click.option("--in", "in_s", type=float, help="Run in this many seconds (0 or more).")
@click.option("--idempotency-key")
@click.option(
    "--concurrency-key",
    help="At most the type's concurrency limit of this key's tasks run at once "
    "(tickwheel concurrency set).",
)
@click.option("--pool", type=click.Choice([p.value for p in Pool]), default=Pool.STANDARD.value)
@click.option("--strict", is_flag=True, help="Strict timing: no jitter, even on a round instant.")
@click.option(
    "--jitter",
    type=click.Choice([j.value for j in JitterMode]),
    help=(
        "Jitter mode. Default: a task never runs before the time asked; one asked for a "
        "whole minute (--at 12:00:00) is spread late-only over the jitter window (120 s) "
        "to smooth stampedes, any other time (--in 30) runs at that time. late_only: "
        "always spread late. symmetric: may run up to the window EARLY. none: no jitter."
    ),
)
@click.option("--max-retries", type=int)
@click.option("--timeout-s", type=float, default=0.0)
@click.option(
    "--debounce-key",
    help="Debounce by key: replace the key's pending task instead of adding one "
    "(docs/flow-control.md). Needs --debounce-s.",
)
@click.option(
    "--debounce-s", type=float, help="Debounce period: due this long after the last submit."
)
@click.option(
    "--debounce-max-s",
    type=float,
    default=0.0,
    help="Never later than this long after the burst's first submit (0: no cap).",
)
@click.option(
    "--debounce-keep",
    type=click.Choice([p.value for p in DebouncePayload]),
    default=DebouncePayload.LATEST.value,
    help="Which submission's payload the task runs with.",
)
@click.option(
    "--throttle-key",
    help="Throttle by key: at most one task per --throttle-s of due time per key.",
)
@click.option("--throttle-s", type=float, help="Throttle period in seconds.")
@click.option(
    "--idempotency-ttl",
    "idempotency_ttl_s",
    type=float,
    default=0.0,
    help="Seconds the --idempotency-key dedupes for (0: as long as its task is kept).",
)
@click.option(
    "--idempotency-until-finished",
    is_flag=True,
    help="The --idempotency-key dedupes only while its task is not finished.",
)
@click.option(
    "--rate-limit-key",
    help="Start no faster than this key's rate limit allows (tickwheel rate-limits set).",
)
@client_options
@api_key_option
@json_option
def submit(
    task_type: str,
    payload: str,
    at: str | None,
    in_s: float | None,
    idempotency_key: str | None,
    concurrency_key: str | None,
    pool: str,
    strict: bool,
    jitter: str | None,
    max_retries: int | None,
    timeout_s: float,
    debounce_key: str | None,
    debounce_s: float | None,
    debounce_max_s: float,
    debounce_keep: str,
    throttle_key: str | None,
    throttle_s: float | None,
    idempotency_ttl_s: float,
    idempotency_until_finished: bool,
    rate_limit_key: str | None,
    as_json: bool,
    **kw: Any,
) -> None:
    """Submit one task."""
    try:
        data = json.loads(payload)
    except ValueError as exc:
        raise click.BadParameter(f"not JSON: {exc}", param_hint="--payload") from None
    if not isinstance(data, dict):
        raise click.BadParameter("must be a JSON object", param_hint="--payload")
    when = _when(at, in_s)
    debounce = None
    if debounce_key is not None or debounce_s is not None:
        if not debounce_key or debounce_s is None:
            raise click.UsageError("--debounce-key and --debounce-s go together")
        debounce = Debounce(
            key=debounce_key,
            period_s=debounce_s,
            max_delay_s=debounce_max_s,
            payload=DebouncePayload(debounce_keep),
        )
    throttle = None
    if throttle_key is not None or throttle_s is not None:
        if not throttle_key or throttle_s is None:
            raise click.UsageError("--throttle-key and --throttle-s go together")
        throttle = Throttle(key=throttle_key, period_s=throttle_s)
    scope = (
        IdempotencyScope.UNTIL_FINISHED if idempotency_until_finished else IdempotencyScope.FOREVER
    )
    task = run_coro(
        with_client(
            kw,
            lambda c: c.submit(
                task_type,
                data,
                scheduled_at=when,
                idempotency_key=idempotency_key,
                pool=Pool(pool),
                strict_timing=strict,
                jitter_mode=JitterMode(jitter) if jitter else None,
                max_retries=max_retries,
                timeout_s=timeout_s,
                debounce=debounce,
                throttle=throttle,
                idempotency_ttl_s=idempotency_ttl_s,
                idempotency_scope=scope,
                concurrency_key=concurrency_key,
                rate_limit_key=rate_limit_key,
            ),
        )
    )
    print_task_json(task, submitted=True) if as_json else print_task(task, submitted=True)


@click.command()
@click.argument("task_id")
@client_options
@api_key_option
@json_option
def get(task_id: str, as_json: bool, **kw: Any) -> None:
    """Show one task."""
    task = run_coro(with_client(kw, lambda c: c.get(task_id)))
    print_task_json(task) if as_json else print_task(task)


@click.command()
@click.argument("task_id")
@client_options
@api_key_option
@json_option
def cancel(task_id: str, as_json: bool, **kw: Any) -> None:
    """Cancel a task."""
    task = run_coro(with_client(kw, lambda c: c.cancel(task_id)))
    print_task_json(task) if as_json else print_task(task)


@click.command()
@click.argument("task_id")
@click.option(
    "--at",
    help="When to run again (default now): as submit's --at, an ISO time or a time of day.",
)
@client_options
@api_key_option
@json_option
def redrive(task_id: str, at: str | None, as_json: bool, **kw: Any) -> None:
    """Move a DEAD_LETTER task back to SCHEDULED."""
    when = _when(at, None)
    task = run_coro(with_client(kw, lambda c: c.redrive(task_id, scheduled_at=when)))
    print_task_json(task) if as_json else print_task(task)


_ORDERS = {
    ("created", "desc"): TaskOrder.CREATED_DESC,
    ("created", "asc"): TaskOrder.CREATED_ASC,
    ("scheduled", "desc"): TaskOrder.SCHEDULED_DESC,
    ("scheduled", "asc"): TaskOrder.SCHEDULED_ASC,
}


@click.command(name="list")
@click.option(
    "--state",
    "states",
    multiple=True,
    type=click.Choice([s.value for s in TaskState], case_sensitive=False),
    help="Only tasks in this state (repeatable).",
)
@click.option("--type", "task_type", help="Only tasks of this type.")
@click.option(
    "--sort",
    type=click.Choice(["created", "scheduled"]),
    default="created",
    show_default=True,
    help="created: submission order; scheduled: the time asked for (before jitter).",
)
@click.option(
    "--order",
    type=click.Choice(["desc", "asc"]),
    default="desc",
    show_default=True,
    help="desc: newest or latest first.",
)
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    default=100,
    show_default=True,
    help="Show at most this many (a line on stderr says when more exist).",
)
@click.option("--page-token", default="", help="Continue where a previous list stopped.")
@wide_option
@client_options
@api_key_option
@json_option
def list_(
    states: tuple[str, ...],
    task_type: str | None,
    sort: str,
    order: str,
    limit: int,
    page_token: str,
    wide: bool,
    as_json: bool,
    **kw: Any,
) -> None:
    """List tasks, newest first. DUE_AT is the effective due time (after jitter and
    retry backoff); RETRIES is failed attempts of those allowed."""
    task_order = _ORDERS[(sort, order)]

    async def fetch(c: Client) -> tuple[list[Task], str]:
        out: list[Task] = []
        token = page_token
        while len(out) < limit:
            page = await c.list_page(
                states=[TaskState(s.upper()) for s in states],
                type=task_type,
                page_size=min(limit - len(out), 1000),
                page_token=token,
                order=task_order,
            )
            out.extend(page.tasks)
            token = page.next_page_token
            if not token:
                break
        return out, token

    tasks, more = run_coro(with_client(kw, fetch))
    if as_json:
        print_json([task_doc(t) for t in tasks])
    else:
        print_tasks(tasks, wide=wide)
    if more:
        click.echo(
            f"more tasks exist: continue with --page-token {more} (same --sort and --order)",
            err=True,
        )


@click.command()
@click.argument("task_id")
@client_options
@api_key_option
@json_option
def history(task_id: str, as_json: bool, **kw: Any) -> None:
    """Every state change of a task, oldest first: when, from and to which state, the
    fencing token, the shard epoch (PostgreSQL), who wrote it (a worker id or a node)
    and why."""
    found = run_coro(with_client(kw, lambda c: c.history(task_id)))
    print_json(found) if as_json else print_history(found)
