"""``tickwheel watchdog``: the dead man's switch, a separate process that reads only the
database (the completion ledger, expectations, canaries) and alerts on silence.
"""

from scheduler.store._facts import JobFacts
from scheduler.watchdog._config import WatchdogConfig
from scheduler.watchdog._source import CanaryFacts, Source, open_source
from scheduler.watchdog._watchdog import (
    Alert,
    Case,
    LogSink,
    Sink,
    Status,
    Watchdog,
    WebhookSink,
    check_canary,
    check_job,
    deadline_of,
    status_of,
)

__all__ = [
    "Alert",
    "CanaryFacts",
    "Case",
    "JobFacts",
    "LogSink",
    "Sink",
    "Source",
    "Status",
    "Watchdog",
    "WatchdogConfig",
    "WebhookSink",
    "check_canary",
    "check_job",
    "deadline_of",
    "open_source",
    "status_of",
]
