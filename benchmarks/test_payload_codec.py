"""JSON as bytes against Struct (issue 20, "Payloads as bytes end to end"), same run.

- ``codec``: CPU µs per task of each conversion a payload, result or checkpoint goes
  through, the Struct way (as before) against the bytes way, in this process:
  the server decoding a 10,000-task SubmitTasks (``FromString`` + ``spec_from_proto``),
  the store's encoding (``_validate.new_tasks``), a dispatch (row text -> Assignment
  proto), a worker reading the payload, a worker encoding its result, the server
  reading a completion.
- ``client_build``: building (and serialising) one 10,000-task SubmitTasks in the
  Python client: the generated classes with Struct payloads (as before), the generated
  classes with ``payload_json``, and the hand-written bytes (``_submit_wire``).
- ``submit_cpu``: ``tickwheel serve`` on PostgreSQL, 40,000 tasks in SubmitTasks of
  10,000 sent with Struct payloads and with ``payload_json`` (alternating rounds, the
  same server): CPU µs per task of the server and of PostgreSQL (psutil).

Run: ``.venv/bin/pytest benchmarks/test_payload_codec.py --benchmark-only -p no:cacheprovider -s``
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import grpc
import psutil
import pytest
from tests.support.processes import ADMIN_TOKEN, ProcessGroup
from tests.support.servers import PostgresServer

from scheduler import jsonbytes
from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from scheduler._proto.tickwheel.v1 import tickwheel_pb2_grpc as pbg
from scheduler._wellknown import dict_to_struct, fill_struct, struct_to_dict
from scheduler.client import AdminClient, TaskSpec
from scheduler.client import _convert as cconv
from scheduler.client._submit_wire import encode_tasks
from scheduler.jitter import JitterMode
from scheduler.server import _convert as conv
from scheduler.store import _validate
from scheduler.types import Assignment, NewTask, Pool, RawJSON, TaskKey

N = 10_000
NOW = datetime(2030, 1, 1, tzinfo=UTC)
#: A typical small payload: ids, a name, a short list, a nested object.
PAYLOAD: dict[str, Any] = {
    "user_id": 48213,
    "email": "someone@example.com",
    "template": "welcome",
    "tags": ["a", "b", "c"],
    "opts": {"lang": "en", "retry": True, "score": 0.75},
}
RESULT: dict[str, Any] = {"sent": True, "message_id": "m-48213", "ms": 12.5}
TABLE: dict[str, dict[str, float]] = {}


@pytest.fixture(scope="module", autouse=True)
def codec_table(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    tr = request.config.pluginmanager.get_plugin("terminalreporter")
    if tr is None or not TABLE:
        return
    tr.write_line("")
    tr.write_line("JSON as bytes against Struct (CPU µs per task; ratio struct/bytes)")
    for name, f in TABLE.items():
        cells = ", ".join(f"{k}={v:,.2f}" for k, v in f.items())
        tr.write_line(f"  {name:<34} {cells}")


def _cpu_us(fn: Callable[[], Any], per: int, rounds: int = 7) -> float:
    """The best of ``rounds`` CPU times of ``fn`` in µs per item (the least disturbed
    round on a shared machine)."""
    best = float("inf")
    for _ in range(rounds):
        t = time.process_time()
        fn()
        best = min(best, time.process_time() - t)
    return best / per * 1e6


def _pair(benchmark: Any, name: str, struct: Callable[[], Any], raw: Callable[[], Any]) -> None:
    s, b = _cpu_us(struct, N), _cpu_us(raw, N)
    s, b = min(s, _cpu_us(struct, N)), min(b, _cpu_us(raw, N))  # interleaved twice
    TABLE[name] = {"struct_us": s, "bytes_us": b, "ratio": s / b}
    benchmark.extra_info.update(TABLE[name])


# -- the codec, per step -------------------------------------------------------------


def _specs(payload_json: bool) -> bytes:
    request = pb.SubmitTasksRequest()
    for i in range(N):
        spec = request.tasks.add(type="email", strict_timing=True)
        payload = {**PAYLOAD, "user_id": i}
        if payload_json:
            spec.payload_json = jsonbytes.dumps(payload)
        else:
            fill_struct(spec.payload, payload)
    return request.SerializeToString()


def test_codec_server_decodes_a_submit(benchmark: Any) -> None:
    data = {form: _specs(form) for form in (False, True)}

    def decode(form: bool) -> Callable[[], Any]:
        def run() -> list[Any]:
            request = pb.SubmitTasksRequest.FromString(data[form])
            return [
                conv.spec_from_proto(s, f"tasks[{i}]", max_payload_bytes=1 << 20)
                for i, s in enumerate(request.tasks)
            ]

        return run

    benchmark.pedantic(decode(True), rounds=1, iterations=1)
    _pair(benchmark, "server: decode SubmitTasks", decode(False), decode(True))


def test_codec_store_encodes_new_tasks(benchmark: Any) -> None:
    def tasks(payload: Callable[[int], Any]) -> list[NewTask]:
        return [
            NewTask(
                id=uuid.uuid4(),
                tenant_id=uuid.uuid4(),
                type="email",
                payload=payload(i),
                scheduled_at=NOW,
                due_at=NOW,
                idempotency_key=str(i),
                shard_id=1,
                pool=Pool.STANDARD,
                jitter_mode=JitterMode.NONE,
            )
            for i in range(N)
        ]

    dicts = tasks(lambda i: {**PAYLOAD, "user_id": i})
    texts = tasks(lambda i: RawJSON(json.dumps({**PAYLOAD, "user_id": i})))
    benchmark.pedantic(lambda: _validate.new_tasks(texts, 1 << 20), rounds=1, iterations=1)
    _pair(
        benchmark,
        "store: encode for JSONB",
        lambda: _validate.new_tasks(dicts, 1 << 20),
        lambda: _validate.new_tasks(texts, 1 << 20),
    )


def test_codec_dispatch_builds_assignments(benchmark: Any) -> None:
    """A dispatched row's payload text to the Assignment the worker gets: before, the
    store parsed it (json.loads) and the server built a Struct; now the text goes on."""
    texts = [json.dumps({**PAYLOAD, "user_id": i}, separators=(", ", ": ")) for i in range(N)]

    def assignment(payload: Any) -> Assignment:
        return Assignment(
            key=TaskKey(uuid.uuid4(), NOW),
            tenant_id=uuid.uuid4(),
            type="email",
            payload=payload,
            fencing_token=1,
            attempt=1,
            max_retries=3,
            due_at=NOW,
            lease_expires_at=NOW + timedelta(seconds=30),
            checkpoint=None,
            trace_context=None,
            pool=Pool.STANDARD,
            worker_id="w",
            timeout_s=0.0,
        )

    def struct() -> None:
        for t in texts:
            conv.assignment_to_proto(assignment(json.loads(t)))

    def raw() -> None:
        for t in texts:
            conv.assignment_to_proto(assignment(RawJSON(t)), json_bytes=True)

    benchmark.pedantic(raw, rounds=1, iterations=1)
    _pair(benchmark, "dispatch: row -> Assignment", struct, raw)


def test_codec_worker_reads_payload_and_writes_result(benchmark: Any) -> None:
    structs = [dict_to_struct({**PAYLOAD, "user_id": i}) for i in range(N)]
    blobs = [jsonbytes.dumps({**PAYLOAD, "user_id": i}) for i in range(N)]

    def struct() -> None:
        for s in structs:
            struct_to_dict(s)
            pb.Completion(result=dict_to_struct(RESULT))

    def raw() -> None:
        for b in blobs:
            cconv.json_of(_EMPTY, b, True)  # as the runner reads an Assignment
            pb.Completion(result_json=jsonbytes.dumps(RESULT))

    benchmark.pedantic(raw, rounds=1, iterations=1)
    _pair(benchmark, "worker: payload in, result out", struct, raw)


_EMPTY = dict_to_struct({})


def test_codec_server_reads_completions(benchmark: Any) -> None:
    ref = pb.TaskRef(task_id=str(uuid.uuid4()), fencing_token=1)
    ref.scheduled_at.seconds = 1_900_000_000

    def batch(form: bool) -> bytes:
        msg = pb.Completions()
        for _ in range(N):
            if form:
                msg.items.add(task=ref, result_json=jsonbytes.dumps(RESULT))
            else:
                msg.items.add(task=ref, result=dict_to_struct(RESULT))
        return msg.SerializeToString()

    data = {form: batch(form) for form in (False, True)}

    def read(form: bool) -> Callable[[], Any]:
        def run() -> list[Any]:
            msg = pb.Completions.FromString(data[form])
            return [conv.completion_from_proto(c, "c") for c in msg.items]

        return run

    benchmark.pedantic(read(True), rounds=1, iterations=1)
    _pair(benchmark, "server: read Completions", read(False), read(True))


# -- the client's build of a 10,000-task SubmitTasks -----------------------------------


def test_client_build_10k(benchmark: Any) -> None:
    specs = [
        TaskSpec(
            type="email",
            payload={**PAYLOAD, "user_id": i},
            scheduled_at=NOW + timedelta(seconds=i % 60),
        )
        for i in range(N)
    ]

    def generated_struct() -> bytes:  # the client before: the generated classes, Structs
        request = pb.SubmitTasksRequest()
        add = request.tasks.add
        for s in specs:
            m = add()
            m.type = s.type
            fill_struct(m.payload, s.payload)
            m.pool = cconv.pool_to_proto(s.pool)
            m.strict_timing = s.strict_timing
            m.timeout_s = s.timeout_s
            assert s.scheduled_at is not None
            m.scheduled_at.CopyFrom(cconv.to_timestamp(s.scheduled_at))
        return request.SerializeToString()

    def generated_bytes() -> bytes:  # the generated classes with payload_json
        request = pb.SubmitTasksRequest()
        add = request.tasks.add
        for s in specs:
            cconv.spec_into_proto(s, add())
        return request.SerializeToString()

    def wire() -> bytes:
        return encode_tasks(specs)

    assert pb.SubmitTasksRequest.FromString(wire()) == pb.SubmitTasksRequest.FromString(
        generated_bytes()
    )
    benchmark.pedantic(wire, rounds=1, iterations=1)
    figures = {}
    for _ in range(2):  # interleaved
        for name, fn in (
            ("generated_struct_ms", generated_struct),
            ("generated_bytes_ms", generated_bytes),
            ("wire_ms", wire),
        ):
            ms = _cpu_us(fn, 1) / 1000
            figures[name] = min(figures.get(name, ms), ms)
    figures["ratio_struct_wire"] = figures["generated_struct_ms"] / figures["wire_ms"]
    figures["ratio_bytes_wire"] = figures["generated_bytes_ms"] / figures["wire_ms"]
    TABLE["client: build 10,000-task SubmitTasks"] = figures
    benchmark.extra_info.update(figures)


# -- server CPU per task on submit -------------------------------------------------------


def _procs(server: PostgresServer) -> list[psutil.Process]:
    assert server.proc is not None
    root = psutil.Process(server.proc.pid)
    return [root, *root.children(recursive=True)]


def _cpu(procs: list[psutil.Process]) -> float:
    total = 0.0
    for p in procs:
        try:
            t = p.cpu_times()
        except psutil.Error:
            continue
        total += t.user + t.system
    return total


def test_submit_cpu_struct_vs_bytes(
    benchmark: Any, slice_dsn: str, slice_postgres: PostgresServer, tmp_path: Path
) -> None:
    group = ProcessGroup(tmp_path / "procs")
    far = datetime.now(UTC) + timedelta(days=2)  # not dispatched: submit alone
    try:
        server = group.serve(slice_dsn, lease_ttl_s=30.0, extra_args=("--canary-interval-s", "0"))

        async def go() -> dict[str, float]:
            async with await AdminClient.connect(server.target, admin_token=ADMIN_TOKEN) as a:
                tenant = await a.create_tenant("bench", rate_limit_rps=1_000_000)
                key = (await a.create_api_key(tenant.id, "bench")).secret
            meta = (("x-api-key", key),)

            def request(form: bool, base: int) -> bytes:
                req = pb.SubmitTasksRequest()
                for i in range(base, base + N):
                    spec = req.tasks.add(type="email", strict_timing=True)
                    spec.scheduled_at.seconds = int(far.timestamp())
                    if form:
                        spec.payload_json = jsonbytes.dumps({**PAYLOAD, "user_id": i})
                    else:
                        fill_struct(spec.payload, {**PAYLOAD, "user_id": i})
                return req.SerializeToString()

            sp = psutil.Process(server.pid)
            spent = {False: [0.0, 0.0], True: [0.0, 0.0]}
            async with grpc.aio.insecure_channel(server.target) as channel:
                send = channel.unary_unary(
                    "/tickwheel.v1.SchedulerService/SubmitTasks",
                    request_serializer=None,
                    response_deserializer=pb.SubmitTasksResponse.FromString,
                )
                stub = pbg.SchedulerServiceStub(channel)  # type: ignore[no-untyped-call]
                await stub.SubmitTask(
                    pb.SubmitTaskRequest(task=pb.TaskSpec(type="w")), metadata=meta
                )
                base = 0
                # Struct, bytes, bytes, Struct, ...: drift falls on both.
                for form in (False, True, True, False, False, True, True, False):
                    body = request(form, base)
                    base += N
                    before = (_cpu([sp]), _cpu(_procs(slice_postgres)))
                    await send(body, metadata=meta, timeout=120)
                    after = (_cpu([sp]), _cpu(_procs(slice_postgres)))
                    spent[form][0] += after[0] - before[0]
                    spent[form][1] += after[1] - before[1]
            per = 4 * N / 1e6
            return {
                "serve_struct_us": spent[False][0] / per,
                "serve_bytes_us": spent[True][0] / per,
                "postgres_struct_us": spent[False][1] / per,
                "postgres_bytes_us": spent[True][1] / per,
            }

        figures = benchmark.pedantic(lambda: asyncio.run(go()), rounds=1, iterations=1)
        figures["ratio_serve"] = figures["serve_struct_us"] / figures["serve_bytes_us"]
        TABLE["submit: CPU per task (40,000 each)"] = figures
        benchmark.extra_info.update(figures)
    finally:
        group.stop_all()
