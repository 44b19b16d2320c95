"""The watchdog's own configuration (it shares nothing with the scheduler's)."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class WatchdogConfig:
    """How the dead man's switch checks and where it reports. Validated on construction."""

    database_url: str
    """``postgresql://...`` (a read replica will do) or ``sqlite:///path.db``."""
    check_interval_s: float = 60.0
    """How often to check every expectation (the seed: 5 min)."""
    webhook_url: str | None = None
    """POST each alert and resolution as JSON here."""
    webhook_timeout_s: float = 5.0
    webhook_retries: int = 3
    """Attempts after the first, with doubling backoff from ``webhook_backoff_s``."""
    webhook_backoff_s: float = 0.5
    canary: bool = True
    """Also watch ``canary_executions``."""
    canary_stale_s: float = 180.0
    """Alert when no canary completed for this long."""
    canary_max_lag_s: float = 5.0
    """Alert when the latest canary's dispatch lag (dispatched - scheduled) exceeds this."""

    def __post_init__(self) -> None:
        if not self.database_url.startswith(("postgresql://", "postgres://", "sqlite://")):
            raise ValueError("WatchdogConfig.database_url must be postgresql:// or sqlite://")
        for name in ("check_interval_s", "webhook_timeout_s", "canary_stale_s", "canary_max_lag_s"):
            if getattr(self, name) <= 0:
                raise ValueError(f"WatchdogConfig.{name} must be positive")
        if self.webhook_retries < 0 or self.webhook_backoff_s < 0:
            raise ValueError("WatchdogConfig: webhook retries and backoff must be >= 0")
