"""Database helpers for the harness: migrate the template database."""

from __future__ import annotations

import asyncio


def migrate_sync(dsn: str) -> None:
    """Apply every Tickwheel migration to ``dsn`` (blocking; used by session fixtures)."""
    from scheduler.store.postgres import migrate

    asyncio.run(migrate(dsn))
