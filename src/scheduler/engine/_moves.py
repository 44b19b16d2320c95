"""What a node does while a tenant's home moves (issue 16, docs/regions.md).

Owns :class:`MoveWatch`, the loop that reads which tenants a move froze here or took
away (``tenant_moves``, through :meth:`Tenancy.read_moves`) every
``move_poll_interval_s``. A newly stopped tenant's worker streams are ended (its
workers reconnect: UNAVAILABLE while frozen, sent to the new home after); a departed
tenant's waiting tasks leave the ready queues (their rows live in another region now).
The dispatcher skips the tenants in ``ReadyQueues.paused``, and the transport's
authentication answers UNAVAILABLE for a tenant not served
(:meth:`Tenancy.check_served`). A tenant served again (arrived, or a move undone) has
its flow rules read before its tasks go out: its dispatch pauses and rate limits came
with it (issue 43), and the flow loop would see them only within ``flow_refresh_s``.
Calls the tenancy, the sessions, the ready queues and the flow rules' refresh; built
and started by the facade.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from scheduler._errors import StoreError, TenantMoving
from scheduler.engine._config import EngineConfig
from scheduler.engine._ready import ReadyQueues
from scheduler.engine._registry import Sessions
from scheduler.engine._tenancy import Tenancy
from scheduler.store import StoreUnavailable

log = logging.getLogger("tickwheel.engine")


class MoveWatch:
    """Follows home moves: ends a stopped tenant's streams, drops a departed one's
    waiting tasks, wakes dispatch when a tenant is served again."""

    def __init__(
        self,
        config: EngineConfig,
        tenancy: Tenancy,
        sessions: Sessions,
        ready: ReadyQueues,
        wake: Callable[[], None],
        refresh_rules: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self._config = config
        self._tenancy = tenancy
        self._sessions = sessions
        self._ready = ready
        self._wake = wake
        self._refresh_rules = refresh_rules
        ready.paused_known.clear()  # the dispatcher waits for the first read

    async def run(self) -> None:
        """Poll until cancelled; a store error is logged and the next poll tries again
        (a freeze missed for a poll only costs the move a second copy)."""
        interval = self._config.move_poll_interval_s
        warned = failing = False
        while True:
            try:
                await self.poll()
                if failing:
                    log.warning("tenant moves read again")
                    failing = False
            except StoreUnavailable as exc:
                if not failing:  # once per outage, not every poll
                    log.warning("could not read tenant moves: %s; trying each poll", exc)
                    failing = True
            except StoreError as exc:
                if "tenant_moves" in str(exc) and "does not exist" in str(exc):
                    # A database without migration 0012 has no moves at all: dispatch
                    # is not held back for them (and `tickwheel migrate` is overdue).
                    self._ready.paused_known.set()
                    if not warned:
                        log.warning("no tenant_moves table (run `tickwheel migrate`): %s", exc)
                        warned = True
                else:
                    log.warning("could not read tenant moves: %s", exc)
            await asyncio.sleep(interval)

    async def poll(self) -> None:
        """One read of the moves and what follows from a change."""
        stopped, resumed = await self._tenancy.read_moves()
        if resumed and self._refresh_rules is not None:
            # Its pauses and rate limits, before the ready queues let its tasks out
            # (the freeze holds them until the assignment below). A failed read is the
            # flow loop's to retry; the tenant is not kept frozen for it.
            try:
                await self._refresh_rules()
            except Exception as exc:
                log.warning("flow rules not read for a tenant served again: %s", exc)
        moves = self._tenancy.moves
        self._ready.paused = frozenset(moves)  # the dispatcher grants them nothing
        self._ready.paused_known.set()
        for tenant_id in stopped:
            frozen = moves[tenant_id] == "frozen"
            ended = self._sessions.end_tenant(
                tenant_id,
                TenantMoving(
                    str(tenant_id),
                    "is moving between regions" if frozen else "has moved to another region",
                ),
            )
            log.info(
                "tenant %s %s: %d worker streams ended",
                tenant_id,
                "is frozen by a home move" if frozen else "has moved to another region",
                ended,
            )
        gone = {t for t, state in moves.items() if state == "gone"}
        if gone and gone & self._ready.tenants():
            self._ready.remove_where(lambda p: p.tenant_id in gone)
        if resumed:
            log.info("served here again after a home move: %s", ", ".join(map(str, resumed)))
            self._wake()  # its waiting tasks go out, its rows are claimed
