"""``tickwheel watchdog``: the dead man's switch, a separate process that reads only the
database (the completion ledger, expectations, canaries) and alerts on silence.
"""

from scheduler.watchdog._config import WatchdogConfig
from scheduler.watchdog._source import CanaryFacts, JobFacts, Source, open_source
from scheduler.watchdog._watchdog import (
    Alert,
    Case,
    LogSink,
    Sink,
    Watchdog,
    WebhookSink,
    check_canary,
    check_job,
)

__all__ = [
    "Alert",
    "CanaryFacts",
    "Case",
    "JobFacts",
    "LogSink",
    "Sink",
    "Source",
    "Watchdog",
    "WatchdogConfig",
    "WebhookSink",
    "check_canary",
    "check_job",
    "open_source",
]
