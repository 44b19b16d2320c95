"""Random and mutated messages for every unary RPC (issue 15), against one real
``tickwheel serve`` on PostgreSQL for the whole module.

Properties, per RPC: no answer is INTERNAL or UNKNOWN; the server still answers its
health check afterwards; tenant B's rows are exactly as they were although every call
carries tenant A's key and the strategies offer B's ids everywhere a string goes. The
RPC x tenant matrix below states the last property outright: every RPC that takes an
id, called with A's key and B's id, answers NOT_FOUND (or PERMISSION_DENIED) and
changes nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from hypothesis import given
from hypothesis import strategies as st

from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from tests.fuzz._served import (
    BAD_CODES,
    FUTURE,
    FUZZ,
    Served,
    interesting,
    messages,
    method_types,
    serve,
    templates,
    unary_methods,
)
from tests.support.servers import PostgresServer

pytestmark = pytest.mark.postgres


@pytest.fixture(scope="module")
def served(
    postgres_server: PostgresServer, pg_template: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    """One served Tickwheel for the whole module."""
    yield from serve(postgres_server, pg_template, tmp_path_factory)


def _encode(request: Any) -> bytes:
    return request if isinstance(request, bytes) else bytes(request.SerializeToString())


def _invoke(served: Served, service: str, method: str, request: Any) -> grpc.StatusCode:
    _, resp_cls = method_types(service, method)
    call = served.channel.unary_unary(
        f"/tickwheel.v1.{service}/{method}",
        request_serializer=_encode,
        response_deserializer=resp_cls.FromString,
    )
    code, details = grpc.StatusCode.OK, ""
    try:
        call(request, metadata=served.metadata(), timeout=30)
    except grpc.RpcError as exc:
        code, details = exc.code(), exc.details()  # type: ignore[attr-defined]
    assert code not in BAD_CODES, f"{method}({request!r}) -> {code}: {details}"
    assert code is not grpc.StatusCode.DEADLINE_EXCEEDED, f"{method}({request!r}) hung"
    return code


@pytest.mark.parametrize(("service", "method"), unary_methods(), ids=lambda v: v)
def test_random_and_mutated_messages(served: Served, service: str, method: str) -> None:
    req_cls, _ = method_types(service, method)
    strings = interesting(served, with_b_tenant=service != "AdminService")
    random = messages(req_cls.DESCRIPTOR, strings)
    template = templates(served).get(method, req_cls())

    def mutate(partial: Any) -> bytes:
        # Concatenated encodings merge (the protobuf rule): the template with the
        # partial's fields over it, built without parsing (a Struct too deep for the
        # decoder cannot be merged in this process either).
        return bytes(template.SerializeToString() + partial.SerializeToString())

    strategy = st.one_of(random, random.map(mutate))
    before = served.b_rows()
    seen: dict[grpc.StatusCode, int] = {}

    @FUZZ
    @given(request=strategy)
    def fuzz(request: Any) -> None:
        code = _invoke(served, service, method, request)
        seen[code] = seen.get(code, 0) + 1

    fuzz()
    assert served.serving()
    assert served.b_rows() == before, "tenant A's calls changed tenant B's rows"
    if req_cls.DESCRIPTOR.fields:  # an empty request has one example only
        assert sum(seen.values()) >= FUZZ.max_examples


def _matrix(served: Served) -> list[tuple[str, str, Any]]:
    b = served.b
    ref = pb.TaskRef(task_id=b.task_ids[0], fencing_token=1, scheduled_at=FUTURE)
    S, W = "SchedulerService", "WorkerService"
    rows: list[tuple[str, str, Any]] = []
    for task_id in b.task_ids:
        rows += [
            (S, "GetTask", pb.GetTaskRequest(task_id=task_id)),
            (S, "CancelTask", pb.CancelTaskRequest(task_id=task_id)),
            (S, "RedriveTask", pb.RedriveTaskRequest(task_id=task_id)),
            (
                W,
                "CompleteTask",
                pb.CompleteTaskRequest(task=pb.TaskRef(task_id=task_id, fencing_token=1)),
            ),
            (W, "FailTask", pb.FailTaskRequest(task=pb.TaskRef(task_id=task_id, fencing_token=1))),
        ]
    rows += [
        (W, "CompleteTask", pb.CompleteTaskRequest(task=ref)),
        (W, "FailTask", pb.FailTaskRequest(task=ref, retryable=False)),
    ]
    for workflow_id in b.workflow_ids:
        rows.append((S, "GetWorkflow", pb.GetWorkflowRequest(workflow_id=workflow_id)))
    for schedule_id in b.schedule_ids:
        rows += [
            (S, "GetSchedule", pb.GetScheduleRequest(schedule_id=schedule_id)),
            (S, "PauseSchedule", pb.PauseScheduleRequest(schedule_id=schedule_id)),
            (S, "ResumeSchedule", pb.ResumeScheduleRequest(schedule_id=schedule_id)),
            (S, "DeleteSchedule", pb.DeleteScheduleRequest(schedule_id=schedule_id)),
            (
                S,
                "RegisterExpectation",
                pb.RegisterExpectationRequest(schedule_id=schedule_id, interval_s=60),
            ),
        ]
    return rows


def test_rpc_by_tenant_matrix_has_no_cross_tenant_success(served: Served) -> None:
    """Tenant A's key with tenant B's ids: NOT_FOUND or PERMISSION_DENIED, never a
    success, and B's rows unchanged."""
    before = served.b_rows()
    rows = _matrix(served)
    answers = [(m, _invoke(served, s, m, r)) for s, m, r in rows]
    crossed = [
        (m, code)
        for m, code in answers
        if code not in (grpc.StatusCode.NOT_FOUND, grpc.StatusCode.PERMISSION_DENIED)
    ]
    assert crossed == []
    assert len(answers) >= 30
    assert {m for m, _ in answers} >= {
        "GetTask",
        "CancelTask",
        "RedriveTask",
        "CompleteTask",
        "FailTask",
        "GetWorkflow",
        "GetSchedule",
        "PauseSchedule",
        "ResumeSchedule",
        "DeleteSchedule",
        "RegisterExpectation",
    }
    # Listing with A's key shows none of B's tasks, and B's page token is refused.
    listing = _list(served, pb.ListTasksRequest(page_size=1000))
    assert not {t.id for t in listing.tasks} & set(served.b.task_ids)
    b_page = _list(served, pb.ListTasksRequest(page_size=1), key=served.b.key)
    assert b_page.next_page_token
    assert (
        _invoke(
            served,
            "SchedulerService",
            "ListTasks",
            pb.ListTasksRequest(page_size=1, page_token=b_page.next_page_token),
        )
        is grpc.StatusCode.INVALID_ARGUMENT
    )
    assert served.b_rows() == before


def _list(served: Served, request: pb.ListTasksRequest, key: str | None = None) -> Any:
    call = served.channel.unary_unary(
        "/tickwheel.v1.SchedulerService/ListTasks",
        request_serializer=pb.ListTasksRequest.SerializeToString,
        response_deserializer=pb.ListTasksResponse.FromString,
    )
    return call(request, metadata=(("x-api-key", key or served.a.key),), timeout=30)
