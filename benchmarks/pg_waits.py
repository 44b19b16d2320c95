"""What PostgreSQL's processes were doing, sampled (the stampede benchmark's ``--pg-waits``).

A thread polls ``pg_stat_activity`` every ``interval_s`` (5 ms) on a connection of its
own and counts, between :meth:`PgWaits.start_window` and :meth:`PgWaits.end_window`, the
samples in which each statement of the database under test (named by its ``-- name:``
section of this repository's SQL, else by its first 40 characters) and each background
process (autovacuum, checkpointer, WAL writer) was:

- ``cpu``: active with no wait event (running, or runnable and waiting for a core: on a
  busy machine the two look the same here);
- ``idle in tx``: inside its transaction, waiting for its client's next message (for
  serve's store calls: the ``BEGIN; SET LOCAL`` before the statement and the ``COMMIT``
  after it, each a round trip through serve's event loop);
- a wait event's name (``WALSync``, ``DataFileExtend``, a lock...).

A statement's share of the samples is the share of the window a backend spent in it
(two backends in one statement at once count twice). The question it answers: is a
slow commit PostgreSQL's CPU, its disk, a lock, or its client (issue 41: a 1M minute's
dispatch statement was on the CPU in 80 % of its samples, 2026-12-07). The poll costs
PostgreSQL a query every 5 ms, a few per cent of a core: a run with ``--pg-waits`` is a
diagnosis, not a figure of CPU a task.
"""

from __future__ import annotations

import asyncio
import re
import threading
from collections import Counter
from typing import Any

import asyncpg

QUERY = """
SELECT backend_type, state, wait_event, left(query, 200)
FROM pg_stat_activity
WHERE pid <> pg_backend_pid()
  AND (datname = $1 OR backend_type <> 'client backend')
  AND backend_type NOT IN ('autovacuum launcher', 'logical replication launcher')
  AND (state IS NULL OR state <> 'idle')
"""

_BACKGROUND_IDLE = frozenset(
    {
        "AutoVacuumMain",
        "BgWriterMain",
        "BgWriterHibernate",
        "CheckpointerMain",
        "WalWriterMain",
        "CheckpointWriteDelay",
        "VacuumDelay",
        "LogicalLauncherMain",
        "WalSenderMain",
    }
)
"""Background wait events that mean asleep (or throttled by design), not working."""


def _first_line(text: str) -> str:
    """A statement's first line (its leading comment, for the named ones)."""
    text = text.strip()
    return text.splitlines()[0] if text else ""


def statement_names() -> dict[str, str]:
    """The first line of every named statement of this repository's PostgreSQL SQL,
    to its name."""
    from scheduler.store.postgres._db import SQL

    out: dict[str, str] = {}
    for name, text in SQL.items():
        out.setdefault(_first_line(text), name)
    return out


class PgWaits(threading.Thread):
    """The sampler: :meth:`start_window`, :meth:`end_window`, then :meth:`figures`."""

    def __init__(self, dsn: str, database: str, interval_s: float = 0.005) -> None:
        super().__init__(name="pg-waits", daemon=True)
        self._dsn = dsn
        self._database = database
        self._interval_s = interval_s
        self._names = statement_names()
        self._counting = False
        self._finish = threading.Event()
        self.samples = 0
        self.counts: Counter[tuple[str, str]] = Counter()
        self.error: BaseException | None = None

    def start_window(self) -> None:
        self._counting = True

    def end_window(self) -> None:
        self._counting = False
        self._finish.set()
        self.join(timeout=5)

    def _label(self, backend: str, query: str) -> str:
        if backend != "client backend":
            # "autovacuum: VACUUM ANALYZE public.tasks_p20261207": the table's kind.
            return re.sub(r"_p?\d{6,}\b", "", query.split(":", 1)[-1].strip())[:40] or backend
        first = _first_line(query)
        return self._names.get(first) or first[:40]

    def _state(self, backend: str, state: str | None, wait: str | None) -> str | None:
        if backend != "client backend":
            return None if wait in _BACKGROUND_IDLE else (wait or "cpu")
        if state == "active":
            return wait or "cpu"
        if state and state.startswith("idle in transaction"):
            return "idle in tx"
        return None

    async def _poll(self) -> None:
        conn = await asyncpg.connect(self._dsn)
        try:
            while not self._finish.is_set():
                rows = await conn.fetch(QUERY, self._database)
                if self._counting:
                    self.samples += 1
                    for backend, state, wait, query in rows:
                        what = self._state(backend, state, wait)
                        if what is not None:
                            key = backend if backend != "client backend" else "statement"
                            self.counts[(f"{key} {self._label(backend, query or '')}", what)] += 1
                await asyncio.sleep(self._interval_s)
        finally:
            await conn.close()

    def run(self) -> None:
        try:
            asyncio.run(self._poll())
        except BaseException as exc:  # reported with the figures, not lost in a thread
            self.error = exc

    def figures(self, top: int = 12) -> dict[str, Any]:
        """Per statement (or background process) and state, the percentage of the
        window's samples, the ``top`` largest; and the samples taken."""
        if self.error is not None:
            raise RuntimeError(f"--pg-waits sampler failed: {self.error!r}") from self.error
        n = max(self.samples, 1)
        out: dict[str, Any] = {"pg waits: samples": self.samples}
        for (what, state), c in self.counts.most_common(top):
            out[f"pg waits: {what} [{state}] %"] = 100.0 * c / n
        return out
