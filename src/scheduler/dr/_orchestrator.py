"""The automated DR orchestrator (issue 38): ``tickwheel dr watch``, run in the standby
site. It promotes the standby when, and only when, the witnessed etcd cluster lets it
take the region (docs/regions.md "Automatic failover").

Every ``poll_interval_s`` it reads the region's keys (``_witness.read_state``: one
linearizable read, so it needs the quorum) and decides:

- ``no-quorum``: etcd cannot be read (the witness and the primary site both out of
  reach, or this site cut off): do nothing, forget any absence seen so far;
- ``unclaimed``: no site ever took the region (``active`` absent): do nothing;
- ``primary-alive``: a node of the serving site holds its lease: do nothing;
- ``primary-absent``: no node of the serving site has a live lease (etcd expired them
  all, so every one of them stopped trusting its lease ``safety_margin_s`` before):
  start, or go on, counting; ``active``'s ``mod_revision`` is noted with it;
- ``promote``: absent for ``detection_s`` in a row: move ``active`` to this site with a
  transaction that compares that ``mod_revision`` (a node that registered since
  rewrote it: the transaction fails, ``lost-race``), then ``tickwheel dr promote``
  (pg_promote and the fence, ``scheduler.store.postgres.dr.promote``), which the site's standby
  nodes wait for;
- ``would-promote``: the same decision with ``dry_run``: logged, nothing changed;
- ``holding``: ``active`` names this site (promoted by this orchestrator or by hand):
  make sure the database is promoted and fenced (idempotent), then nothing.

Each decision is counted (``tickwheel_dr_decisions_total{decision}``) and logged when it
changes. Calls ``scheduler.dr._witness`` and ``scheduler.store.postgres.dr``; run by
``scheduler.cli._dr``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections import Counter
from typing import Any

from scheduler.dr._witness import ERRORS, RegionState, WitnessConfig, read_state, take_region

_log = logging.getLogger("tickwheel.dr")

DECISIONS = (
    "no-quorum",
    "unclaimed",
    "primary-alive",
    "primary-absent",
    "would-promote",
    "lost-race",
    "promote",
    "holding",
)
"""Every decision the orchestrator makes (the ``decision`` label of its counter)."""


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class OrchestratorConfig:
    """What ``tickwheel dr watch`` runs with."""

    witness: WitnessConfig
    """The witnessed etcd cluster; ``witness.site`` is this (the standby's) site."""
    from_site: str
    """The site that serves the region now (the primary's)."""
    standby_dsn: str
    """The standby's DSN for ``dr promote`` (a superuser, or a role granted pg_promote)."""
    detection_s: float = 5.0
    """How long no node of ``from_site`` must hold a lease, in a row, before the
    promotion (counted from the first read that saw none: after etcd expired the last
    lease, so after the last node stopped dispatching)."""
    poll_interval_s: float = 0.5
    dry_run: bool = False

    def __post_init__(self) -> None:
        if self.from_site == self.witness.site:
            raise ValueError("dr watch: --from-site must differ from this --site")
        if self.detection_s < 0 or self.poll_interval_s <= 0:
            raise ValueError("dr watch: --detection-s >= 0 and --poll-interval-s > 0")


@dataclasses.dataclass
class Orchestrator:
    """One orchestrator; :meth:`step` is one decision, :meth:`run` loops."""

    config: OrchestratorConfig
    client: Any = None
    endpoint: int = 0
    decisions: Counter[str] = dataclasses.field(default_factory=Counter)
    absent_since: float | None = None
    absent_revision: int = 0
    last: str = ""
    promoted_at: float | None = None
    """``time.time()`` when this orchestrator's promote finished."""
    state: RegionState | None = None

    def _client(self) -> Any:
        if self.client is None:
            from scheduler.dr._witness import new_client

            w = self.config.witness
            self.client = new_client(w.etcd_endpoints[self.endpoint], w.etcd_timeout_s)
        return self.client

    async def _rotate(self) -> None:
        from scheduler.dr._witness import new_client

        old, w = self.client, self.config.witness
        self.endpoint = (self.endpoint + 1) % len(w.etcd_endpoints)
        self.client = new_client(w.etcd_endpoints[self.endpoint], w.etcd_timeout_s)
        if old is not None:
            with contextlib.suppress(Exception):
                await old.close()

    def absent_for(self) -> float:
        """Seconds the serving site has been seen without a live lease (0: it has one)."""
        return 0.0 if self.absent_since is None else time.monotonic() - self.absent_since

    async def step(self) -> str:
        """Read the witness once and act; the decision."""
        cfg = self.config
        try:
            state = await read_state(self._client(), cfg.witness)
        except ERRORS as exc:
            self.absent_since = None
            await self._rotate()
            return self._decide("no-quorum", f"cannot read the witness ({exc!r})")
        self.state = state
        if state.active == cfg.witness.site:
            if self.promoted_at is None and not cfg.dry_run:
                await self._promote()
            return self._decide("holding", f"site {cfg.witness.site} holds the region")
        if state.active is None:
            # No site ever held the region (A's nodes not started yet): nothing to take
            # over; taking it would promote a standby nobody lost.
            self.absent_since = None
            return self._decide("unclaimed", f"no site holds region {cfg.witness.region} yet")
        if state.active != cfg.from_site:
            self.absent_since = None
            return self._decide("primary-alive", f"site {state.active} holds the region")
        nodes = state.alive.get(cfg.from_site, ())
        if nodes:
            self.absent_since = None
            return self._decide("primary-alive", f"site {cfg.from_site}: {', '.join(nodes)}")
        if self.absent_since is None or state.active_revision != self.absent_revision:
            self.absent_since = time.monotonic()
            self.absent_revision = state.active_revision
        waited = self.absent_for()
        if waited < cfg.detection_s:
            return self._decide(
                "primary-absent",
                f"no node of site {cfg.from_site} holds a lease "
                f"({waited:.1f} of {cfg.detection_s:.1f} s)",
            )
        if cfg.dry_run:
            return self._decide(
                "would-promote", f"dry run: would take region {cfg.witness.region} and promote"
            )
        try:
            took = await take_region(
                self._client(),
                cfg.witness,
                from_site=cfg.from_site,
                revision=self.absent_revision,
            )
        except ERRORS as exc:
            self.absent_since = None
            return self._decide("no-quorum", f"taking the region failed ({exc!r})")
        if not took:
            self.absent_since = None
            return self._decide("lost-race", "the region changed meanwhile: counting again")
        _log.warning(
            "dr watch: site %s took region %s from site %s after %.1f s without it; promoting",
            cfg.witness.site,
            cfg.witness.region,
            cfg.from_site,
            waited,
        )
        await self._promote()
        return self._decide("promote", f"promoted; site {cfg.witness.site} holds the region")

    async def _promote(self) -> None:
        from scheduler.store.postgres import dr

        started = time.monotonic()
        while True:
            try:
                # The same actor as `tickwheel dr promote`: the fence is raised once per
                # promote whichever of the two ran first (a re-run changes nothing).
                report = await dr.promote(self.config.standby_dsn)
                break
            except Exception as exc:  # the standby restarting: try again
                _log.error("dr watch: promote failed (%s); retrying", exc)
                await asyncio.sleep(self.config.poll_interval_s)
        self.promoted_at = time.time()
        _log.warning(
            "dr watch: promote done in %.3f s (pg_promote %.3f s, fence %.3f s, "
            "generation %d -> %d, %d task(s) fenced)",
            time.monotonic() - started,
            report.promote_s,
            report.fence_s,
            report.old_generation,
            report.generation,
            report.tasks_fenced,
        )

    def _decide(self, decision: str, why: str) -> str:
        self.decisions[decision] += 1
        if decision != self.last:
            level = (
                logging.INFO if decision in ("primary-alive", "primary-absent") else logging.WARNING
            )
            _log.log(level, "dr watch: %s: %s", decision, why)
            self.last = decision
        return decision

    async def run(self, stop: asyncio.Event | None = None) -> None:
        """Decide every ``poll_interval_s`` until ``stop`` is set."""
        stop = stop or asyncio.Event()
        try:
            while not stop.is_set():
                await self.step()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), self.config.poll_interval_s)
        finally:
            client, self.client = self.client, None
            if client is not None:
                with contextlib.suppress(Exception):
                    await client.close()
