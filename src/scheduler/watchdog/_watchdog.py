"""The dead man's switch: checks, alert deduplication, sinks (log, webhook)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import enum
import json
import logging
import urllib.request
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from scheduler.store._facts import JobFacts
from scheduler.watchdog._config import WatchdogConfig
from scheduler.watchdog._source import CanaryFacts, Source, open_source

log = logging.getLogger("tickwheel.watchdog")


class Case(enum.StrEnum):
    """Why an expected job is overdue (or what is wrong with the canary)."""

    NEVER_STARTED = "never_started"
    """Nothing was dispatched: the scheduler is down, or the schedule is broken."""
    STARTED_NOT_FINISHED = "started_not_finished"
    """Dispatched and still running (past ``max_runtime_s`` when one is set)."""
    FAILING = "failing"
    """Attempts dead-lettered since the last completion."""
    CANARY_STOPPED = "canary_stopped"
    CANARY_LAGGING = "canary_lagging"


@dataclasses.dataclass(frozen=True, slots=True)
class Alert:
    """One firing alert; ``key`` identifies it across checks (deduplication)."""

    key: str
    case: Case
    message: str
    details: dict[str, Any]


class Status(enum.StrEnum):
    """What the watchdog says about one expectation now (ListExpectations' status)."""

    OK = "ok"
    """Completed within its interval, registered and not yet due, or overdue but still
    running inside its max runtime."""
    LATE = "late"
    """An alert fires: nothing started, or attempts dead-lettered."""
    STUCK = "stuck"
    """An alert fires: a matching task has been running too long."""


def deadline_of(f: JobFacts) -> datetime:
    """When the expectation becomes overdue: last completion (or registration) +
    interval + tolerance."""
    since = f.last_completed or f.registered_at
    return since + timedelta(seconds=f.interval_s + f.tolerance_s)


def status_of(f: JobFacts, now: datetime) -> Status:
    """The status by :func:`check_job`'s rule (the one the watchdog alerts on)."""
    alert = check_job(f, now)
    if alert is None:
        return Status.OK
    return Status.STUCK if alert.case is Case.STARTED_NOT_FINISHED else Status.LATE


def check_job(f: JobFacts, now: datetime) -> Alert | None:
    """The seed's rule: alert when NOW - MAX(completed) > interval + tolerance."""
    since = f.last_completed or f.registered_at
    limit = timedelta(seconds=f.interval_s + f.tolerance_s)
    if now <= deadline_of(f):
        return None
    name = f"schedule {f.schedule_id}" if f.schedule_id else f"job {f.job_id!r}"
    if f.dead_lettered_since_completion:
        case = Case.FAILING
        why = f"{f.dead_lettered_since_completion} attempt(s) dead-lettered"
    elif f.oldest_running_since is not None and (
        f.max_runtime_s is None or now - f.oldest_running_since > timedelta(seconds=f.max_runtime_s)
    ):
        case = Case.STARTED_NOT_FINISHED
        why = f"running since {f.oldest_running_since.isoformat()}"
        if f.max_runtime_s is not None:
            why += f", past its max runtime of {f.max_runtime_s} s"
    elif f.oldest_running_since is not None:
        return None  # overdue but legitimately still running inside its max runtime
    else:
        case = Case.NEVER_STARTED
        why = "nothing was dispatched"
    last = f.last_completed.isoformat() if f.last_completed else "never"
    return Alert(
        key=f"job:{f.tenant_id}:{f.job_id}",
        case=case,
        message=f"SILENT FAILURE: {name} has not completed within "
        f"{f.interval_s} s + {f.tolerance_s} s (last completion: {last}); {why}",
        details={
            "tenant_id": str(f.tenant_id),
            "job_id": f.job_id,
            "schedule_id": None if f.schedule_id is None else str(f.schedule_id),
            "last_completed": None if f.last_completed is None else f.last_completed.isoformat(),
            "overdue_s": round((now - since - limit).total_seconds(), 3),
        },
    )


def check_canary(c: CanaryFacts, now: datetime, config: WatchdogConfig) -> list[Alert]:
    """Canaries stopped completing, or the latest one was dispatched late."""
    out = []
    since = c.last_completed or c.first_scheduled
    if since is not None and (now - since).total_seconds() > config.canary_stale_s:
        out.append(
            Alert(
                "canary:stopped",
                Case.CANARY_STOPPED,
                f"no canary completed since {since.isoformat()}",
                {
                    "last_completed": None
                    if c.last_completed is None
                    else c.last_completed.isoformat()
                },
            )
        )
    if c.latest_scheduled is not None and c.latest_dispatched is not None:
        lag = (c.latest_dispatched - c.latest_scheduled).total_seconds()
        if lag > config.canary_max_lag_s:
            out.append(
                Alert(
                    "canary:lag",
                    Case.CANARY_LAGGING,
                    f"canary dispatch lag {lag:.3f} s exceeds {config.canary_max_lag_s} s",
                    {"lag_s": lag},
                )
            )
    return out


class Sink(Protocol):
    """Where alert events go."""

    async def send(self, event: str, alert: Alert, at: datetime) -> None: ...


class LogSink:
    """Logs firing alerts as errors and resolutions as info."""

    async def send(self, event: str, alert: Alert, at: datetime) -> None:
        """Log one event."""
        level = logging.ERROR if event == "firing" else logging.INFO
        log.log(level, "[%s] %s %s: %s", event, alert.case.value, alert.key, alert.message)


class WebhookSink:
    """HTTP POST of JSON, retried with doubling backoff; gives up with a log line."""

    def __init__(self, url: str, *, timeout_s: float, retries: int, backoff_s: float) -> None:
        self.url = url
        self.timeout_s = timeout_s
        self.retries = retries
        self.backoff_s = backoff_s

    def _post(self, body: bytes) -> int:
        req = urllib.request.Request(
            self.url, data=body, headers={"Content-Type": "application/json"}, method="POST"
        )
        with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
            return int(resp.status)

    async def send(self, event: str, alert: Alert, at: datetime) -> None:
        """POST one event."""
        body = json.dumps(
            {
                "event": event,
                "key": alert.key,
                "case": alert.case.value,
                "message": alert.message,
                "details": alert.details,
                "at": at.isoformat(),
            }
        ).encode()
        delay = self.backoff_s
        for attempt in range(self.retries + 1):
            try:
                await asyncio.to_thread(self._post, body)
                return
            except Exception as exc:
                if attempt == self.retries:
                    log.error("webhook %s failed after %d attempts: %s", self.url, attempt + 1, exc)
                    return
                await asyncio.sleep(delay)
                delay *= 2


class Watchdog:
    """Checks the database every ``check_interval_s``; reports each alert once when it
    fires and once when it resolves. Needs only the database (a replica will do)."""

    def __init__(
        self,
        config: WatchdogConfig,
        *,
        source: Source | None = None,
        sinks: Sequence[Sink] | None = None,
        now: Callable[[], datetime] | None = None,
    ) -> None:
        self.config = config
        self.source = source or open_source(config.database_url)
        if sinks is None:
            sinks = [LogSink()]
            if config.webhook_url:
                sinks.append(
                    WebhookSink(
                        config.webhook_url,
                        timeout_s=config.webhook_timeout_s,
                        retries=config.webhook_retries,
                        backoff_s=config.webhook_backoff_s,
                    )
                )
        self.sinks = list(sinks)
        self.now = now or (lambda: datetime.now(UTC))
        self.active: dict[str, Alert] = {}

    async def evaluate(self) -> list[Alert]:
        """What is wrong now (no side effects)."""
        now = self.now()
        alerts = [a for f in await self.source.jobs() if (a := check_job(f, now)) is not None]
        if self.config.canary:
            alerts += check_canary(await self.source.canary(), now, self.config)
        return alerts

    async def check_once(self) -> list[Alert]:
        """Evaluate, send new alerts and resolutions; returns the alerts firing now."""
        alerts = await self.evaluate()
        now = self.now()
        current = {a.key: a for a in alerts}
        for key, alert in current.items():
            if key not in self.active:
                await self._emit("firing", alert, now)
        for key, alert in list(self.active.items()):
            if key not in current:
                await self._emit("resolved", alert, now)
        self.active = current
        return alerts

    async def _emit(self, event: str, alert: Alert, at: datetime) -> None:
        for sink in self.sinks:
            try:
                await sink.send(event, alert, at)
            except Exception:
                log.exception("sink %r failed", sink)

    async def run(self) -> None:
        """Check forever (until cancelled); a failed check is logged and retried."""
        try:
            while True:
                try:
                    await self.check_once()
                except asyncio.CancelledError:
                    raise
                except Exception:
                    log.exception("watchdog check failed (database unreachable?)")
                await asyncio.sleep(self.config.check_interval_s)
        finally:
            with contextlib.suppress(Exception):
                await self.source.close()
