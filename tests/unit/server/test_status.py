"""The one status table: every TickwheelError has a code, and clients get the class back."""

from __future__ import annotations

from typing import Any

import grpc
import pytest

from scheduler import _errors
from scheduler._errors import (
    AlreadyExists,
    FailedPrecondition,
    InvalidArgument,
    InvalidTransition,
    NotFound,
    PermissionDenied,
    ResourceExhausted,
    StaleFencingToken,
    StoreError,
    TenantMoving,
    TickwheelError,
    Unauthenticated,
    Unavailable,
    UnknownRegion,
    WrongRegion,
)
from scheduler.client import RPCError
from scheduler.client._errors import from_rpc_error
from scheduler.server import STATUS_CODES, code_of
from scheduler.server._status import status_of

SUBCLASSES = [
    obj
    for obj in vars(_errors).values()
    if isinstance(obj, type) and issubclass(obj, TickwheelError) and obj is not TickwheelError
]

EXAMPLES: list[tuple[TickwheelError, grpc.StatusCode]] = [
    (InvalidArgument("task.type", "required"), grpc.StatusCode.INVALID_ARGUMENT),
    (FailedPrecondition("plan_token", "expired"), grpc.StatusCode.FAILED_PRECONDITION),
    (NotFound("task", "abc"), grpc.StatusCode.NOT_FOUND),
    (AlreadyExists("tenant", "a"), grpc.StatusCode.ALREADY_EXISTS),
    (InvalidTransition("t1", "DONE", "X", "terminal"), grpc.StatusCode.FAILED_PRECONDITION),
    (StaleFencingToken("t1", 7, "token 8 is current"), grpc.StatusCode.FAILED_PRECONDITION),
    (Unauthenticated("no key"), grpc.StatusCode.UNAUTHENTICATED),
    (PermissionDenied("nope"), grpc.StatusCode.PERMISSION_DENIED),
    (ResourceExhausted("tasks", "too many"), grpc.StatusCode.RESOURCE_EXHAUSTED),
    (StoreError("db down"), grpc.StatusCode.UNAVAILABLE),
    (Unavailable("shutting down"), grpc.StatusCode.UNAVAILABLE),
    (WrongRegion("eu", "10.0.0.1:50051,10.1.0.1:50051"), grpc.StatusCode.FAILED_PRECONDITION),
    (UnknownRegion("x-api-key", "mars", "eu, us"), grpc.StatusCode.INVALID_ARGUMENT),
    (TenantMoving("5b3c", "is moving between regions"), grpc.StatusCode.UNAVAILABLE),
]  # fmt: skip


def test_every_subclass_is_in_the_table() -> None:
    assert set(SUBCLASSES) == set(STATUS_CODES)
    assert {type(e) for e, _ in EXAMPLES} == set(SUBCLASSES)


@pytest.mark.parametrize(("exc", "code"), EXAMPLES, ids=lambda v: type(v).__name__)
def test_code_and_message(exc: TickwheelError, code: grpc.StatusCode) -> None:
    status = status_of(exc)
    assert status.code is code
    assert status.details == exc.message
    assert code_of(exc) is code


def test_messages_carry_field_and_reason() -> None:
    assert status_of(InvalidArgument("tasks[3].payload", "too big")).details.startswith(
        "tasks[3].payload:"
    )
    assert (
        "token 8 is current" in status_of(StaleFencingToken("t", 7, "token 8 is current")).details
    )
    assert "terminal" in status_of(InvalidTransition("t", "A", "B", "terminal")).details


def test_unknown_errors_are_internal_without_details() -> None:
    status = status_of(ValueError("/secret/path"))
    assert status.code is grpc.StatusCode.INTERNAL
    assert "secret" not in status.details
    assert code_of(KeyError("x")) is grpc.StatusCode.INTERNAL


def test_subclass_inherits_its_base_code() -> None:
    class Special(NotFound):
        pass

    assert code_of(Special("task", "x")) is grpc.StatusCode.NOT_FOUND


def _as_rpc_error(exc: BaseException) -> grpc.aio.AioRpcError:
    status = status_of(exc)
    return grpc.aio.AioRpcError(
        status.code,
        grpc.aio.Metadata(),
        grpc.aio.Metadata(*status.trailing_metadata),
        details=status.details,
    )


@pytest.mark.parametrize(("exc", "code"), EXAMPLES, ids=lambda v: type(v).__name__)
def test_client_gets_the_same_class_back(exc: TickwheelError, code: grpc.StatusCode) -> None:
    back = from_rpc_error(_as_rpc_error(exc))
    assert type(back) is type(exc)
    assert back.message == exc.message
    assert vars(back) == {**vars(exc), "status": code}


def test_client_fallback_is_rpc_error_with_status() -> None:
    err = from_rpc_error(
        grpc.aio.AioRpcError(
            grpc.StatusCode.DEADLINE_EXCEEDED, grpc.aio.Metadata(), grpc.aio.Metadata(), "late"
        )
    )
    assert isinstance(err, RPCError)
    assert isinstance(err, TickwheelError)
    assert err.status is grpc.StatusCode.DEADLINE_EXCEEDED
    assert err.retryable


def _standard_status(exc: TickwheelError) -> Any:
    from google.rpc import status_pb2

    (key, value), *rest = status_of(exc).trailing_metadata
    assert key == "grpc-status-details-bin"
    assert not rest
    assert isinstance(value, bytes)
    return status_pb2.Status.FromString(value)


def test_errors_carry_standard_error_info() -> None:
    from google.rpc import error_details_pb2

    status = _standard_status(StaleFencingToken("t1", 7, "token 8 is current"))
    assert status.code == grpc.StatusCode.FAILED_PRECONDITION.value[0]
    assert status.message == "task t1: stale fencing token 7: token 8 is current"
    info = error_details_pb2.ErrorInfo()
    assert status.details[0].Unpack(info)
    assert info.reason == "STALE_FENCING_TOKEN"
    assert info.domain == "tickwheel.dev"
    assert dict(info.metadata) == {"task_id": "t1", "token": "7", "reason": "token 8 is current"}


def test_invalid_argument_carries_bad_request_with_the_field() -> None:
    from google.rpc import error_details_pb2

    status = _standard_status(InvalidArgument("tasks[3].payload", "too big"))
    bad = error_details_pb2.BadRequest()
    assert status.details[1].Unpack(bad)
    assert [(v.field, v.description) for v in bad.field_violations] == [
        ("tasks[3].payload", "too big")
    ]


def test_resource_exhausted_carries_quota_failure_with_the_limit() -> None:
    from google.rpc import error_details_pb2

    status = _standard_status(ResourceExhausted("tasks", "at most 10000 tasks per call"))
    quota = error_details_pb2.QuotaFailure()
    assert status.details[1].Unpack(quota)
    assert quota.violations[0].subject == "tasks"
