"""What every client shares: the channel, the call metadata and deadline, and the one
call helper (:meth:`_Base._rpc`) every RPC method goes through."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import grpc
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from scheduler.client._errors import from_rpc_error

API_KEY_HEADER = "x-api-key"
ADMIN_TOKEN_HEADER = "x-admin-token"
REGION_HEADER = "x-tickwheel-region"
"""With the admin token: the region its calls are for (docs/regions.md)."""


def check_header_value(what: str, value: str | None) -> None:
    """ValueError for a key or token a gRPC header cannot carry (printable ASCII only):
    gRPC fails such a call with an internal error, not a message."""
    for ch in value or "":
        if not " " <= ch <= "~":
            raise ValueError(
                f"the {what} holds {ch!r} (U+{ord(ch):04X}), which a gRPC header cannot"
                " carry: keys and tokens are printable ASCII"
            )


_T = TypeVar("_T")
_W3C = TraceContextTextMapPropagator()


def _with_trace(metadata: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
    """The call metadata plus the caller's active W3C trace context, if any, so a task
    submitted inside a span joins that span's trace (opentelemetry-api: no-op without
    an SDK)."""
    carrier: dict[str, str] = {}
    _W3C.inject(carrier)
    return metadata + tuple(carrier.items()) if carrier else metadata


class _Base:
    def __init__(
        self, channel: grpc.aio.Channel, metadata: tuple[tuple[str, str], ...], rpc_timeout_s: float
    ) -> None:
        self._channel = channel
        self._metadata = metadata
        self._timeout_s = rpc_timeout_s
        self._closed = False

    async def _rpc(
        self,
        method: Callable[..., Awaitable[_T]],
        request: Any,
        *,
        trace: bool = False,
        deadline_s: float | None = None,
    ) -> _T:
        """One unary call of ``method`` (a stub's method) with this client's metadata
        (and the caller's trace context when ``trace``) and deadline (``deadline_s``
        instead when given); a failure is raised as the server's typed error."""
        metadata = _with_trace(self._metadata) if trace else self._metadata
        timeout = self._timeout_s if deadline_s is None else deadline_s
        try:
            return await method(request, metadata=metadata, timeout=timeout)
        except grpc.aio.AioRpcError as exc:
            raise from_rpc_error(exc) from None

    async def close(self) -> None:
        """Close the channel; safe to call twice."""
        if not self._closed:
            self._closed = True
            await self._channel.close(None)

    async def __aenter__(self: _Self) -> _Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


_Self = TypeVar("_Self", bound=_Base)
