"""A real ``tickwheel dev --json`` for the browser tests, real tasks in it, and the
gRPC API the tests compare the dashboard against.

:class:`DevProcess` starts ``tickwheel dev`` as an operator would (its own process
group, a fresh SQLite file in a temporary directory, free ports) and reads its facts
line (``target``, ``api_key``, ``admin_token``, ``tenant_id``, ``ui_url``,
``ui_login_url``); :func:`open_login_link` logs a browser in as a user clicking it.
:func:`seed` submits tasks through the public client (:mod:`scheduler.client`) and
real ``tickwheel worker`` processes so every page has something to show.
:class:`Api` calls the dashboard's RPCs on a plain synchronous gRPC channel.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import secrets
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import grpc

from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from scheduler._proto.tickwheel.v1 import tickwheel_pb2_grpc as pbg
from scheduler.client import (
    AdminClient,
    JitterMode,
    Pool,
    StaleFencingToken,
    SyncClient,
    TaskSpec,
    TaskState,
)
from tests.browser._chrome import Browser
from tests.support.processes import TICKWHEEL, TickwheelProcess, WorkerProcess
from tests.support.servers import ServerStartError, free_port, port_open

HANDLERS = "tests.browser.handlers"
STATES = (
    "SCHEDULED",
    "PRELOADED",
    "DISPATCHED",
    "RUNNING",
    "RETRYING",
    "COMPLETED",
    "CANCELLED",
    "DEAD_LETTER",
)


class DevProcess(TickwheelProcess):
    """``tickwheel dev --json`` on a fresh SQLite file, gRPC and dashboard on free ports."""

    def __init__(self, base_dir: Path, *, ui: bool = True) -> None:
        super().__init__(base_dir, "dev")
        self.ui = ui
        self.ui_port = 0
        self.facts: dict[str, Any] = {}

    def command(self) -> Sequence[str]:
        args = [
            TICKWHEEL,
            "dev",
            "--json",
            "--db",
            str(self.dir / "dev.db"),
            "--listen",
            f"{self.host}:{self.port}",
            # Exact counts: the tests compare counts right after changing tasks (the
            # count cache is tested in tests/integration/transport/test_insight_api.py).
            "--count-cache-s",
            "0",
        ]
        if self.ui:
            if not self.ui_port:
                self.ui_port = free_port()
            args += ["--ui-port", str(self.ui_port)]
        return args

    def _read_facts(self) -> dict[str, Any]:
        for line in self.log().splitlines():
            line = line.strip()
            if line.startswith("{"):
                try:
                    facts = json.loads(line)
                except ValueError:
                    continue
                if isinstance(facts, dict) and "target" in facts:
                    return facts
        return {}

    def ready(self) -> bool:
        if not port_open(self.host, self.port):
            return False
        self.facts = self._read_facts()
        if not self.facts:
            return False
        if self.ui:
            url = self.facts.get("ui_url")
            if not url:
                raise ServerStartError(
                    f"tickwheel dev printed no ui_url in its facts: {self.facts}; log:\n"
                    f"{self.log_tail()}"
                )
            try:
                with urllib.request.urlopen(str(url) + "healthz", timeout=2):
                    pass
            except urllib.error.HTTPError:
                pass  # it answers (no /healthz route is fine)
            except OSError:
                return False
        return True

    @property
    def target(self) -> str:
        return str(self.facts["target"])

    @property
    def api_key(self) -> str:
        return str(self.facts["api_key"])

    @property
    def admin_token(self) -> str:
        return str(self.facts["admin_token"])

    @property
    def tenant_id(self) -> str:
        return str(self.facts["tenant_id"])

    @property
    def login_url(self) -> str:
        """The dashboard's login link (``…/login#token=…``), new each start."""
        return str(self.facts["ui_login_url"])

    @property
    def ui_url(self) -> str:
        """The dashboard's base URL, ending in ``/``."""
        url = str(self.facts["ui_url"])
        return url if url.endswith("/") else url + "/"


def open_login_link(browser: Browser, dev: DevProcess) -> None:
    """Open the login link ``dev`` printed, as a user clicking it would, and wait until
    its script has logged the browser in (the overview, the token gone from the URL)."""
    browser.get("about:blank")  # from /login itself the link would change the fragment only
    browser.get(dev.login_url)
    browser.wait_for(
        lambda: (
            browser.driver.current_url.rstrip("/") == dev.ui_url.rstrip("/")
            and browser.has_testid("logout")
        ),
        what="the login link to log the browser in",
    )


# --------------------------------------------------------------------------- the API


def state_name(value: int) -> str:
    """``pb.TASK_STATE_COMPLETED`` -> ``"COMPLETED"``."""
    return pb.TaskState.Name(value).removeprefix("TASK_STATE_")


def pool_name(value: int) -> str:
    return pb.Pool.Name(value).removeprefix("POOL_")


class Api:
    """The gRPC API as one tenant (API key) or as the admin (token) sees it."""

    def __init__(
        self, target: str, *, api_key: str | None = None, admin_token: str | None = None
    ) -> None:
        self.channel = grpc.insecure_channel(target)
        if api_key is not None:
            self.metadata: tuple[tuple[str, str], ...] = (("x-api-key", api_key),)
        else:
            self.metadata = (("x-admin-token", admin_token or ""),)
        self.sched = pbg.SchedulerServiceStub(self.channel)  # type: ignore[no-untyped-call]
        self.admin = pbg.AdminServiceStub(self.channel)  # type: ignore[no-untyped-call]

    def close(self) -> None:
        self.channel.close()

    def call(self, method: Callable[..., Any], request: Any) -> Any:
        return method(request, metadata=self.metadata, timeout=30)

    def counts(self, task_filter: pb.TaskFilter | None = None) -> tuple[dict[str, int], int]:
        """CountTasks summed per state name (every state present, 0 when empty), and
        the total."""
        resp = self.call(self.sched.CountTasks, pb.CountTasksRequest(filter=task_filter))
        by_state = dict.fromkeys(STATES, 0)
        for c in resp.counts:
            by_state[state_name(c.state)] += c.count
        return by_state, int(resp.total)

    def pool_counts(self) -> dict[str, int]:
        resp = self.call(self.sched.CountTasks, pb.CountTasksRequest())
        out: dict[str, int] = {}
        for c in resp.counts:
            out[pool_name(c.pool)] = out.get(pool_name(c.pool), 0) + c.count
        return out

    def task(self, task_id: str) -> pb.Task:
        resp: pb.GetTaskResponse = self.call(self.sched.GetTask, pb.GetTaskRequest(task_id=task_id))
        return resp.task

    def state(self, task_id: str) -> str:
        return state_name(self.task(task_id).state)

    def history(self, task_id: str) -> pb.GetTaskHistoryResponse:
        req = pb.GetTaskHistoryRequest(task_id=task_id)
        resp: pb.GetTaskHistoryResponse = self.call(self.sched.GetTaskHistory, req)
        return resp

    def workers(self) -> list[pb.WorkerInfo]:
        return list(self.call(self.sched.ListWorkers, pb.ListWorkersRequest()).workers)

    def forecast(
        self, bucket_s: int = 60, *, start: datetime | None = None, buckets: int = 0
    ) -> pb.GetForecastResponse:
        """GetForecast; ``start`` None means the current whole minute (as the pages ask)."""
        start = start or datetime.now(UTC).replace(second=0, microsecond=0)
        req = pb.GetForecastRequest(bucket_s=bucket_s, buckets=buckets)
        req.start.FromDatetime(start)
        resp: pb.GetForecastResponse = self.call(self.sched.GetForecast, req)
        return resp

    def schedules(self) -> list[pb.Schedule]:
        return list(self.call(self.sched.ListSchedules, pb.ListSchedulesRequest()).schedules)

    def expectations(self) -> list[pb.Expectation]:
        resp = self.call(self.sched.ListExpectations, pb.ListExpectationsRequest())
        return list(resp.expectations)

    def workflow(self, workflow_id: str) -> pb.GetWorkflowResponse:
        req = pb.GetWorkflowRequest(workflow_id=workflow_id)
        resp: pb.GetWorkflowResponse = self.call(self.sched.GetWorkflow, req)
        return resp


# --------------------------------------------------------------------------- the data


@dataclasses.dataclass
class Seeded:
    """What :func:`seed` put in the dev server, for the tests to look up."""

    completed: list[str]
    dead: list[str]
    future: list[str]
    cancel_me: str
    redrive_me: str
    workflow_id: str
    workflow_nodes: dict[str, str]
    schedule_name: str
    schedule_id: str
    expectation_job: str
    other_tenant_id: str
    other_api_key: str
    other_task_id: str
    other_marker: str
    other_secret: str
    ok_worker: str


def _wait_states(
    client: SyncClient, ids: Sequence[str], states: set[TaskState], timeout_s: float = 60.0
) -> None:
    deadline = time.monotonic() + timeout_s
    pending = list(ids)
    while pending:
        pending = [i for i in pending if client.get(i).state not in states]
        if not pending:
            return
        if time.monotonic() > deadline:
            got = {i: client.get(i).state for i in pending}
            raise AssertionError(f"tasks not in {states} after {timeout_s}s: {got}")
        time.sleep(0.1)


def seed(dev: DevProcess, base_dir: Path) -> Iterator[Seeded]:
    """Real tasks in every state a page shows, a workflow, a schedule, an expectation
    and a second tenant with a task of its own. Yields while the ``ok`` worker keeps
    running (the overview's workers table shows it); stops it at the end."""
    ok_worker = WorkerProcess(
        base_dir / "ok-worker",
        dev.target,
        dev.api_key,
        {"ok": f"{HANDLERS}:ok"},
        name="browser-ok-worker",
        slots=4,
    )
    boom_worker = WorkerProcess(
        base_dir / "boom-worker",
        dev.target,
        dev.api_key,
        {"boom": f"{HANDLERS}:boom"},
        name="browser-boom-worker",
        slots=2,
    )
    ok_worker.start()
    try:
        boom_worker.start()
        with SyncClient(dev.target, api_key=dev.api_key) as client:
            completed = [
                str(client.submit("ok", {"n": i}, idempotency_key=f"done-{i}").id) for i in range(3)
            ]
            dead = [str(client.submit("boom", {"n": i}, max_retries=0).id) for i in range(3)]
            _wait_states(client, completed, {TaskState.COMPLETED})
            _wait_states(client, dead, {TaskState.DEAD_LETTER})
            # A zombie's write (an older fencing token): the store refuses it and the
            # task's history keeps it (the timeline's refused-write row).
            zombie = client.get(completed[0])
            with contextlib.suppress(StaleFencingToken):
                client.run(client.aio.complete(zombie.id, zombie.fencing_token - 1, {"z": 1}))
            # No worker takes `boom` from here on: a redriven task stays due, visibly.
            boom_worker.stop()

            now = datetime.now(UTC)
            # A forecast with data: minute-aligned tasks spread late-only by jitter.
            base = (now + timedelta(minutes=10)).replace(second=0, microsecond=0)
            pools = (Pool.STANDARD, Pool.CRITICAL, Pool.BULK)
            future_specs = [
                TaskSpec(
                    type="report",
                    payload={"n": i},
                    scheduled_at=base + timedelta(minutes=i % 3),
                    jitter_mode=JitterMode.LATE_ONLY,
                    pool=pools[i % 3],
                )
                for i in range(24)
            ]
            future = [str(t.id) for t in client.submit_many(future_specs)]
            cancel_me = str(
                client.submit(
                    "report", {"n": "cancel"}, delay=timedelta(minutes=30), strict_timing=True
                ).id
            )

            wf = client.run(
                client.aio.submit_workflow(
                    {
                        "extract": TaskSpec(type="ok", payload={"n": "extract"}),
                        "transform": TaskSpec(type="ok", payload={"n": "transform"}),
                        "load": TaskSpec(
                            type="report",
                            payload={"n": "load"},
                            scheduled_at=now + timedelta(minutes=50),
                        ),
                    },
                    [("extract", "transform"), ("transform", "load")],
                    name="browser-etl",
                )
            )
            early = [str(wf.nodes["extract"].id), str(wf.nodes["transform"].id)]
            _wait_states(client, early, {TaskState.COMPLETED})
            schedule = client.run(
                client.aio.create_schedule(
                    "browser-hourly", "report", {"n": "hourly"}, interval_s=3600
                )
            )
            client.run(client.aio.register_expectation("ok", interval_s=3600, tolerance_s=300))

        marker = f"OTHER-TENANT-{secrets.token_hex(6)}"
        other_secret = f"OTHER-PAYLOAD-{secrets.token_hex(6)}"
        other_tenant, other_key = _other_tenant(dev, marker)
        with SyncClient(dev.target, api_key=other_key) as other:
            other_task = str(
                other.submit(
                    f"{marker}-type",
                    {"secret": other_secret},
                    delay=timedelta(minutes=20),
                    idempotency_key=f"{marker}-key",
                ).id
            )

        yield Seeded(
            completed=completed,
            dead=dead,
            future=future,
            cancel_me=cancel_me,
            redrive_me=dead[0],
            workflow_id=str(wf.id),
            workflow_nodes={n: str(t.id) for n, t in wf.nodes.items()},
            schedule_name=schedule.name,
            schedule_id=str(schedule.id),
            expectation_job="ok",
            other_tenant_id=other_tenant,
            other_api_key=other_key,
            other_task_id=other_task,
            other_marker=marker,
            other_secret=other_secret,
            ok_worker=ok_worker.name,
        )
    finally:
        boom_worker.stop()
        ok_worker.stop()


def _other_tenant(dev: DevProcess, marker: str) -> tuple[str, str]:
    """A second tenant made through AdminService with the admin token, and its key."""
    import asyncio

    async def make() -> tuple[str, str]:
        async with await AdminClient.connect(dev.target, admin_token=dev.admin_token) as admin:
            tenant = await admin.create_tenant(f"browser-other-{uuid.uuid4().hex[:6]}")
            key = await admin.create_api_key(tenant.id, f"{marker}-key")
            return str(tenant.id), key.secret

    return asyncio.run(make())
