"""Cron and fixed-interval schedules: every occurrence becomes one task.

Expressions are parsed by croniter: 5 fields, or 6 with seconds first
(``*/10 * * * * *``), evaluated in the schedule's IANA time zone. Daylight saving:
a time that does not exist (02:30 on a spring-forward night) runs once at the first
instant after the gap (03:00); a repeated hour (fall back) runs a job that pins its
hour once, and a job with a wildcard hour (``*/30 * * * *``) by elapsed time, in
both passes (the classic cron rule).

The loop (one per node, every ``schedule_interval_s``) asks the store for schedules
whose ``next_fire_at`` is within ``schedule_lead_s`` of now, inserts their
occurrences as tasks, then advances ``next_fire_at`` with a compare-and-set. A task's
idempotency key is ``sched:<schedule id>:<occurrence time>``, so two nodes, or a node
that crashed between insert and advance, can never create an occurrence twice.
Occurrences are inserted a little ahead (the lead) so they sit in the wheel and go out
on time.

Catch-up: after downtime, occurrences older than ``catchup_window_s`` are skipped.
Overlap (a previous task of the schedule still live): ``skip`` drops the occurrence,
``buffer_one`` holds one and starts it as soon as the live task ends, ``allow`` starts
it anyway. Jitter: late-only, deterministic per occurrence, in [0, ``jitter_s``].
"""

from __future__ import annotations

import asyncio
import builtins
import dataclasses
import logging
import math
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterBadDateError, croniter

from scheduler._aio import wait_event
from scheduler._errors import InvalidArgument, NotFound
from scheduler.engine._admission import Admission
from scheduler.engine._config import EngineConfig
from scheduler.engine._stats import EngineStats
from scheduler.engine._timeline import Timeline
from scheduler.engine._types import SubmitSpec
from scheduler.ids import uuid7
from scheduler.jitter import stable_hash
from scheduler.logs import task_extra
from scheduler.store import Store, StoreUnavailable
from scheduler.types import JSON, Expectation, NewTask, OverlapPolicy, Pool, Schedule

log = logging.getLogger("tickwheel.engine.schedules")

MAX_JITTER_S = 3600.0
MIN_INTERVAL_S = 1.0
MAX_EXPECTATION_S = 366 * 86400
"""Upper bound of an expectation's interval, tolerance and max runtime (seconds)."""
MAX_JOB_ID_LEN = 128


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ScheduleSpec:
    """A client's schedule: exactly one of ``cron`` and ``interval_s``."""

    name: str
    task_type: str
    payload: JSON = dataclasses.field(default_factory=dict)
    cron: str = ""
    interval_s: float = 0.0
    timezone: str = "UTC"
    pool: Pool = Pool.STANDARD
    max_retries: int = 3
    timeout_s: float = 0.0
    overlap_policy: OverlapPolicy = OverlapPolicy.SKIP
    catchup_window_s: float = 60.0
    jitter_s: float | None = None
    """Late-only jitter bound; None: :func:`default_jitter_s` of the schedule's period."""
    paused: bool = False


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ExpectationSpec:
    """A client's dead man's switch entry: the job (or schedule) must complete every
    ``interval_s``, give or take ``tolerance_s`` (checked by ``tickwheel watchdog``)."""

    interval_s: int
    tolerance_s: int
    job_id: str = ""
    """A task type or schedule name; with ``schedule_id`` it defaults to the schedule's
    name. The expectation's key per tenant: registering it again replaces it."""
    schedule_id: uuid.UUID | None = None
    max_runtime_s: int | None = None


def _pins_hour(expr: str) -> bool:
    fields = expr.split()
    hour = fields[2] if len(fields) == 6 else fields[1]
    return not any(ch in hour for ch in "*/")


def occurrences_after(
    schedule: Schedule, after: datetime, until: datetime, limit: int
) -> list[datetime]:
    """Occurrences ``t`` with ``after < t <= until`` (at most ``limit``), in UTC."""
    out: list[datetime] = []
    if schedule.interval_s > 0:
        step = timedelta(seconds=schedule.interval_s)
        t = after + step
        while t <= until and len(out) < limit:
            out.append(t)
            t += step
        return out
    tz = ZoneInfo(schedule.timezone)
    expr = schedule.cron_expr
    it = croniter(expr, after.astimezone(tz), second_at_beginning=len(expr.split()) == 6)
    pins = _pins_hour(expr)
    last_wall: datetime | None = None
    while len(out) < limit:
        try:
            local: datetime = it.get_next(datetime)
        except CroniterBadDateError:
            break  # croniter gives up on dates that never come (Feb 30): no more
        if local.astimezone(UTC) > until:
            break
        wall = local.replace(tzinfo=None)
        if pins and wall == last_wall:
            continue  # the repeated hour of a fall-back night: once is enough
        last_wall = wall
        out.append(local.astimezone(UTC))
    return out


def next_after(schedule: Schedule, after: datetime) -> datetime:
    """The first occurrence strictly after ``after``."""
    (t,) = occurrences_after(schedule, after, after + timedelta(days=3660), 1) or (None,)
    if t is None:
        raise InvalidArgument("cron", "the expression never fires")
    return t


def occurrence_key(schedule_id: uuid.UUID, at: datetime) -> str:
    """The idempotency key of an occurrence's task."""
    return f"sched:{schedule_id}:{at.astimezone(UTC).isoformat()}"


DEFAULT_JITTER_SHARE = 0.1
"""A schedule without its own ``jitter_s`` spreads each occurrence over this share of
its period (at most the engine's jitter window)."""


def default_jitter_s(period_s: float, window_s: float) -> float:
    """The late-only jitter bound of a schedule that names none: a tenth of its period,
    at most ``window_s``, in whole milliseconds. An hourly cron job spreads over the
    window (120 s), a minutely one over 6 s, so fleets of schedules on the same minute
    do not start in the same millisecond, and no occurrence is pushed near the next."""
    return math.floor(min(window_s, DEFAULT_JITTER_SHARE * max(period_s, 0.0)) * 1000) / 1000


def jitter_of(schedule: Schedule, at: datetime) -> timedelta:
    """Late-only deterministic jitter of one occurrence."""
    if schedule.jitter_s <= 0:
        return timedelta(0)
    span_ms = int(schedule.jitter_s * 1000) + 1
    h = stable_hash(schedule.id, uuid.UUID(int=int(at.timestamp() * 1_000_000)))
    return timedelta(milliseconds=h % span_ms)


class Schedules:
    """The engine's schedule front (create, pause, resume, delete) and its loop."""

    def __init__(
        self,
        store: Store,
        config: EngineConfig,
        now: Callable[[], datetime],
        admission: Admission,
        timeline: Timeline,
        stats: EngineStats,
    ) -> None:
        self._store = store
        self._config = config
        self._now = now
        self._admission = admission
        self._timeline = timeline
        self._stats = stats
        self._wake = asyncio.Event()

    def wake(self) -> None:
        """Look at the schedules now (after a fake clock moved)."""
        self._wake.set()

    # -- client actions ------------------------------------------------------------------
    def validate(self, spec: ScheduleSpec) -> Schedule:
        """The schedule row for ``spec``; InvalidArgument naming the field."""
        if not spec.name or len(spec.name) > 128:
            raise InvalidArgument("schedule.name", "must be 1..128 characters")
        self._admission.validate(
            SubmitSpec(
                type=spec.task_type,
                payload=spec.payload,
                max_retries=spec.max_retries,
                timeout_s=spec.timeout_s,
            ),
            "schedule",
        )
        if bool(spec.cron) == (spec.interval_s > 0):
            raise InvalidArgument("schedule.cron", "set exactly one of cron and interval_s")
        if spec.interval_s and spec.interval_s < MIN_INTERVAL_S:
            raise InvalidArgument("schedule.interval_s", f"must be at least {MIN_INTERVAL_S} s")
        if spec.cron:
            fields = spec.cron.split()
            if len(fields) not in (5, 6) or len(spec.cron) > 128:
                raise InvalidArgument("schedule.cron", "needs 5 fields, or 6 with seconds first")
            if not croniter.is_valid(spec.cron, second_at_beginning=len(fields) == 6):
                raise InvalidArgument(
                    "schedule.cron", f"not a valid cron expression: {spec.cron!r}"
                )
        try:
            ZoneInfo(spec.timezone)
        except (ZoneInfoNotFoundError, ValueError, OSError) as exc:
            # OSError: a directory name ("America") or a name too long for the file system.
            raise InvalidArgument(
                "schedule.timezone", f"unknown time zone {spec.timezone!r}"
            ) from exc
        if spec.catchup_window_s < 0:
            raise InvalidArgument("schedule.catchup_window_s", "must not be negative")
        if spec.jitter_s is not None and not 0 <= spec.jitter_s <= MAX_JITTER_S:
            raise InvalidArgument("schedule.jitter_s", f"must be 0..{MAX_JITTER_S:g}")
        now = self._now()
        draft = Schedule(
            id=uuid7(),
            tenant_id=uuid.UUID(int=0),
            name=spec.name,
            cron_expr=spec.cron,
            interval_s=spec.interval_s,
            timezone=spec.timezone,
            task_type=spec.task_type,
            payload=spec.payload,
            pool=spec.pool,
            max_retries=spec.max_retries,
            timeout_s=spec.timeout_s,
            overlap_policy=spec.overlap_policy,
            catchup_window_s=spec.catchup_window_s,
            jitter_s=spec.jitter_s or 0.0,
            enabled=not spec.paused,
            created_at=now,
            updated_at=now,
        )
        try:
            first = next_after(draft, now)
        except InvalidArgument as exc:
            raise InvalidArgument("schedule.cron", exc.problem) from None
        jitter_s = spec.jitter_s
        if jitter_s is None:
            period = (next_after(draft, first) - first).total_seconds()
            jitter_s = default_jitter_s(period, self._config.jitter_window_s)
        return dataclasses.replace(draft, next_fire_at=first, jitter_s=jitter_s)

    async def create(self, tenant_id: uuid.UUID, spec: ScheduleSpec) -> Schedule:
        """Validate and store; the first occurrence is the first one after now."""
        draft = dataclasses.replace(self.validate(spec), tenant_id=tenant_id)
        created = await self._store.create_schedule(draft)
        self._wake.set()
        return created

    async def get(self, tenant_id: uuid.UUID, schedule_id: uuid.UUID) -> Schedule:
        """One of the tenant's schedules."""
        return await self._store.get_schedule(tenant_id, schedule_id)

    async def list(self, tenant_id: uuid.UUID) -> list[Schedule]:
        """The tenant's schedules."""
        return await self._store.list_schedules(tenant_id)

    async def pause(self, tenant_id: uuid.UUID, schedule_id: uuid.UUID) -> Schedule:
        """Stop creating occurrences (a buffered one is dropped)."""
        current = await self.get(tenant_id, schedule_id)
        return await self._store.set_schedule_enabled(
            tenant_id, schedule_id, False, current.next_fire_at, self._now()
        )

    async def resume(self, tenant_id: uuid.UUID, schedule_id: uuid.UUID) -> Schedule:
        """Start again from the first occurrence after now (no catch-up of the pause)."""
        current = await self.get(tenant_id, schedule_id)
        now = self._now()
        out = await self._store.set_schedule_enabled(
            tenant_id, schedule_id, True, next_after(current, now), now
        )
        self._wake.set()
        return out

    async def delete(self, tenant_id: uuid.UUID, schedule_id: uuid.UUID) -> None:
        """Delete; tasks already created stay."""
        await self._store.delete_schedule(tenant_id, schedule_id)

    # -- expectations (read by the watchdog) ---------------------------------------------
    async def register_expectation(
        self, tenant_id: uuid.UUID, spec: ExpectationSpec
    ) -> Expectation:
        """Validate and upsert by ``(tenant, job_id)``; a ``schedule_id`` must name one of
        the tenant's own schedules (NotFound otherwise)."""
        if spec.job_id and len(spec.job_id) > MAX_JOB_ID_LEN:
            raise InvalidArgument("job_id", f"longer than {MAX_JOB_ID_LEN} characters")
        if not spec.job_id and spec.schedule_id is None:
            raise InvalidArgument("job_id", "required unless schedule_id is set")
        if not 1 <= spec.interval_s <= MAX_EXPECTATION_S:
            raise InvalidArgument("interval_s", f"must be 1..{MAX_EXPECTATION_S}")
        if not 0 <= spec.tolerance_s <= MAX_EXPECTATION_S:
            raise InvalidArgument("tolerance_s", f"must be 0..{MAX_EXPECTATION_S}")
        if spec.max_runtime_s is not None and not 1 <= spec.max_runtime_s <= MAX_EXPECTATION_S:
            raise InvalidArgument("max_runtime_s", f"must be 1..{MAX_EXPECTATION_S}")
        job_id = spec.job_id
        if spec.schedule_id is not None:
            schedule = await self.get(tenant_id, spec.schedule_id)
            job_id = job_id or schedule.name
        return await self._store.register_expectation(
            Expectation(
                id=uuid7(),
                tenant_id=tenant_id,
                job_id=job_id,
                interval_s=spec.interval_s,
                tolerance_s=spec.tolerance_s,
                schedule_id=spec.schedule_id,
                max_runtime_s=spec.max_runtime_s,
                created_at=self._now(),
            )
        )

    async def list_expectations(self, tenant_id: uuid.UUID) -> builtins.list[Expectation]:
        """The tenant's expectations, by job id."""
        return await self._store.list_expectations(tenant_id)

    async def delete_expectation(self, tenant_id: uuid.UUID, job_id: str) -> None:
        """Delete ``tenant_id``'s expectation for ``job_id`` (NotFound when none)."""
        if not await self._store.delete_expectation(tenant_id, job_id):
            raise NotFound("expectation", job_id)

    # -- the loop ------------------------------------------------------------------------
    async def run(self) -> None:
        """Fire due occurrences every ``schedule_interval_s`` until cancelled."""
        failing = False
        while True:
            try:
                await self.run_once()
                failing = False
            except asyncio.CancelledError:
                raise
            except StoreUnavailable as exc:
                if not failing:  # once per outage, without the traceback
                    log.warning("schedule pass failed (%s); retrying each interval", exc)
                    failing = True
            except Exception:
                log.exception("schedule pass failed; retrying next interval")
            self._wake.clear()
            await wait_event(self._wake, self._config.schedule_interval_s)

    async def run_once(self) -> int:
        """One pass; returns how many tasks it created."""
        now = self._now()
        lead = timedelta(seconds=self._config.schedule_lead_s)
        due = await self._store.due_schedules(now + lead, self._config.schedule_batch)
        if not due:
            return 0
        guarded = [s.id for s in due if s.overlap_policy is not OverlapPolicy.ALLOW]
        active = await self._store.active_schedule_tasks(guarded)
        created = 0
        for s in due:
            try:
                created += await self._fire(s, now, now + lead, active.get(s.id, 0))
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception(
                    "schedule %s (%s) failed to fire",
                    s.id,
                    s.name,
                    extra=task_extra(tenant_id=s.tenant_id),
                )
        return created

    def _task(self, s: Schedule, at: datetime, due_at: datetime, now: datetime) -> NewTask:
        spec = SubmitSpec(
            type=s.task_type,
            payload=s.payload,
            scheduled_at=at,
            pool=s.pool,
            strict_timing=True,
            max_retries=s.max_retries,
            timeout_s=s.timeout_s,
        )
        return self._admission.new_task(
            s.tenant_id,
            spec,
            now,
            due_at=due_at,
            idempotency_key=occurrence_key(s.id, at),
            schedule_id=s.id,
        )

    async def _fire(self, s: Schedule, now: datetime, until: datetime, live: int) -> int:
        limit = self._config.max_occurrences_per_pass
        times: list[datetime] = []
        new_next = s.next_fire_at
        if s.next_fire_at is not None and s.next_fire_at <= until:
            times = [s.next_fire_at]
            times += occurrences_after(s, s.next_fire_at, until, limit - 1)
            new_next = next_after(s, times[-1])
        cutoff = now - timedelta(seconds=s.catchup_window_s)
        missed = [t for t in times if t < cutoff]
        fresh = [t for t in times if t >= cutoff]
        if missed:
            log.warning(
                "schedule %s skipped %d occurrences outside the catch-up window",
                s.id,
                len(missed),
                extra=task_extra(tenant_id=s.tenant_id),
            )
        buffered = s.buffered_at
        to_run: list[tuple[datetime, datetime]] = []  # (occurrence, due_at)
        policy = s.overlap_policy
        if policy is OverlapPolicy.ALLOW:
            to_run = [(t, t + jitter_of(s, t)) for t in fresh]
        elif live:
            if policy is OverlapPolicy.BUFFER_ONE and buffered is None and fresh:
                buffered = fresh[0]
        elif buffered is not None:
            # Nothing live any more: the held occurrence starts now. Newer ones of this
            # pass are held in turn (buffer_one keeps at most one).
            to_run.append((buffered, max(now, buffered)))
            buffered = fresh[-1] if fresh else None
        elif fresh:
            # Several occurrences inside the catch-up window start once, not in a pile.
            last = fresh[-1]
            to_run.append((last, last + jitter_of(s, last)))
        if to_run:
            results = await self._store.insert_tasks(
                [self._task(s, at, due, now) for at, due in to_run], now
            )
            self._timeline.admit(results)
            self._stats.schedule_fired += sum(r.created for r in results)
        last_fired = max((at for at, _ in to_run), default=None)
        ok = await self._store.advance_schedule(
            s.id, s.next_fire_at, new_next, last_fired, buffered, now
        )
        if not ok:
            log.debug("schedule %s advanced by another node", s.id)
        return len(to_run)
