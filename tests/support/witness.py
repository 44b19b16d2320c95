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
import os
import shutil
import time
import urllib.request
from collections.abc import AsyncIterator, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

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
from tests.support.servers import EtcdServer, ServerStartError, free_port
from tests.support.waiting import eventually

HANDLER = {"work": "tests.acceptance.handlers:work"}
NODE_ARGS = ("--preload-interval-s", "0.2", "--canary-interval-s", "0")


class EtcdMember(EtcdServer):
    """One member of a static 3-member etcd cluster (all ports chosen up front); its
    health check and endpoint are the single-member server's."""

    def __init__(
        self, base_dir: Path, member: str, peer_port: int, cluster: str, advertise_port: int
    ) -> None:
        super().__init__(base_dir)
        self.member = member
        self.peer_port = peer_port
        self.advertise_port = advertise_port
        """The peer port the others dial: a :class:`PeerProxy` in front of ours."""
        self.cluster = cluster
        self.port = free_port()

    def command(self) -> Sequence[str]:
        client = f"http://{self.host}:{self.port}"
        peer = f"http://{self.host}:{self.peer_port}"
        advertised = f"http://{self.host}:{self.advertise_port}"
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
            advertised,
            "--initial-cluster",
            self.cluster,
            "--initial-cluster-token",
            f"tickwheel-witness-{self.cluster.__hash__() & 0xFFFFFF:x}",
            "--initial-cluster-state",
            "new",
            "--log-level",
            "warn",
        ]


class PeerProxy(PartitionProxy):
    """A :class:`PartitionProxy` in front of an etcd member's peer port that can also
    cut only the connections another process made (:meth:`cut_from`): all peers dial
    one advertised URL per member, so the proxy tells A's member from the witness by
    who owns the dialing socket (``/proc``)."""

    def __init__(self, target_port: int) -> None:
        super().__init__("127.0.0.1", target_port)
        self._cut_pids: set[int] = set()
        self._accepting: set[asyncio.Task[Any]] = set()
        self._closed: list[asyncio.StreamWriter] = []
        self._stopping = False
        self.pids: set[int] = set()
        """The processes that may dial it (the members): only theirs are looked up."""

    async def stop(self) -> None:
        """Stop, and wait until every connection it held is closed."""
        self._stopping = True
        if self._server is not None:
            self._server.close()  # no connection accepted from here on
        # A connection accepted just before has its handler's task made but maybe not
        # run: let those run (each closes its own, as stopping) before the sweep below,
        # or its transport outlives the test's loop and warns when collected later.
        for _ in range(3):
            await asyncio.sleep(0)
        accepting = [t for t in self._accepting if not t.done()]
        for t in accepting:
            t.cancel()
        if accepting:
            await asyncio.wait(accepting)
        await super().stop()
        for w in self._closed:
            w.transport.abort()
            with contextlib.suppress(OSError, RuntimeError, asyncio.CancelledError):
                await w.wait_closed()

    def cut_from(self, pid: int) -> None:
        """Drop every byte of the connections ``pid`` made (existing and new)."""
        self._cut_pids.add(pid)

    def heal(self) -> None:
        self._cut_pids.clear()
        super().heal()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._closed.append(writer)  # every connection, closed and awaited by stop()
        if self._stopping:
            writer.transport.abort()
            with contextlib.suppress(OSError, RuntimeError):
                await writer.wait_closed()
            return
        task = asyncio.current_task()
        if task is not None:
            self._accepting.add(task)
            task.add_done_callback(self._accepting.discard)
        peer = writer.get_extra_info("peername")
        owner = _socket_owner(int(peer[1]), self.port, self.pids) if peer else None
        try:
            up_reader, up_writer = await asyncio.open_connection(*self._target)
        except (OSError, asyncio.CancelledError):
            writer.transport.abort()
            return
        self._closed.append(up_writer)
        self._writers |= {writer, up_writer}
        for src, dst in ((reader, up_writer), (up_reader, writer)):
            task = asyncio.create_task(self._pump_from(src, dst, owner), name="test-peer-pump")
            self._pumps.add(task)
            task.add_done_callback(self._pumps.discard)

    async def _pump_from(
        self, src: asyncio.StreamReader, dst: asyncio.StreamWriter, owner: int | None
    ) -> None:
        try:
            while data := await src.read(65536):
                if not self.cut_off and owner not in self._cut_pids:
                    dst.write(data)
                    await dst.drain()
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            self._writers.discard(dst)
            dst.close()
            with contextlib.suppress(OSError, RuntimeError):
                await dst.wait_closed()


def _socket_owner(client_port: int, server_port: int, pids: set[int]) -> int | None:
    """Which of ``pids`` owns the socket ``127.0.0.1:client_port -> :server_port``
    (Linux ``/proc``)."""
    inode = None
    with contextlib.suppress(OSError):
        for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
            f = line.split()
            if int(f[1].split(":")[1], 16) == client_port and int(f[2].split(":")[1], 16) == (
                server_port
            ):
                inode = f[9]
                break
    if inode is None:
        return None
    target = f"socket:[{inode}]"
    for pid in pids:
        with contextlib.suppress(OSError):
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                with contextlib.suppress(OSError):
                    if os.readlink(fd) == target:
                        return pid
    return None


@contextlib.contextmanager
def witness_cluster(
    base: Path,
    peers: dict[str, int] | None = None,
    advertise: dict[str, int] | None = None,
    *,
    wait: bool = True,
) -> Iterator[dict[str, EtcdMember]]:
    """Members ``a``, ``b`` and ``w`` (the witness), started together (a member is
    healthy only once a quorum is up), listening for peers on ``peers`` (member ->
    port) and dialed by the others on ``advertise`` (a :class:`PeerProxy` in front)."""
    names = ("a", "b", "w")
    peers = peers or {n: free_port() for n in names}
    shown = advertise or peers
    cluster = ",".join(f"{n}=http://127.0.0.1:{shown[n]}" for n in names)
    members = {n: EtcdMember(base / f"etcd-{n}", n, peers[n], cluster, shown[n]) for n in names}
    try:
        for m in members.values():
            m._spawn()
        for m in members.values():
            if wait:  # else the caller waits (its event loop runs the peer proxies)
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
    """Between A's node and etcd member ``a`` (cut: A's node loses etcd)."""
    peer_proxies: dict[str, PeerProxy]
    """In front of each member's peer port, with ``sites(peer_proxies=True)`` (see
    :meth:`partition_a`); empty otherwise."""
    group: ProcessGroup
    node_a: ServeProcess
    node_b: StandbyServeProcess
    watch: CommandProcess
    metrics_port: int
    records: Path
    ttl_s: int
    margin_s: float
    detection_s: float

    def partition_a(self) -> None:
        """Site A cut off from the witness and B, every process of A running: nothing
        reaches A's etcd member from its peers, nothing it sends reaches them. A's node
        still reaches its own member (which, without a majority, renews nothing)."""
        a = self.etcd["a"].proc
        assert a is not None
        self.peer_proxies["a"].cut()
        self.peer_proxies["b"].cut_from(a.pid)
        self.peer_proxies["w"].cut_from(a.pid)

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
    peer_proxies: bool = False,
) -> AsyncIterator[Sites]:
    """Region A serving through the witness, B's standby node and orchestrator
    watching; all stopped after."""
    records = base / "records.jsonl"
    peer_ports = {n: free_port() for n in ("a", "b", "w")}
    proxies = {n: PeerProxy(p) for n, p in peer_ports.items()} if peer_proxies else {}
    for p in proxies.values():
        await p.start()
    advertise = {n: p.port for n, p in proxies.items()} or None
    try:
        with (
            replicated_pair(f"tw_witness_{free_port()}") as pair,
            witness_cluster(base / "etcd", peer_ports, advertise, wait=False) as etcd,
            process_group(base / "procs") as group,
        ):
            pids = {m.proc.pid for m in etcd.values() if m.proc is not None}
            for p in proxies.values():
                p.pids = pids
            for member in etcd.values():
                await asyncio.to_thread(member._wait_ready)
            if synchronous:
                from tests.support.dr import SYNCHRONOUS_SETTING

                pair.primary.psql(
                    f"ALTER SYSTEM SET synchronous_standby_names = '{SYNCHRONOUS_SETTING}'"
                )
                pair.primary.psql("SELECT pg_reload_conf()")
            proxy = PeerProxy(etcd["a"].port)  # its stop() closes every connection
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
                    peer_proxies=proxies,
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
    finally:
        for p in proxies.values():
            await p.stop()


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
