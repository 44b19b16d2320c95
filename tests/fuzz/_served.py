# ruff: noqa: E501  (tables of edge values read best one per line)

"""What the unary and raw-byte fuzzers share: one served Tickwheel per module with two
tenants, a fingerprint of tenant B's rows, the example budget, and message strategies
built from the proto descriptors (so a new RPC or field is fuzzed without a change here).

The budget: ``TICKWHEEL_FUZZ_EXAMPLES`` examples per RPC (500 in ``make test``; ``make
fuzz`` sets more), through the Hypothesis profile ``tickwheel-fuzz``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import uuid
from collections.abc import Iterator
from typing import Any

import asyncpg
import grpc
import pytest
from google.protobuf import struct_pb2, timestamp_pb2
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from grpc_health.v1 import health_pb2, health_pb2_grpc
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from scheduler.client import AdminClient
from tests.support.processes import ADMIN_TOKEN, ProcessGroup, ServeProcess
from tests.support.servers import PostgresServer

EXAMPLES = int(os.environ.get("TICKWHEEL_FUZZ_EXAMPLES", "500"))
"""Examples per RPC (the issue asks for at least 500 in ``make test``)."""

settings.register_profile(
    "tickwheel-fuzz",
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
FUZZ = settings.get_profile("tickwheel-fuzz")

BAD_CODES = frozenset({grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN})
SERVICES = ("SchedulerService", "WorkerService", "AdminService")
FUTURE = timestamp_pb2.Timestamp(seconds=4_102_444_800)  # 2100-01-01


def unary_methods() -> list[tuple[str, str]]:
    """(service, method) of every unary RPC of the three services."""
    return [
        (service, m.name)
        for service in SERVICES
        for m in pb.DESCRIPTOR.services_by_name[service].methods
        if not m.client_streaming and not m.server_streaming
    ]


def method_types(service: str, method: str) -> tuple[Any, Any]:
    """The request and response classes of a method."""
    m = pb.DESCRIPTOR.services_by_name[service].methods_by_name[method]
    return getattr(pb, m.input_type.name), getattr(pb, m.output_type.name)


@dataclasses.dataclass
class Tenant:
    id: str
    key: str
    task_ids: list[str]
    schedule_ids: list[str]
    workflow_ids: list[str]


@dataclasses.dataclass
class Served:
    server: ServeProcess
    dsn: str
    a: Tenant
    b: Tenant
    channel: grpc.Channel

    def metadata(self, tenant: Tenant | None = None) -> tuple[tuple[str, str], ...]:
        return (("x-api-key", (tenant or self.a).key), ("x-admin-token", ADMIN_TOKEN))

    def serving(self) -> bool:
        stub = health_pb2_grpc.HealthStub(self.channel)
        answer = stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=30)
        return bool(answer.status == health_pb2.HealthCheckResponse.SERVING)

    def b_rows(self) -> tuple[Any, ...]:
        """A fingerprint of every row of tenant B (its tenant row included)."""
        return asyncio.run(_fingerprint(self.dsn, uuid.UUID(self.b.id)))


FINGERPRINT = [
    "SELECT md5(coalesce(string_agg(t::text, '|' ORDER BY id), '')) FROM tasks t WHERE tenant_id = $1",
    "SELECT md5(coalesce(string_agg(w::text, '|' ORDER BY id), '')) FROM workflows w WHERE tenant_id = $1",
    "SELECT md5(coalesce(string_agg(s::text, '|' ORDER BY id), '')) FROM cron_schedules s WHERE tenant_id = $1",
    "SELECT md5(coalesce(string_agg(e::text, '|' ORDER BY id), '')) FROM job_expectations e WHERE tenant_id = $1",
    # last_used_at is bookkeeping of B's own calls (the matrix test lists with B's key).
    "SELECT md5(coalesce(string_agg((to_jsonb(k) - 'last_used_at')::text, '|' ORDER BY id), '')) FROM api_keys k WHERE tenant_id = $1",
    "SELECT md5(t::text) FROM tenants t WHERE id = $1",
    "SELECT count(*) FROM task_transitions x JOIN tasks t ON t.id = x.task_id WHERE t.tenant_id = $1",
]  # fmt: skip


async def _fingerprint(dsn: str, tenant_id: uuid.UUID) -> tuple[Any, ...]:
    db = await asyncpg.connect(dsn)
    try:
        return tuple([await db.fetchval(q, tenant_id) for q in FINGERPRINT])
    finally:
        await db.close()


def _call(channel: grpc.Channel, service: str, method: str, request: Any, md: Any) -> Any:
    req_cls, resp_cls = method_types(service, method)
    return channel.unary_unary(
        f"/tickwheel.v1.{service}/{method}",
        request_serializer=req_cls.SerializeToString,
        response_deserializer=resp_cls.FromString,
    )(request, metadata=md, timeout=30)


def _populate(channel: grpc.Channel, tenant: Tenant, md: Any) -> None:
    """Tasks, a workflow, two schedules and an expectation of the tenant's own."""
    S = "SchedulerService"
    done = _call(
        channel,
        S,
        "SubmitTasks",
        pb.SubmitTasksRequest(
            tasks=[
                pb.TaskSpec(type="fz", scheduled_at=FUTURE, payload=_payload(i)) for i in range(4)
            ]
        ),
        md,
    )
    tenant.task_ids = [r.task.id for r in done.results]
    wf = _call(
        channel,
        S,
        "SubmitWorkflow",
        pb.SubmitWorkflowRequest(
            nodes=[
                pb.WorkflowNodeSpec(id="a", task=pb.TaskSpec(type="fz", scheduled_at=FUTURE)),
                pb.WorkflowNodeSpec(id="b", task=pb.TaskSpec(type="fz")),
            ],
            edges=[pb.WorkflowEdge(parent="a", child="b")],
        ),
        md,
    )
    tenant.workflow_ids = [wf.workflow.id]
    tenant.schedule_ids = []
    for name in ("every-hour", "paused"):
        s = _call(
            channel,
            S,
            "CreateSchedule",
            pb.CreateScheduleRequest(
                schedule=pb.ScheduleSpec(
                    name=name, task_type="fz", interval_s=3600, paused=name == "paused"
                )
            ),
            md,
        )
        tenant.schedule_ids.append(s.schedule.id)
    _call(
        channel,
        S,
        "RegisterExpectation",
        pb.RegisterExpectationRequest(job_id="fz", interval_s=3600, tolerance_s=60),
        md,
    )


def _payload(i: int) -> struct_pb2.Struct:
    s = struct_pb2.Struct()
    s.update({"i": i, "nested": {"list": [1, "two", None]}})
    return s


async def _tenants(target: str) -> list[tuple[str, str]]:
    async with await AdminClient.connect(target, admin_token=ADMIN_TOKEN) as admin:
        out = []
        for name in ("fuzz-a", "fuzz-b"):
            tenant = await admin.create_tenant(name)
            out.append((str(tenant.id), (await admin.create_api_key(tenant.id, name)).secret))
        return out


def serve(
    postgres_server: PostgresServer, pg_template: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    """One served Tickwheel (canary off), tenants A and B with rows: the body of each
    fuzz module's module-scoped ``served`` fixture."""
    name = f"fuzz_{uuid.uuid4().hex[:8]}"
    postgres_server.psql(f"CREATE DATABASE {name} TEMPLATE {pg_template}")
    group = ProcessGroup(tmp_path_factory.mktemp("fuzz"))
    try:
        dsn = postgres_server.dsn(name)
        server = group.serve(dsn, extra_args=("--canary-interval-s", "0"))
        (a_id, a_key), (b_id, b_key) = asyncio.run(_tenants(server.target))
        with grpc.insecure_channel(server.target) as channel:
            a = Tenant(a_id, a_key, [], [], [])
            b = Tenant(b_id, b_key, [], [], [])
            for tenant in (a, b):
                _populate(channel, tenant, (("x-api-key", tenant.key),))
            yield Served(server, dsn, a, b, channel)
        assert not server.log_has("internal error in RPC handler"), group.explain()
    finally:
        group.stop_all()
        postgres_server.psql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


# -- message strategies from the descriptors -----------------------------------------

EDGE_INTS = [
    0,
    1,
    -1,
    2,
    7,
    100,
    101,
    1000,
    1001,
    10_000,
    100_001,
    2**31 - 1,
    2**32 - 1,
    2**63 - 1,
    -(2**63),
]
EDGE_FLOATS = [
    0.0,
    -0.0,
    1.0,
    -1.0,
    0.5,
    60.0,
    3600.0,
    604_801.0,
    1e300,
    -1e300,
    float("nan"),
    float("inf"),
    float("-inf"),
    5e-324,
]
EDGE_SECONDS = [
    0,
    1,
    -1,
    -62_135_596_800,
    -62_135_596_801,
    1_900_000_000,
    4_102_444_800,
    253_402_214_399,
    253_402_214_400,
    253_402_300_799,
    253_402_300_800,
    10**12,
    2**63 - 1,
    -(2**63),
]
EDGE_STRINGS = [
    "", " ", "t", "fz", "x" * 65, "n" * 129, "e" * 4097, "a b", "tâche", "\x00", "UTC",
    "Europe/Berlin", "Mars/Olympus", "*/5 * * * *", "0 0 31 2 *", "not cron", "STANDARD",
    "SYSTEM", "enterprise", "GOLD", "00-" + "a" * 32 + "-" + "b" * 16 + "-01",
    "0190d6c4-0000-7000-8000-000000000000", "{0190d6c4-0000-7000-8000-000000000000}",
    "0190d6c4000070008000000000000000", "urn:uuid:0190d6c4-0000-7000-8000-000000000000",
    "p1.AAAA.AAAA", "!!", "a", "every-hour", "paused",
]  # fmt: skip


def _json() -> st.SearchStrategy[Any]:
    leaves = st.one_of(
        st.none(),
        st.booleans(),
        st.floats(allow_nan=True, allow_infinity=True),
        st.integers(-(2**60), 2**60),
        st.text(max_size=8),
    )
    return st.recursive(
        leaves,
        lambda inner: (
            st.lists(inner, max_size=2) | st.dictionaries(st.text(max_size=3), inner, max_size=2)
        ),
        max_leaves=4,
    )


def _deep(levels: int, lists: bool) -> struct_pb2.Struct:
    s = struct_pb2.Struct()
    if lists:
        value = s.fields["a"]
        for _ in range(levels - 1):
            value = value.list_value.values.add()
        value.number_value = 1
        return s
    cur = s
    for _ in range(levels - 1):
        cur = cur.fields["a"].struct_value
    cur.fields["x"].number_value = 1
    return s


def _struct_of(data: dict[str, Any]) -> struct_pb2.Struct:
    s = struct_pb2.Struct()
    s.update(data)
    return s


STRUCTS = st.one_of(
    st.dictionaries(st.sampled_from(["a", "b", "", "é"]), _json(), max_size=3).map(_struct_of),
    st.sampled_from([31, 32, 33]).flatmap(
        lambda n: st.booleans().map(lambda lists: _deep(n if not lists else n + 10, lists))
    ),
)
TIMESTAMPS = st.builds(
    timestamp_pb2.Timestamp,
    seconds=st.one_of(st.sampled_from(EDGE_SECONDS), st.integers(-(2**40), 2**40)),
    nanos=st.one_of(
        st.just(0), st.sampled_from([-1, 999_999_999, 10**9]), st.integers(0, 10**9 - 1)
    ),
)


def _scalar(field: FieldDescriptor, strings: list[str]) -> st.SearchStrategy[Any]:
    t = field.type
    if t == FieldDescriptor.TYPE_STRING:
        return st.one_of(st.sampled_from(strings), st.text(max_size=12))
    if t == FieldDescriptor.TYPE_BYTES:
        return st.binary(max_size=40)
    if t == FieldDescriptor.TYPE_BOOL:
        return st.booleans()
    if t in (FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT):
        return st.one_of(st.sampled_from(EDGE_FLOATS), st.floats(allow_nan=True))
    if t == FieldDescriptor.TYPE_ENUM:
        known = [v.number for v in field.enum_type.values]
        return st.one_of(st.sampled_from(known), st.integers(-3, 20))
    lo, hi = {
        FieldDescriptor.TYPE_INT32: (-(2**31), 2**31 - 1),
        FieldDescriptor.TYPE_SINT32: (-(2**31), 2**31 - 1),
        FieldDescriptor.TYPE_UINT32: (0, 2**32 - 1),
        FieldDescriptor.TYPE_FIXED32: (0, 2**32 - 1),
        FieldDescriptor.TYPE_UINT64: (0, 2**64 - 1),
        FieldDescriptor.TYPE_FIXED64: (0, 2**64 - 1),
    }.get(t, (-(2**63), 2**63 - 1))
    edges = [x for x in EDGE_INTS if lo <= x <= hi]
    return st.one_of(st.sampled_from(edges), st.integers(lo, hi))


def messages(desc: Descriptor, strings: list[str], depth: int = 0) -> st.SearchStrategy[Any]:
    """Random messages of ``desc``: every field optional, values drawn from edges,
    the tenants' own ids and random data."""
    cls = _class_of(desc)
    if desc.full_name == "google.protobuf.Struct":
        return STRUCTS
    if desc.full_name == "google.protobuf.Timestamp":
        return TIMESTAMPS
    if depth > 2:
        return st.just(cls())
    optional: dict[str, st.SearchStrategy[Any]] = {}
    for field in desc.fields:
        if field.type == FieldDescriptor.TYPE_MESSAGE:
            value = messages(field.message_type, strings, depth + 1)
        else:
            value = _scalar(field, strings)
        optional[field.name] = st.lists(value, max_size=2) if field.is_repeated else value
    return st.fixed_dictionaries({}, optional=optional).map(lambda kw: _build(cls, kw))


def _class_of(desc: Descriptor) -> Any:
    if desc.full_name == "google.protobuf.Struct":
        return struct_pb2.Struct
    if desc.full_name == "google.protobuf.Timestamp":
        return timestamp_pb2.Timestamp
    return getattr(pb, desc.name)


def _build(cls: Any, kw: dict[str, Any]) -> Any:
    msg = cls()
    for name, value in kw.items():
        field = cls.DESCRIPTOR.fields_by_name[name]
        target = getattr(msg, name)
        if field.is_repeated:
            if field.type == FieldDescriptor.TYPE_MESSAGE:
                for v in value:
                    target.add().CopyFrom(v)
            else:
                target.extend(value)
        elif field.type == FieldDescriptor.TYPE_MESSAGE:
            target.CopyFrom(value)
        else:
            setattr(msg, name, value)
    return msg


def templates(served: Served) -> dict[str, Any]:
    """A valid request per RPC, to mutate (tenant A's own ids)."""
    a = served.a
    ref = pb.TaskRef(task_id=a.task_ids[0], fencing_token=1, scheduled_at=FUTURE)
    spec = pb.TaskSpec(type="fz", scheduled_at=FUTURE)
    return {
        "SubmitTask": pb.SubmitTaskRequest(task=spec),
        "SubmitTasks": pb.SubmitTasksRequest(tasks=[spec, spec]),
        "GetTask": pb.GetTaskRequest(task_id=a.task_ids[0]),
        "CancelTask": pb.CancelTaskRequest(task_id=a.task_ids[1]),
        "ListTasks": pb.ListTasksRequest(type="fz", page_size=2),
        "RedriveTask": pb.RedriveTaskRequest(task_id=a.task_ids[2]),
        "SubmitWorkflow": pb.SubmitWorkflowRequest(
            nodes=[pb.WorkflowNodeSpec(id="a", task=spec), pb.WorkflowNodeSpec(id="b", task=spec)],
            edges=[pb.WorkflowEdge(parent="a", child="b")],
        ),
        "GetWorkflow": pb.GetWorkflowRequest(workflow_id=a.workflow_ids[0]),
        "CreateSchedule": pb.CreateScheduleRequest(
            schedule=pb.ScheduleSpec(name="fz", task_type="fz", cron="*/5 * * * *")
        ),
        "GetSchedule": pb.GetScheduleRequest(schedule_id=a.schedule_ids[0]),
        "PauseSchedule": pb.PauseScheduleRequest(schedule_id=a.schedule_ids[0]),
        "ResumeSchedule": pb.ResumeScheduleRequest(schedule_id=a.schedule_ids[1]),
        "DeleteSchedule": pb.DeleteScheduleRequest(schedule_id=a.schedule_ids[1]),
        "RegisterExpectation": pb.RegisterExpectationRequest(job_id="fz", interval_s=60),
        "CompleteTask": pb.CompleteTaskRequest(task=ref),
        "FailTask": pb.FailTaskRequest(task=ref, error="boom"),
        "CreateTenant": pb.CreateTenantRequest(tenant=pb.Tenant(name="fz")),
        "GetTenant": pb.GetTenantRequest(tenant_id=a.id),
        "UpdateTenant": pb.UpdateTenantRequest(tenant_id=a.id, rate_limit_rps=100),
        "CreateApiKey": pb.CreateApiKeyRequest(tenant_id=a.id, name="fz"),
    }


def interesting(served: Served, *, with_b_tenant: bool = True) -> list[str]:
    """Strings worth trying: edges, tenant A's ids and tenant B's (to cross tenants)."""
    out = [*EDGE_STRINGS, served.a.id]
    for t in (served.a, served.b):
        out += [*t.task_ids, *t.schedule_ids, *t.workflow_ids]
        out += [i.upper() for i in t.task_ids[:1]]
    if with_b_tenant:
        out.append(served.b.id)
    return out
