"""Database helpers for the harness: migrate the template database."""

from __future__ import annotations

import asyncio
import concurrent.futures


def migrate_sync(dsn: str) -> None:
    """Apply every Tickwheel migration to ``dsn``, blocking.

    Runs on a thread of its own with its own event loop, so it works whether or not
    the calling fixture runs inside an event loop (async fixtures may request it).
    """
    from scheduler.store.postgres import migrate

    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        pool.submit(asyncio.run, migrate(dsn)).result()
