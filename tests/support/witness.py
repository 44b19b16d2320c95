"""Two sites of one region and a witness, with real processes (issue 38): a 3-member
etcd cluster (members ``a``, ``b``, ``w``), region A's node on a PostgreSQL primary
holding the region lease through a :class:`PartitionProxy` the test owns, a standby
node on the streaming standby, and ``tickwheel dr watch`` in site B.

Used by ``tests/acceptance/regions/test_witness.py`` (one drill of each kind) and
``benchmarks/test_dr_witness.py`` (20 of each, with figures).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import shutil
import time
import urllib.request
from collections.abc import AsyncIterator, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path

import asyncpg

from tests.integration.cluster._proxy import PartitionProxy
from tests.support.dr import Pair, StandbyServeProcess, replicated_pair
from tests.support.metrics import scrape
from tests.support.processes import (
    CommandProcess,
    ProcessGroup,
    ServeProcess,
    WorkerProcess,
    process_group,
)
from tests.support.servers import ServerProcess, ServerStartError, free_port
from tests.support.waiting import eventually

HANDLER = {"work": "tests.acceptance.handlers:work"}
NODE_ARGS = ("--preload-interval-s", "0.2", "--canary-interval-s", "0")


class EtcdMember(ServerProcess):
    """One member of a static 3-member etcd cluster (all ports chosen up front)."""

    name = "etcd"

    def __init__(self, base_dir: Path, member: str, peer_port: int, cluster: str) -> None:
        super().__init__(base_dir)
        self.member = member
        self.peer_port = peer_port
        self.cluster = cluster
        self.port = free_port()

    def command(self) -> Sequence[str]:
        client = f"http://{self.host}:{self.port}"
        peer = f"http://{self.host}:{self.peer_port}"
        return [
            shutil.which("etcd") or "/usr/bin/etcd",
            "--name",
            self.member,
            "--data-dir",
            str(self.dir / "data"),
            "--listen-client-urls",
            client,
            "--advertise-client-urls",
            client,
            "--listen-peer-urls",
            peer,
            "--initial-advertise-peer-urls",
            peer,
            "--initial-cluster",
            self.cluster,
            "--initial-cluster-token",
            f"tickwheel-witness-{self.cluster.__hash__() & 0xFFFFFF:x}",
            "--initial-cluster-state",
            "new",
            "--log-level",
            "warn",
        ]

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(
                f"http://{self.host}:{self.port}/health", timeout=1
            ) as resp:
                return b'"health":"true"' in resp.read()
        except OSError:
            return False

    @property
    def endpoint(self) -> str:
        return f"{self.host}:{self.port}"


@contextlib.contextmanager
def witness_cluster(base: Path) -> Iterator[dict[str, EtcdMember]]:
    """Members ``a``, ``b`` and ``w`` (the witness), started together (a member is
    healthy only once a quorum is up)."""
    names = ("a", "b", "w")
    peers = {n: free_port() for n in names}
    cluster = ",".join(f"{n}=http://127.0.0.1:{p}" for n, p in peers.items())
    members = {n: EtcdMember(base / f"etcd-{n}", n, peers[n], cluster) for n in names}
    try:
        for m in members.values():
            m._spawn()
        for m in members.values():
            m._wait_ready()
        yield members
    except ServerStartError:
        raise
    finally:
        for m in members.values():
            m.stop()


@dataclasses.dataclass
class Sites:
    """Everything of one drill."""

    pair: Pair
    etcd: dict[str, EtcdMember]
    proxy: PartitionProxy
    """Between A's node and etcd member ``a``: :meth:`PartitionProxy.cut` partitions A."""
    group: ProcessGroup
    node_a: ServeProcess
    node_b: StandbyServeProcess
    watch: CommandProcess
    metrics_port: int
    records: Path
    ttl_s: int
    margin_s: float
    detection_s: float

    @property
    def env(self) -> dict[str, str]:
        return {"TW_RECORD_FILE": str(self.records)}

    async def worker(self, target: str, key: str, name: str) -> WorkerProcess:
        return await asyncio.to_thread(
            self.group.worker, target, key, HANDLER, name=name, env=self.env
        )

    async def decisions(self) -> dict[str, float]:
        """``tickwheel_dr_decisions_total`` by decision, from ``dr watch``'s metrics."""
        samples = await scrape(f"http://127.0.0.1:{self.metrics_port}/metrics")
        return {
            dict(labels)["decision"]: value
            for labels, value in samples.get("tickwheel_dr_decisions_total", {}).items()
        }

    async def polls(self) -> float:
        return sum((await self.decisions()).values())

    async def in_recovery(self) -> bool:
        conn = await asyncpg.connect(self.pair.standby_admin_dsn)
        try:
            return bool(await conn.fetchval("SELECT pg_is_in_recovery()"))
        finally:
            await conn.close()


async def _up(url: str) -> bool:
    def probe() -> bool:
        try:
            with urllib.request.urlopen(url, timeout=1):
                return True
        except OSError:
            return False

    return await asyncio.to_thread(probe)


@contextlib.asynccontextmanager
async def sites(
    base: Path,
    *,
    ttl_s: int = 2,
    margin_s: float = 0.5,
    detection_s: float = 1.0,
    synchronous: bool = False,
) -> AsyncIterator[Sites]:
    """Region A serving through the witness, B's standby node and orchestrator
    watching; all stopped after."""
    records = base / "records.jsonl"
    with (
        replicated_pair(f"tw_witness_{free_port()}") as pair,
        witness_cluster(base / "etcd") as etcd,
        process_group(base / "procs") as group,
    ):
        if synchronous:
            from tests.support.dr import SYNCHRONOUS_SETTING

            pair.primary.psql(
                f"ALTER SYSTEM SET synchronous_standby_names = '{SYNCHRONOUS_SETTING}'"
            )
            pair.primary.psql("SELECT pg_reload_conf()")
        proxy = PartitionProxy("127.0.0.1", etcd["a"].port)
        await proxy.start()
        try:
            witness = (
                "--witness-lease-ttl-s",
                str(ttl_s),
                "--witness-margin-s",
                str(margin_s),
            )
            node_a = await asyncio.to_thread(
                group.serve,
                pair.primary_dsn,
                name="node-a",
                extra_args=(
                    *NODE_ARGS,
                    "--witness-etcd",
                    proxy.endpoint,
                    "--witness-site",
                    "a",
                    *witness,
                ),
            )
            node_b = StandbyServeProcess(
                group.dir / "node-b",
                pair.standby_dsn,
                name="node-b",
                # B's nodes hold the region lease too once promoted (site b), so a
                # failback moves it back the same way.
                extra_args=(
                    *NODE_ARGS,
                    "--standby",
                    "--witness-etcd",
                    etcd["b"].endpoint,
                    "--witness-site",
                    "b",
                    *witness,
                ),
            )
            group.procs.append(node_b)
            await asyncio.to_thread(node_b.start)
            metrics_port = free_port()
            watch = CommandProcess(
                group.dir / "watch",
                "dr-watch",
                [
                    "-v",
                    "dr",
                    "watch",
                    "--standby-dsn",
                    pair.standby_admin_dsn,
                    "--etcd",
                    f"{etcd['b'].endpoint},{etcd['w'].endpoint}",
                    "--site",
                    "b",
                    "--from-site",
                    "a",
                    "--detection-s",
                    str(detection_s),
                    "--poll-interval-s",
                    "0.1",
                    "--metrics-port",
                    str(metrics_port),
                ],
                ready_log="dr watch: site b watching",
            )
            group.procs.append(watch)
            await asyncio.to_thread(watch.start)
            await eventually(
                lambda: _up(f"http://127.0.0.1:{metrics_port}/metrics"), what="dr watch metrics"
            )
            yield Sites(
                pair=pair,
                etcd=etcd,
                proxy=proxy,
                group=group,
                node_a=node_a,
                node_b=node_b,
                watch=watch,
                metrics_port=metrics_port,
                records=records,
                ttl_s=ttl_s,
                margin_s=margin_s,
                detection_s=detection_s,
            )
        finally:
            await asyncio.to_thread(group.stop_all)
            await proxy.stop()


async def dispatch_times(dsn: str, above_token: int = 0) -> list[datetime]:
    """When each dispatch (to DISPATCHED or RUNNING) in the database at ``dsn`` was
    committed, from its audit trail, for tokens above ``above_token``."""
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute("SELECT set_config('tickwheel.tenant', '*', false)")
        rows = await conn.fetch(
            "SELECT at FROM task_transitions WHERE reason LIKE 'dispatched%'"
            " AND fencing_token > $1 ORDER BY at",
            above_token,
        )
    finally:
        await conn.close()
    return [r["at"].astimezone(UTC) for r in rows]


async def generation(dsn: str) -> int:
    conn = await asyncpg.connect(dsn)
    try:
        return int(await conn.fetchval("SELECT generation FROM fencing_generation"))
    finally:
        await conn.close()


def now() -> float:
    return time.time()
