"""The registry of this node's worker sessions: which streams are open, the canary's and
the outlets' sessions, and the moves of a task from one session to another when its
worker reconnects (adoption), an expired lease or a finished write. Called by the
engine's parts that look across sessions: the dispatcher (who can take a task), the
reaper, the watch, moves, the backlog reports and the facade's ``open_session``.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable, Iterator, Sequence

from scheduler._errors import TickwheelError
from scheduler.engine._completer import Completer
from scheduler.engine._config import EngineConfig
from scheduler.engine._sessions import OUTLET_WORKER_PREFIX, Publish, WorkerSession
from scheduler.engine._types import Outlet, WorkerHello
from scheduler.store import Store
from scheduler.types import FencedWrite, Pool, TaskKey


class Sessions:
    """This node's open sessions (worker streams, the canary's, outlets')."""

    def __init__(
        self,
        store: Store,
        config: EngineConfig,
        completer: Completer,
        wake_dispatcher: Callable[[], None],
        publish: Publish,
        wake_reaper: Callable[[], None] = lambda: None,
    ) -> None:
        self.store = store
        self.config = config
        self.completer = completer
        self.wake_dispatcher = wake_dispatcher
        self.publish = publish
        self.wake_reaper = wake_reaper
        self._sessions: dict[str, WorkerSession] = {}
        self._outlets: list[WorkerSession] = []
        self._orphans: dict[uuid.UUID, tuple[float, TaskKey, int]] = {}
        """RUNNING tasks of streams that broke on the worker's side, not yet taken up
        again: (when their grace ends, key, token), for :meth:`end_orphans`."""

    def __iter__(self) -> Iterator[WorkerSession]:
        return iter(list(self._sessions.values()))

    def open(self, hello: WorkerHello, *, shared: bool) -> WorkerSession:
        """Register a worker stream's session."""
        session = WorkerSession(self, hello, shared=shared)
        self._sessions[session.session_id] = session
        self.wake_dispatcher()
        return session

    def open_outlet(self, outlet: Outlet) -> WorkerSession:
        """The built-in session that publishes ``outlet``'s pool to its broker."""
        session = WorkerSession(
            self,
            WorkerHello(
                worker_id=f"{OUTLET_WORKER_PREFIX}{outlet.name}",
                tenant_id=uuid.UUID(int=0),
                task_types=frozenset(),
                pools=frozenset({outlet.pool}),
                slots=outlet.capacity,
            ),
            shared=True,
        )
        session.task_types = None
        session.outlet = outlet
        self._sessions[session.session_id] = session
        self._outlets.append(session)
        return session

    def closed(self, session: WorkerSession) -> None:
        """``session`` ended (called by its ``close``)."""
        self._sessions.pop(session.session_id, None)

    async def close_all(self) -> None:
        """Close every session (the engine stops)."""
        for session in list(self._sessions.values()):
            await session.close()
        self._outlets.clear()

    def streams(self) -> tuple[WorkerSession, ...]:
        """The open worker streams (outlets' built-in sessions excluded)."""
        return tuple(s for s in self._sessions.values() if s.outlet is None)

    def free_slots(self) -> dict[Pool, int]:
        """Per pool, the credit of the sessions that serve it (``/metrics``)."""
        out = dict.fromkeys(Pool, 0)
        for session in self._sessions.values():
            if session.can_take:
                for pool in session.pools:
                    out[pool] += session.credits
        return out

    def end_tenant(self, tenant_id: uuid.UUID, error: TickwheelError) -> int:
        """End every stream of ``tenant_id`` with ``error``; how many."""
        ended = 0
        for session in list(self._sessions.values()):
            if session.outlet is None and session.scope == tenant_id and session.ended is None:
                session.end(error)
                ended += 1
        return ended

    def orphaned(self, held: Sequence[tuple[TaskKey, int]]) -> None:
        """A stream that broke on the worker's side left these RUNNING tasks: their
        leases end after ``EngineConfig.orphan_grace_s`` unless the worker takes them
        up again on a new stream (:meth:`hand_over`) first."""
        if not held:
            return
        grace = self.config.orphan_grace_s
        until = time.monotonic() + grace
        for key, token in held:
            self._orphans[key.id] = (until, key, token)
        asyncio.get_running_loop().call_later(grace, self.wake_reaper)

    async def end_orphans(self) -> int:
        """End the leases of the orphaned tasks whose grace is over (fenced: only under
        the token the broken stream held, and only while leased), so the reaper's next
        look takes them back as it takes any lapsed lease. How many were due."""
        orphans = self._orphans
        if not orphans:
            return 0
        now = time.monotonic()
        due = [(key, token) for until, key, token in orphans.values() if until <= now]
        if not due:
            return 0
        for key, _ in due:
            del orphans[key.id]
        await self.completer.end_leases([FencedWrite(key=k, token=t) for k, t in due])
        return len(due)

    async def release_overdue(self) -> int:
        """Tasks pushed more than ``ack_timeout_s`` ago and still not acked go back to
        PRELOADED (DISPATCHED-only in the store: an ack written meanwhile keeps its
        task) and their session stalls until its worker shows life. A worker frozen
        with due tasks so holds them for the ack timeout, not for a whole lease; its
        late ack is refused, and an ack-first worker never runs a task whose ack was
        refused. How many went back."""
        if self.config.ack_timeout_s <= 0:
            return 0
        cutoff = time.monotonic() - self.config.ack_timeout_s
        n = 0
        for session in list(self._sessions.values()):
            late = session.overdue(cutoff) if not session.closed else []
            if not late:
                continue
            session.stall()
            await self.completer.release_unacked(late, dispatched_only=True)
            n += len(late)
        return n

    def takers(self) -> list[WorkerSession]:
        """Sessions that may be given a task now, in registration order."""
        return [s for s in self._sessions.values() if s.can_take]

    def holders(self, task_id: uuid.UUID) -> list[WorkerSession]:
        """Sessions that hold ``task_id``."""
        return [s for s in self._sessions.values() if s.holding(task_id) is not None]

    def hand_over(self, task_id: uuid.UUID, to: WorkerSession) -> None:
        """``to`` adopted ``task_id`` (its worker reconnected): no other stream session
        holds it any more, so none gives it back when it closes."""
        self._orphans.pop(task_id, None)
        for session in self._sessions.values():
            # An outlet's session keeps its entry: it counts the broker's capacity.
            if session is not to and session.outlet is None:
                session.let_go(task_id)

    def expired(self, task_id: uuid.UUID, *, requeued: bool) -> None:
        """The reaper took ``task_id`` back (its lease lapsed): its session lets it go,
        and stalls if the worker never acked it (or, starting on delivery, neither
        heartbeated nor finished it) within a whole lease."""
        for session in self._sessions.values():
            if session.let_go(task_id) and (requeued or session.start_on_delivery):
                session.stall()

    def freed(self, task_id: uuid.UUID) -> None:
        """A task left its worker: an outlet that published it has room again."""
        for session in self._outlets:
            if session.let_go(task_id):
                session.return_credit()

    def freed_many(self, task_ids: Sequence[uuid.UUID]) -> None:
        """:meth:`freed` for each task (nothing to do a task without an outlet)."""
        if self._outlets:
            for task_id in task_ids:
                self.freed(task_id)
