"""The replication gauges against a real streaming standby.

A node on a primary of its own (``replicated`` in this package's conftest) with
``/metrics`` on: the standby counts as one; with replay paused on the standby
(``pg_wal_replay_pause()``), tasks submitted through the node make the exported lag in
bytes rise; resumed, the standby replays them and the lag returns to 0. The every-metric
test points here for these gauges (its harness primary has no standby).
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from scheduler.client import AdminClient, Client
from scheduler.metrics import MetricsConfig
from scheduler.node import Node, NodeConfig
from scheduler.server import ServerConfig
from tests.integration.metrics.conftest import DATABASE, Replicated
from tests.support.metrics import scrape
from tests.support.waiting import eventually

ADMIN = "replication-test-admin-token"
STANDBYS = "tickwheel_replication_standbys"
LAG_BYTES = "tickwheel_replication_lag_bytes"
LAG_S = "tickwheel_replication_lag_seconds"
Samples = dict[str, dict[tuple[tuple[str, str], ...], float]]


def _figures(s: Samples) -> tuple[float, float, float]:
    return s[STANDBYS][()], s[LAG_BYTES][()], s[LAG_S][()]


async def test_standby_lag_rises_while_replay_is_paused_and_returns_to_zero(
    replicated: Replicated,
) -> None:
    standby = replicated.standby

    async def on_standby(sql: str) -> str:
        return (await asyncio.to_thread(standby.psql, sql, DATABASE)).strip()

    node = Node(
        NodeConfig(
            store_url=replicated.dsn,
            server=ServerConfig(listen="127.0.0.1:0", admin_token=ADMIN),
            metrics=MetricsConfig(port=0, depth_interval_s=0.2),
        )
    )
    await node.start()
    seen: list[tuple[str, tuple[float, float, float]]] = []

    async def snap(phase: str) -> Samples:
        assert node.metrics_url is not None
        s = await scrape(node.metrics_url)
        seen.append((phase, _figures(s)))
        return s

    try:
        caught_up = await eventually(
            lambda: snap("connected"),
            until=lambda s: s[STANDBYS][()] == 1 and s[LAG_BYTES][()] == 0,
            what="one standby, caught up",
        )
        assert _figures(caught_up)[0] == 1
        async with await AdminClient.connect(node.target, admin_token=ADMIN) as admin:
            tenant = await admin.create_tenant("r")
            key = (await admin.create_api_key(tenant.id, "r")).secret

        await on_standby("SELECT pg_wal_replay_pause()")
        await eventually(
            lambda: on_standby("SELECT pg_get_wal_replay_pause_state()"),
            until=lambda state: state == "paused",
            what="replay to pause on the standby",
        )
        later = datetime.now(UTC) + timedelta(days=1)
        async with await Client.connect(node.target, api_key=key) as client:
            for i in range(50):
                await client.submit("replicated", {"i": i}, scheduled_at=later)
        behind = await eventually(
            lambda: snap("paused"),
            until=lambda s: s[LAG_BYTES][()] > 0,
            timeout_s=60,
            what="the lag in bytes to rise while replay is paused",
        )
        assert _figures(behind)[0] == 1, "the paused standby still streams"
        # A real standby: it received the WAL but has not applied the tasks.
        assert await on_standby("SELECT count(*) FROM tasks") == "0"

        await on_standby("SELECT pg_wal_replay_resume()")
        await eventually(
            lambda: snap("resumed"),
            until=lambda s: s[STANDBYS][()] == 1 and s[LAG_BYTES][()] == 0,
            timeout_s=60,
            what="the lag to return to 0 after replay resumes",
        )
        assert await on_standby("SELECT count(*) FROM tasks") == "50"
    finally:
        await node.stop()
        print("replication figures (phase, standbys, lag_bytes, lag_seconds):")
        for phase, figures in seen:
            print(phase, *figures)
    # replay_lag is a measurement PostgreSQL keeps while WAL flows and clears (NULL,
    # exported 0) once the standby is caught up and idle: it moved at some scrape.
    assert any(sec > 0 for _, (_, _, sec) in seen), seen
