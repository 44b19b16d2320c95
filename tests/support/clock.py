"""A clock tests move by hand (the engine and store take time as an argument)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta


class FakeClock:
    """Starts at the real now; moves only when told."""

    def __init__(self, start: datetime | None = None) -> None:
        self.current = start or datetime.now(UTC)

    def __call__(self) -> datetime:
        return self.current

    def advance(self, seconds: float) -> None:
        """Move forward by ``seconds``."""
        self.current += timedelta(seconds=seconds)
