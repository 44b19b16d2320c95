"""JSON as bytes end to end on PostgreSQL (docs/clients.md, "JSON as bytes"): a
``payload_json`` goes from submit through a ``tickwheel worker``'s handler to the
result, the checkpoint and GetTask unchanged; the Struct form keeps working beside it
(also for a worker that reads only Structs); bad bytes answer INVALID_ARGUMENT naming
the field and write nothing."""

from __future__ import annotations

import uuid
from typing import Any

import grpc
import orjson
import pytest

from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from scheduler._proto.tickwheel.v1 import tickwheel_pb2_grpc as pbg
from scheduler._wellknown import dict_to_struct, struct_to_dict
from tests.acceptance.conftest import HANDLERS, Cluster
from tests.support.waiting import eventually

ECHO = {"echo": f"{HANDLERS}:echo"}
BYTES = ("x-tickwheel-json", "bytes")
# Exact beyond a double (a Struct would round it), non-ASCII, nested, null.
PAYLOAD = {"big": 2**60 + 1, "text": "grüße ✓", "nested": {"l": [1, 2.5, None, True]}}


def _meta(cluster: Cluster, *extra: tuple[str, str]) -> tuple[tuple[str, str], ...]:
    return (("x-api-key", cluster.api_key), *extra)


async def _settled(stub: Any, cluster: Cluster, task_id: str, *extra: tuple[str, str]) -> Any:
    async def probe() -> Any:
        resp = await stub.GetTask(
            pb.GetTaskRequest(task_id=task_id), metadata=_meta(cluster, *extra)
        )
        return resp.task

    return await eventually(
        probe, until=lambda t: t.state == pb.TASK_STATE_COMPLETED, what="completion"
    )


async def test_bytes_payload_round_trips_to_the_handler_result_and_get_task(
    cluster: Cluster,
) -> None:
    await cluster.worker("w-bytes", ECHO)
    data = orjson.dumps(PAYLOAD)
    async with grpc.aio.insecure_channel(cluster.server.target) as channel:
        stub = pbg.SchedulerServiceStub(channel)
        sent = await stub.SubmitTask(
            pb.SubmitTaskRequest(task=pb.TaskSpec(type="echo", payload_json=data)),
            metadata=_meta(cluster),
        )
        assert sent.task.payload_json == data  # the answer carries the request's bytes
        task = await _settled(stub, cluster, sent.task.id, BYTES)
        assert orjson.loads(task.payload_json) == PAYLOAD
        assert orjson.loads(task.result_json) == {"echo": PAYLOAD}  # 2**60 + 1 exact
        assert orjson.loads(task.checkpoint_json) == {"seen": PAYLOAD}
        assert not task.HasField("payload")
        assert not task.HasField("result")
        # Without the metadata entry the same task answers Structs.
        plain = (
            await stub.GetTask(pb.GetTaskRequest(task_id=sent.task.id), metadata=_meta(cluster))
        ).task
        assert not plain.payload_json
        assert not plain.result_json
        assert struct_to_dict(plain.result)["echo"]["text"] == "grüße ✓"
    # PostgreSQL holds the object as JSONB, not a string of JSON.
    kind, big = await cluster.db.fetchrow(
        "SELECT jsonb_typeof(payload), (result_payload -> 'echo' ->> 'big') FROM tasks"
        " WHERE id = $1",
        uuid.UUID(sent.task.id),
    )
    assert kind == "object"
    assert big == str(2**60 + 1)
    # The Python client reads and writes bytes by default, invisibly.
    got = await cluster.client.get(sent.task.id)
    assert got.result == {"echo": PAYLOAD}


async def test_a_struct_payload_still_works(cluster: Cluster) -> None:
    await cluster.worker("w-struct", ECHO)
    async with grpc.aio.insecure_channel(cluster.server.target) as channel:
        stub = pbg.SchedulerServiceStub(channel)
        sent = await stub.SubmitTask(
            pb.SubmitTaskRequest(task=pb.TaskSpec(type="echo", payload=dict_to_struct({"n": 7}))),
            metadata=_meta(cluster),
        )
        assert struct_to_dict(sent.task.payload) == {"n": 7}
        assert not sent.task.payload_json
        task = await _settled(stub, cluster, sent.task.id)
        assert struct_to_dict(task.result) == {"echo": {"n": 7}}
        assert struct_to_dict(task.checkpoint) == {"seen": {"n": 7}}


async def test_a_struct_worker_gets_a_bytes_payload_as_a_struct(cluster: Cluster) -> None:
    """A worker whose Hello does not set json_bytes (any pre-bytes client) gets Structs,
    and may complete with a Struct."""
    async with grpc.aio.insecure_channel(cluster.server.target) as channel:
        stub = pbg.SchedulerServiceStub(channel)
        sent = await stub.SubmitTask(
            pb.SubmitTaskRequest(task=pb.TaskSpec(type="raw", payload_json=b'{"n": 3}')),
            metadata=_meta(cluster),
        )
        call = pbg.WorkerServiceStub(channel).Connect(metadata=_meta(cluster))
        hello = pb.Hello(worker_id="raw-1", task_types=["raw"], slots=1, start_on_delivery=True)
        await call.write(pb.WorkerMessage(hello=hello))
        assert (await call.read()).WhichOneof("kind") == "welcome"
        msg = await call.read()
        while msg.WhichOneof("kind") != "assignments":
            msg = await call.read()
        (a,) = msg.assignments.tasks
        assert struct_to_dict(a.payload) == {"n": 3}
        assert not a.payload_json
        ref = pb.TaskRef(task_id=a.task_id, fencing_token=a.fencing_token)
        ref.scheduled_at.CopyFrom(a.scheduled_at)
        done = pb.Completion(task=ref, result=dict_to_struct({"ok": 1}))
        await call.write(pb.WorkerMessage(request_id=9, completion=done))
        msg = await call.read()
        while msg.WhichOneof("kind") != "result":
            msg = await call.read()
        assert msg.result.code == 0
        assert msg.result.results[0].ok
        call.cancel()
        task = await _settled(stub, cluster, sent.task.id, BYTES)
        assert orjson.loads(task.result_json) == {"ok": 1}


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        (pb.TaskSpec(type="echo", payload_json=b'{"a": '), "tasks[1].payload_json"),
        (pb.TaskSpec(type="echo", payload_json=b'{"a": NaN}'), "tasks[1].payload_json"),
        (
            pb.TaskSpec(type="echo", payload_json=b'["not", "an", "object"]'),
            "tasks[1].payload_json",
        ),
        (pb.TaskSpec(type="echo", payload_json=b'{"a": "\\u0000"}'), "tasks[1].payload_json"),
        (
            pb.TaskSpec(type="echo", payload=dict_to_struct({"a": 1}), payload_json=b'{"a": 1}'),
            "tasks[1].payload_json",
        ),
        (
            pb.TaskSpec(type="echo", payload_json=b'{"s": "' + b"x" * (1 << 20) + b'"}'),
            "tasks[1].payload_json",
        ),
    ],
    ids=["truncated", "nan", "array", "nul", "both", "too-big"],
)
async def test_bad_bytes_are_invalid_argument_and_write_nothing(
    cluster: Cluster, spec: pb.TaskSpec, field: str
) -> None:
    good = pb.TaskSpec(type="echo", payload_json=b'{"ok": true}')
    async with grpc.aio.insecure_channel(cluster.server.target) as channel:
        stub = pbg.SchedulerServiceStub(channel)
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await stub.SubmitTasks(
                pb.SubmitTasksRequest(tasks=[good, spec]), metadata=_meta(cluster)
            )
    assert info.value.code() is grpc.StatusCode.INVALID_ARGUMENT, info.value.details()
    assert (info.value.details() or "").startswith(f"{field}:"), info.value.details()
    assert await cluster.status_counts() == {}  # not even the good one


async def test_bad_result_bytes_are_refused_on_the_stream_and_by_complete_task(
    cluster: Cluster,
) -> None:
    async with grpc.aio.insecure_channel(cluster.server.target) as channel:
        stub = pbg.SchedulerServiceStub(channel)
        sent = await stub.SubmitTask(
            pb.SubmitTaskRequest(task=pb.TaskSpec(type="raw", payload_json=b"{}")),
            metadata=_meta(cluster),
        )
        call = pbg.WorkerServiceStub(channel).Connect(metadata=_meta(cluster))
        hello = pb.Hello(
            worker_id="raw-2", task_types=["raw"], slots=1, start_on_delivery=True, json_bytes=True
        )
        await call.write(pb.WorkerMessage(hello=hello))
        msg = await call.read()
        while msg.WhichOneof("kind") != "assignments":
            msg = await call.read()
        (a,) = msg.assignments.tasks
        assert a.payload_json == b"{}"
        ref = pb.TaskRef(task_id=a.task_id, fencing_token=a.fencing_token)
        ref.scheduled_at.CopyFrom(a.scheduled_at)
        bad = pb.Completions(items=[pb.Completion(task=ref, result_json=b"{oops}")])
        await call.write(pb.WorkerMessage(request_id=5, completions=bad))
        msg = await call.read()
        while msg.WhichOneof("kind") != "result":
            msg = await call.read()
        assert msg.result.code == grpc.StatusCode.INVALID_ARGUMENT.value[0]
        assert msg.result.field == "completions.items[0].result_json"
        both = pb.Checkpoint(task=ref, data=dict_to_struct({"a": 1}), data_json=b'{"a": 1}')
        await call.write(pb.WorkerMessage(request_id=6, checkpoint=both))
        msg = await call.read()
        while msg.WhichOneof("kind") != "result":
            msg = await call.read()
        assert msg.result.field == "checkpoint.data_json"
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await pbg.WorkerServiceStub(channel).CompleteTask(
                pb.CompleteTaskRequest(task=ref, result_json=b"\xff"), metadata=_meta(cluster)
            )
        assert info.value.code() is grpc.StatusCode.INVALID_ARGUMENT
        assert (info.value.details() or "").startswith("result_json:")
        call.cancel()
        # Nothing of it was written: the task still runs under the worker's token.
        task = (
            await stub.GetTask(pb.GetTaskRequest(task_id=sent.task.id), metadata=_meta(cluster))
        ).task
        assert task.state == pb.TASK_STATE_RUNNING
        assert not task.HasField("result")
        assert not task.HasField("checkpoint")
