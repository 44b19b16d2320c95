"""``tickwheel serve``'s region-lease options (issue 38, docs/regions.md "Automatic
failover"): the witnessed etcd cluster, the node's site, its lease TTL and margin, and
the :class:`~scheduler.dr.WitnessConfig` they make."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click


def witness_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Add ``--witness-etcd``, ``--witness-site``, ``--witness-lease-ttl-s`` and
    ``--witness-margin-s`` to a command."""
    for option in reversed(_OPTIONS):
        fn = option(fn)
    return fn


def witness_config(etcd: str | None, region: str, site: str, ttl_s: float, margin_s: float) -> Any:
    """The node's :class:`~scheduler.dr.WitnessConfig` (None without ``--witness-etcd``)."""
    if not etcd:
        return None
    from scheduler.dr import WitnessConfig

    return WitnessConfig(
        etcd_endpoints=tuple(e.strip() for e in etcd.split(",") if e.strip()),
        region=region,
        site=site,
        lease_ttl_s=ttl_s,
        safety_margin_s=margin_s,
    )


_OPTIONS = [
    click.option(
        "--witness-etcd",
        envvar="TICKWHEEL_WITNESS_ETCD",
        help="Comma-separated host:port of the witnessed etcd cluster that holds the region "
        "lease (docs/regions.md, Automatic failover): the node dispatches only while it holds "
        "the lease of its --region for --witness-site. Needs --postgres-dsn, no --etcd.",
    ),
    click.option(
        "--witness-site",
        envvar="TICKWHEEL_WITNESS_SITE",
        default="a",
        show_default=True,
        help="This node's site in the region lease.",
    ),
    click.option(
        "--witness-lease-ttl-s",
        envvar="TICKWHEEL_WITNESS_LEASE_TTL_S",
        type=float,
        default=5.0,
        show_default=True,
        help="TTL of the node's region lease; it stops dispatching --witness-margin-s before.",
    ),
    click.option(
        "--witness-margin-s",
        envvar="TICKWHEEL_WITNESS_MARGIN_S",
        type=float,
        default=1.0,
        show_default=True,
        help="How long before its region lease can expire the node stops trusting it.",
    ),
]
