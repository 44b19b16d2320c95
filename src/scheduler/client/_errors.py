"""gRPC status -> typed Tickwheel errors, on the client side."""

from __future__ import annotations

import json
from typing import Any

import grpc

from scheduler import _errors
from scheduler._errors import TickwheelError
from scheduler.wire import ERROR_FIELDS_KEY, ERROR_TYPE_KEY

_RETRYABLE = frozenset(
    {
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.RESOURCE_EXHAUSTED,
    }
)

_CLASSES: dict[str, type[TickwheelError]] = {
    name: obj
    for name, obj in vars(_errors).items()
    if isinstance(obj, type) and issubclass(obj, TickwheelError)
}


class RPCError(TickwheelError):
    """A call failed with a status no typed error describes (transport failure, INTERNAL,
    a deadline, or a server that sent no Tickwheel error details)."""

    def __init__(self, message: str, status: grpc.StatusCode) -> None:
        super().__init__(message)
        self.status = status
        self.retryable = status in _RETRYABLE

    def __str__(self) -> str:
        return f"{self.status.name}: {self.message}"


def _trailer(exc: grpc.aio.AioRpcError, key: str) -> str | None:
    metadata: Any = exc.trailing_metadata() or ()
    for k, v in metadata:
        if k == key and isinstance(v, str):
            return v
    return None


def from_rpc_error(exc: grpc.aio.AioRpcError) -> TickwheelError:
    """The typed error a failed call stands for (the same class the server raised)."""
    status = exc.code()
    details = exc.details() or ""
    name = _trailer(exc, ERROR_TYPE_KEY)
    cls = _CLASSES.get(name or "")
    if cls is not None:
        try:
            fields: dict[str, Any] = json.loads(_trailer(exc, ERROR_FIELDS_KEY) or "{}")
            err = cls(**fields)
        except (TypeError, ValueError):
            err = cls.__new__(cls)
            TickwheelError.__init__(err, details)
        err.status = status  # type: ignore[attr-defined]
        return err
    return RPCError(details, status)
