"""``tickwheel dev``: the embedded server on a laptop, and the ``--demo`` workload.

Runs a :class:`~scheduler.node.Node` on SQLite and, for the demo, workers and a client
of the SDKs; called by the ``dev`` command (``_serve``).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import math
import os
import secrets
import sys
import time
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from rich.panel import Panel
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from scheduler._errors import AlreadyExists, TickwheelError
from scheduler.cli._output import console
from scheduler.cli._runner import wait_for_signal
from scheduler.client import Client, JitterMode, TaskSpec
from scheduler.cluster import FileLease
from scheduler.engine import Engine, EngineConfig
from scheduler.metrics import MetricsConfig
from scheduler.node import Node, NodeConfig
from scheduler.regions import DEFAULT_REGION, RegionDirectory
from scheduler.server import ServerConfig
from scheduler.ui import RunningUI, UIConfig, start_ui
from scheduler.worker import TaskContext, Worker

DEMO_JITTER_WINDOW_S = 15
"""The demo shrinks the ±120 s jitter window so the whole run fits in about a minute."""
DEMO_STRICT_SHARE = 0.3
DEMO_SUBMIT_BATCH = 2_000
DEMO_LEAD_S = 12.0
DEMO_LEAD_WITH_UI_S = 40.0
"""With the dashboard on: time to open its forecast before the stampede."""
DEMO_WORKERS = 4
DEMO_SLOTS_PER_WORKER = 2_500


DEV_TENANT = "dev"
DEV_UI_PORT = 8090
"""The dashboard's port under ``dev`` (a free one when it is taken)."""


@dataclasses.dataclass(frozen=True, slots=True)
class ConnectFacts:
    """What a client needs to reach the dev server (``dev --json`` prints it)."""

    target: str
    api_key: str
    admin_token: str
    tenant_id: str
    database: str
    metrics_url: str = ""
    """Prometheus ``/metrics`` of the dev node ("" when off)."""
    ui_url: str = ""
    """The dashboard's address (empty with ``--no-ui``)."""
    ui_login_url: str = ""
    """The dashboard's login link (a new one each start; empty with ``--no-ui``): a
    browser that opens it is logged in with the dev key and the admin token. Every other
    browser gets the login page."""


def credentials_path(db: Path) -> Path:
    """Where ``dev`` keeps its tenant, key and admin token between restarts: beside the
    SQLite file (the store keeps only a hash of the key), readable by its owner only."""
    return db.with_name(db.name + ".credentials.json")


def write_private(path: Path, facts: ConnectFacts) -> None:
    """``facts`` as JSON in ``path``, mode 0600 from the start (never world-readable),
    whole or not at all: written beside it and renamed over it, so a reader that finds
    the file never reads it half-written."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(dataclasses.asdict(facts), f, indent=2, sort_keys=True)
        f.write("\n")
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)


def _read_saved(path: Path) -> dict[str, str]:
    try:
        saved = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return {k: v for k, v in saved.items() if isinstance(v, str)} if isinstance(saved, dict) else {}


async def _dev_identity(engine: Engine, saved: dict[str, str]) -> tuple[uuid.UUID, str]:
    """The dev tenant and its key: the saved ones while the database still knows them,
    else a tenant named "dev" (another name if one exists that we hold no key of)."""
    secret = saved.get("api_key", "")
    if secret:
        with contextlib.suppress(TickwheelError):
            return (await engine.tenancy.authenticate(secret)).tenant_id, secret
    tenant_id: uuid.UUID | None = None
    with contextlib.suppress(TickwheelError, ValueError):
        tenant_id = (await engine.tenancy.get_tenant(uuid.UUID(saved.get("tenant_id", "")))).id
    if tenant_id is None:
        # The dev tenant gets quotas far above the defaults (1,000/s, 200 in flight) so
        # the demo's stampede measures the scheduler, not the throttle.
        big = 1_000_000
        try:
            tenant = await engine.tenancy.create_tenant(
                name=DEV_TENANT, rate_limit_rps=big, max_concurrent_workers=big
            )
        except AlreadyExists:
            tenant = await engine.tenancy.create_tenant(
                name=f"{DEV_TENANT}-{secrets.token_hex(3)}",
                rate_limit_rps=big,
                max_concurrent_workers=big,
            )
        tenant_id = tenant.id
    _, secret = await engine.tenancy.create_api_key(tenant_id, "dev")
    return tenant_id, secret


async def run_dev(
    *,
    listen: str,
    db: str,
    demo: bool,
    demo_tasks: int,
    reuse_port: bool = False,
    as_json: bool = False,
    credentials_file: str | None = None,
    timing: Mapping[str, object] | None = None,
    limits: Mapping[str, Any] | None = None,
    metrics: MetricsConfig | None = None,
    ui_port: int | None = DEV_UI_PORT,
    region: str = DEFAULT_REGION,
    regions: RegionDirectory | None = None,
) -> None:
    """Start the embedded node and the dashboard (on ``ui_port``, a free port when that
    one is taken; None: no dashboard); print how to connect; serve or run the demo. The
    tenant, key and admin token are kept beside the database and reused on restart."""
    path = await _prepare_db(Path(db), fresh=demo)
    saved_path = credentials_path(path)
    saved = _read_saved(saved_path)
    admin_token = saved.get("admin_token") or secrets.token_urlsafe(24)
    # The node believes the browser address the dashboard's calls name only with this.
    dashboard_secret = secrets.token_urlsafe(24)
    extra: dict[str, Any] = dict(timing or {})
    if demo:
        extra["jitter_window_s"] = DEMO_JITTER_WINDOW_S
    node = Node(
        NodeConfig(
            store_url="sqlite:///" + str(path),
            engine=EngineConfig(**extra, region=region),
            server=ServerConfig(
                listen=listen,
                admin_token=admin_token,
                dashboard_secret=dashboard_secret,
                reuse_port=reuse_port,
                region=region,
                regions=regions or RegionDirectory(),
                **(limits or {}),
            ),
            metrics=metrics,
        )
    )
    dashboard: RunningUI | None = None
    try:
        await node.start()
        engine = node.engine
        target = f"127.0.0.1:{node.port}"
        tenant_id, secret = await _dev_identity(engine, saved)
        if ui_port is not None:
            dashboard = await start_ui(
                UIConfig(
                    target=target,
                    api_key=secret,
                    admin_token=admin_token,
                    port=ui_port,
                    port_fallback=True,
                    dashboard_secret=dashboard_secret,
                )
            )
        ui_url = dashboard.url if dashboard else ""
        ui_login_url = (dashboard.login_url or "") if dashboard else ""
        facts = ConnectFacts(
            target,
            secret,
            admin_token,
            str(tenant_id),
            str(path),
            node.metrics_url or "",
            ui_url,
            ui_login_url,
        )
        write_private(saved_path, facts)
        if credentials_file:
            write_private(Path(credentials_file), facts)
        if as_json:
            print(json.dumps(dataclasses.asdict(facts), sort_keys=True), flush=True)
        else:
            _banner(facts)
        if demo:
            # With the dashboard on, the stampede comes later so there is time to open
            # the forecast, and the node stays up afterwards to look at what ran.
            lead_s = DEMO_LEAD_WITH_UI_S if dashboard else DEMO_LEAD_S
            await run_demo(engine, target, secret, demo_tasks, lead_s=lead_s)
            if dashboard is not None:
                console.print(
                    "demo done; the dashboard stays up at "
                    f"[cyan]{dashboard.login_url or dashboard.url}[/] (Ctrl-C to stop)",
                    soft_wrap=True,
                )
                await wait_for_signal()
        else:
            await wait_for_signal()
    finally:
        if dashboard is not None:
            await dashboard.stop()
        await node.stop(1.0)


HELLO_PY = (
    "from scheduler.worker import TaskContext\n\n\n"
    "async def handler(ctx: TaskContext) -> dict:\n"
    '    return {"greeting": f"hello {ctx.payload[\'name\']}"}\n'
)
"""The handler module the banner's commands run (README, "On PostgreSQL")."""


def _path_export() -> str:
    """``PATH="DIR:$PATH" ``, DIR holding the running ``tickwheel`` (``make dev`` runs
    ``.venv/bin/tickwheel``, which is on no PATH), so the banner's commands work as
    pasted; harmless where it is on PATH already."""
    return f'PATH="{Path(sys.argv[0]).resolve().parent}:$PATH" '


def try_it(f: ConnectFacts) -> str:
    """The commands to paste into another terminal, one per line and never wrapped:
    the environment, a handler module to write, a worker, a task, the list."""
    hello = HELLO_PY.replace("\n", "\\n").replace("'", "'\\''")
    return (
        f"export {_path_export()}TICKWHEEL_TARGET={f.target} TICKWHEEL_API_KEY={f.api_key}\n"
        f"printf '{hello}' > hello.py\n"
        "tickwheel worker --type hello=hello:handler &\n"
        'tickwheel submit hello --payload \'{"name": "world"}\' --in 5\n'
        "tickwheel list"
    )


def _wheel_kind() -> str:
    """Which timing wheel runs: the Cython one, or its pure-Python twin and why (a
    machine without a C compiler builds no extension: ``make build-dev``)."""
    import _wheel

    if _wheel.IMPLEMENTATION == "c":
        return "Cython"
    return f"pure Python, slower ({_wheel.EXTENSION_ERROR})"


def _banner(f: ConnectFacts) -> None:
    console.print(
        Panel.fit(
            f"[bold]Tickwheel dev server[/] on [cyan]{f.target}[/] (SQLite: {f.database})\n"
            f"tenant      {f.tenant_id}\n"
            f"API key     [green]{f.api_key}[/]\n"
            f"admin token {f.admin_token}\n"
            f"(kept in {credentials_path(Path(f.database))} and reused on restart)"
            + (f"\nmetrics     {f.metrics_url}" if f.metrics_url else "")
            + (f"\ndashboard   {f.ui_url} (open the login link below)" if f.ui_url else "")
            + f"\nwheel       {_wheel_kind()}",
            title="connect",
        )
    )
    if f.ui_login_url:
        # Outside the box and never wrapped: a terminal keeps the link one clickable URL.
        console.print(
            f"dashboard   [cyan]{f.ui_login_url}[/]\n"
            "            (logs your browser in with the key and the admin token above; "
            "a new link each start)",
            soft_wrap=True,
        )
    # Outside the box too, one command a line: pasted as a whole into another terminal
    # in this directory, they run a worker and a task (issue 40: the box wrapped them).
    console.print("try it, in another terminal in this directory:", style="bold")
    console.print(try_it(f), soft_wrap=True, markup=False, highlight=False)


async def _prepare_db(path: Path, *, fresh: bool) -> Path:
    if fresh:
        # The demo measures a fresh workload: keep it apart from the dev database.
        path = path.with_name("demo.db")
        # Not while another demo runs on it (the node takes the lock again itself).
        lease = FileLease.beside(path, "tickwheel dev --demo (clearing the database)")
        await lease.acquire()
        try:
            _remove_db(path)
        finally:
            await lease.release()
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def _remove_db(path: Path) -> None:
    for suffix in ("", "-wal", "-shm", "-journal"):
        with contextlib.suppress(FileNotFoundError):
            Path(f"{path}{suffix}").unlink()


class _Recorder:
    """What the demo handler saw: lateness at receipt, per kind, and finish times."""

    def __init__(self) -> None:
        self.lateness_ms: dict[str, list[float]] = {"strict": [], "jittered": []}

    @property
    def done(self) -> int:
        return sum(len(v) for v in self.lateness_ms.values())

    async def handler(self, ctx: TaskContext) -> dict[str, float]:
        late = (ctx.received_at - ctx.due_at).total_seconds() * 1000
        self.lateness_ms["strict" if ctx.type == "demo.stampede" else "jittered"].append(late)
        return {"lateness_ms": round(late, 3)}


def _pct(values: list[float], q: float) -> float:
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def run_demo(
    engine: Engine, target: str, api_key: str, total: int, *, lead_s: float = DEMO_LEAD_S
) -> None:
    """A stampede at a round instant: some tasks strict, the rest jittered late-only."""
    rec = _Recorder()
    workers = [
        Worker(
            target,
            api_key=api_key,
            handlers={"demo.stampede": rec.handler, "demo.spread": rec.handler},
            slots=DEMO_SLOTS_PER_WORKER,
            worker_id=f"demo-worker-{i}",
        )
        for i in range(DEMO_WORKERS)
    ]
    runs = [
        asyncio.create_task(w.run(), name=f"tickwheel-demo-worker-{i}")
        for i, w in enumerate(workers)
    ]
    client = await Client.connect(target, api_key=api_key)
    try:
        now = datetime.now(UTC)
        instant = now + timedelta(seconds=lead_s)
        instant = instant.replace(microsecond=0) + timedelta(seconds=5 - instant.second % 5)
        n_strict = int(total * DEMO_STRICT_SHARE)
        specs = [
            TaskSpec(
                type="demo.stampede", payload={"i": i}, scheduled_at=instant, strict_timing=True
            )
            if i < n_strict
            else TaskSpec(
                type="demo.spread",
                payload={"i": i},
                scheduled_at=instant,
                jitter_mode=JitterMode.LATE_ONLY,
            )
            for i in range(total)
        ]
        console.print(
            f"demo: {total:,} tasks at [bold]{instant:%H:%M:%S}[/] UTC — {n_strict:,} strict "
            f"(a stampede on the instant), {total - n_strict:,} jittered late-only over "
            f"{DEMO_JITTER_WINDOW_S} s"
        )
        with Progress(
            TextColumn("{task.description:<10}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("{task.fields[info]}"),
            console=console,
        ) as progress:
            sub = progress.add_task("submitted", total=total, info="")
            run = progress.add_task("completed", total=total, info="")
            t_submit = time.monotonic()
            for start in range(0, total, DEMO_SUBMIT_BATCH):
                await client.submit_many(specs[start : start + DEMO_SUBMIT_BATCH])
                progress.update(sub, completed=min(total, start + DEMO_SUBMIT_BATCH))
                progress.update(run, completed=rec.done)
            submit_s = time.monotonic() - t_submit
            progress.update(sub, info=f"{total / submit_s:,.0f} tasks/s")
            deadline = instant + timedelta(seconds=DEMO_JITTER_WINDOW_S + 60)
            while rec.done < total and datetime.now(UTC) < deadline:
                left = (instant - datetime.now(UTC)).total_seconds()
                info = (
                    f"stampede in {left:4.1f} s"
                    if left > 0
                    else f"p50 {_pct(rec.lateness_ms['strict'], 0.5):.1f} ms (strict)"
                )
                progress.update(run, completed=rec.done, info=info)
                await asyncio.sleep(0.2)
            progress.update(run, completed=rec.done, info="")
    finally:
        await client.close()
        await asyncio.gather(*(w.shutdown(grace_s=5) for w in workers))
        await asyncio.gather(*runs, return_exceptions=True)
    _summary(engine, rec, total, submit_s)


def _summary(engine: Engine, rec: _Recorder, total: int, submit_s: float) -> None:
    table = Table(title="Tickwheel demo", show_header=True)
    table.add_column("tasks")
    table.add_column("count", justify="right")
    table.add_column("lateness p50 (ms)", justify="right")
    table.add_column("p99 (ms)", justify="right")
    table.add_column("max (ms)", justify="right")
    every: list[float] = []
    for kind, values in rec.lateness_ms.items():
        every += values
        table.add_row(
            kind,
            f"{len(values):,}",
            f"{_pct(values, 0.5):.1f}",
            f"{_pct(values, 0.99):.1f}",
            f"{max(values, default=math.nan):.1f}",
        )
    table.add_row(
        "all",
        f"{len(every):,}",
        f"{_pct(every, 0.5):.1f}",
        f"{_pct(every, 0.99):.1f}",
        f"{max(every, default=math.nan):.1f}",
    )
    console.print(table)
    stats = engine.stats
    p50, p99 = stats.lateness_percentile(0.5), stats.lateness_percentile(0.99)
    if p50 is not None and p99 is not None:
        console.print(f"engine dispatch lateness: p50 {p50:.1f} ms, p99 {p99:.1f} ms")
    console.print(f"submit throughput: {total / submit_s:,.0f} tasks/s")
    strict = rec.lateness_ms["strict"]
    # The strict tasks are all due at one instant: how fast they reach the worker is the
    # dispatch throughput under a stampede.
    burst_s = (max(strict) - min(strict)) / 1000 if len(strict) > 1 else 0.0
    if burst_s > 0:
        console.print(
            f"stampede throughput: {len(strict):,} strict tasks in {burst_s:.2f} s "
            f"= {len(strict) / burst_s:,.0f} tasks/s"
        )
    if rec.done < total:
        console.print(f"[yellow]only {rec.done:,} of {total:,} tasks ran before the deadline[/]")
