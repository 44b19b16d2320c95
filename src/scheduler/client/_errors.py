"""gRPC status -> typed Tickwheel errors, on the client side."""

from __future__ import annotations

import inspect
from typing import Any

import grpc

from scheduler import _errors
from scheduler._errors import TickwheelError
from scheduler.wire import STATUS_DETAILS_KEY, error_info, error_reason

_RETRYABLE = frozenset(
    {
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.RESOURCE_EXHAUSTED,
    }
)

_CLASSES: dict[str, type[TickwheelError]] = {
    error_reason(name): obj
    for name, obj in vars(_errors).items()
    if isinstance(obj, type) and issubclass(obj, TickwheelError)
}
"""ErrorInfo reason -> the error class it names."""


class RPCError(TickwheelError):
    """A call failed with a status no typed error describes (transport failure, INTERNAL,
    a deadline, or a server that sent no Tickwheel error details)."""

    def __init__(self, message: str, status: grpc.StatusCode) -> None:
        super().__init__(message)
        self.status = status
        self.retryable = status in _RETRYABLE

    def __str__(self) -> str:
        return f"{self.status.name}: {self.message}"


def _details(exc: grpc.aio.AioRpcError) -> bytes | None:
    metadata: Any = exc.trailing_metadata() or ()
    for k, v in metadata:
        if k == STATUS_DETAILS_KEY and isinstance(v, bytes):
            return v
    return None


_CASTS: dict[str, Any] = {"int": int, "float": float, "str": str, "bool": lambda v: v == "true"}


def _arguments(cls: type[TickwheelError], metadata: Any) -> dict[str, Any]:
    """The constructor arguments of ``cls`` from ErrorInfo metadata (all strings)."""
    params = list(inspect.signature(cls.__init__).parameters.values())[1:]
    out: dict[str, Any] = {}
    for param in params:
        if param.name in metadata:
            annotation = param.annotation if isinstance(param.annotation, str) else "str"
            out[param.name] = _CASTS.get(annotation, str)(metadata[param.name])
    return out


def from_rpc_error(exc: grpc.aio.AioRpcError) -> TickwheelError:
    """The typed error a failed call stands for (the same class the server raised),
    read from the standard ``google.rpc.Status`` details (its ErrorInfo)."""
    status = exc.code()
    details = exc.details() or ""
    raw = _details(exc)
    info = error_info(raw) if raw is not None else None
    cls = _CLASSES.get(info.reason) if info is not None else None
    if cls is not None and info is not None:
        try:
            err = cls(**_arguments(cls, info.metadata))
        except (TypeError, ValueError):
            err = cls.__new__(cls)
            TickwheelError.__init__(err, details)
        err.status = status  # type: ignore[attr-defined]
        return err
    return RPCError(details, status)
