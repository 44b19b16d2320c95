"""``tickwheel dr watch --metrics-port``: the orchestrator's decisions as Prometheus
metrics (docs/regions.md "Automatic failover")."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from scheduler.dr._orchestrator import DECISIONS, Orchestrator


class _Collector:
    def __init__(self, orchestrator: Orchestrator) -> None:
        self._o = orchestrator

    def collect(self) -> Iterator[Any]:
        o = self._o
        decisions = CounterMetricFamily(
            "tickwheel_dr_decisions",
            "Decisions of the DR orchestrator, one per poll, by kind.",
            labels=["decision"],
        )
        for name in DECISIONS:
            decisions.add_metric([name], o.decisions[name])
        yield decisions
        yield GaugeMetricFamily(
            "tickwheel_dr_primary_absent_seconds",
            "How long no node of the serving site has held its region lease (0: one does).",
            value=o.absent_for(),
        )
        held = o.state is not None and o.state.active == o.config.witness.site
        yield GaugeMetricFamily(
            "tickwheel_dr_region_held",
            "1 when the witness says this orchestrator's site holds the region.",
            value=1.0 if held else 0.0,
        )


def serve_metrics(orchestrator: Orchestrator, port: int, host: str = "0.0.0.0") -> None:
    """Serve ``/metrics`` on ``host:port`` from a thread."""
    registry = CollectorRegistry()
    registry.register(_Collector(orchestrator))
    start_http_server(port, addr=host, registry=registry)
