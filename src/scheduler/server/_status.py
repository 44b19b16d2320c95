"""The one table from Tickwheel errors to gRPC status codes.

Every RPC handler funnels its exceptions through :func:`status_of`; nothing else in the
transport decides a status code. Besides the code and message, every error carries the
standard ``google.rpc.Status`` in the ``grpc-status-details-bin`` trailer, which any
gRPC library reads (``scheduler.wire`` builds and parses it, for the server and the
Python client alike):

- ``google.rpc.ErrorInfo``: ``reason`` is the Tickwheel error type in UPPER_SNAKE_CASE
  (``INVALID_ARGUMENT``, ``STALE_FENCING_TOKEN``, ...), ``domain`` ``tickwheel.dev``,
  ``metadata`` the error's fields as strings (``field``, ``task_id``, ``token``, ...);
- ``google.rpc.BadRequest`` with one field violation (the field path and the problem)
  for an invalid argument;
- ``google.rpc.QuotaFailure`` naming the limit for RESOURCE_EXHAUSTED.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, NoReturn, TypeVar

import grpc

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
    TickwheelError,
    Unauthenticated,
    Unavailable,
    UnknownRegion,
    WrongRegion,
)
from scheduler.wire import STATUS_DETAILS_KEY, status_details

STATUS_CODES: Mapping[type[TickwheelError], grpc.StatusCode] = {
    InvalidArgument: grpc.StatusCode.INVALID_ARGUMENT,
    # Listed themselves so their ErrorInfo reason names them (WRONG_REGION carries the
    # home region's endpoints; UNKNOWN_REGION the regions the directory knows).
    UnknownRegion: grpc.StatusCode.INVALID_ARGUMENT,
    WrongRegion: grpc.StatusCode.FAILED_PRECONDITION,
    FailedPrecondition: grpc.StatusCode.FAILED_PRECONDITION,
    NotFound: grpc.StatusCode.NOT_FOUND,
    AlreadyExists: grpc.StatusCode.ALREADY_EXISTS,
    InvalidTransition: grpc.StatusCode.FAILED_PRECONDITION,
    StaleFencingToken: grpc.StatusCode.FAILED_PRECONDITION,
    Unauthenticated: grpc.StatusCode.UNAUTHENTICATED,
    PermissionDenied: grpc.StatusCode.PERMISSION_DENIED,
    ResourceExhausted: grpc.StatusCode.RESOURCE_EXHAUSTED,
    StoreError: grpc.StatusCode.UNAVAILABLE,
    Unavailable: grpc.StatusCode.UNAVAILABLE,
}
"""Error class -> status code. A subclass not listed inherits its nearest listed base."""


@dataclasses.dataclass(frozen=True, slots=True)
class RpcStatus:
    """What a handler answers for an exception."""

    code: grpc.StatusCode
    details: str
    trailing_metadata: tuple[tuple[str, str | bytes], ...] = ()


def listed_base(exc: BaseException) -> type[TickwheelError] | None:
    """The nearest class of ``exc`` that :data:`STATUS_CODES` lists, or None."""
    for cls in type(exc).__mro__:
        if cls in STATUS_CODES:
            return cls
    return None


def code_of(exc: BaseException) -> grpc.StatusCode:
    """The status code for ``exc``: from the table, INTERNAL for anything else."""
    base = listed_base(exc)
    return grpc.StatusCode.INTERNAL if base is None else STATUS_CODES[base]


def error_fields(exc: TickwheelError) -> dict[str, object]:
    """The constructor arguments that rebuild ``exc`` (read back from its attributes)."""
    params = list(inspect.signature(type(exc).__init__).parameters.values())[1:]
    fields: dict[str, object] = {}
    for param in params:
        if param.kind not in (param.POSITIONAL_OR_KEYWORD, param.KEYWORD_ONLY):
            continue
        if hasattr(exc, param.name):
            value = getattr(exc, param.name)
            if isinstance(value, str | int | float | bool) or value is None:
                fields[param.name] = value
    return fields


def status_of(exc: BaseException) -> RpcStatus:
    """The status, message and trailers for ``exc``.

    Unknown exceptions become INTERNAL with a generic message: internals (driver
    errors, file paths) never leak to callers; the handler logs the traceback.
    """
    code = code_of(exc)
    if not isinstance(exc, TickwheelError) or code is grpc.StatusCode.INTERNAL:
        return RpcStatus(grpc.StatusCode.INTERNAL, "internal error")
    # The wire names the listed class (a server-side subclass such as the stream's
    # ProtocolViolation travels as its base, the vocabulary every client knows).
    base = listed_base(exc)
    name = type(exc).__name__ if base is None else base.__name__
    fields = error_fields(exc)
    kind = None
    if isinstance(exc, InvalidArgument):
        # A subclass (UnknownRegion) still carries the BadRequest of its field.
        kind = "InvalidArgument"
        fields.setdefault("field", exc.field)
        fields.setdefault("problem", exc.problem)
    details = status_details(code.value[0], exc.message, name, fields, kind)
    return RpcStatus(code, exc.message, ((STATUS_DETAILS_KEY, details),))


_log = logging.getLogger("tickwheel.server")

_Req = TypeVar("_Req")
_Resp = TypeVar("_Resp")
_Self = TypeVar("_Self")


async def abort(context: grpc.aio.ServicerContext[Any, Any], exc: BaseException) -> NoReturn:
    """End the call with the status of ``exc`` (logging a traceback for INTERNAL)."""
    status = status_of(exc)
    if status.code is grpc.StatusCode.INTERNAL:
        _log.error("internal error in RPC handler", exc_info=exc)
    await context.abort(status.code, status.details, trailing_metadata=status.trailing_metadata)
    raise AssertionError("unreachable: context.abort raises")  # pragma: no cover


def unary(
    fn: Callable[[_Self, _Req, grpc.aio.ServicerContext[Any, Any]], Awaitable[_Resp]],
) -> Callable[[_Self, _Req, grpc.aio.ServicerContext[Any, Any]], Awaitable[_Resp]]:
    """Wrap a unary handler so every exception answers through the one table."""

    @functools.wraps(fn)
    async def wrapper(
        self: _Self, request: _Req, context: grpc.aio.ServicerContext[Any, Any]
    ) -> _Resp:
        try:
            return await fn(self, request, context)
        except grpc.aio.AbortError:
            raise
        except Exception as exc:  # mapped, never swallowed
            await abort(context, exc)

    return wrapper
