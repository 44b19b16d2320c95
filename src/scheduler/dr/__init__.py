"""Automatic disaster recovery of a region (issue 38, docs/regions.md "Automatic
failover"): the region lease a witnessed etcd cluster holds (:class:`RegionLease`, which
a region's nodes must hold to dispatch) and the orchestrator that promotes the standby
site once the serving site's leases have expired (:class:`Orchestrator`).

The database side of a promote (pg_promote and the fence) is ``scheduler.store.postgres.dr``.
"""

from __future__ import annotations

from scheduler.dr._orchestrator import DECISIONS, Orchestrator, OrchestratorConfig
from scheduler.dr._witness import (
    BothLeases,
    RegionLease,
    RegionState,
    WitnessConfig,
    read_state,
    take_region,
)

__all__ = [
    "DECISIONS",
    "BothLeases",
    "Orchestrator",
    "OrchestratorConfig",
    "RegionLease",
    "RegionState",
    "WitnessConfig",
    "read_state",
    "take_region",
]
