"""The async client: submit and manage tasks of one tenant (:class:`Client`), and
administer tenants (:class:`AdminClient`, in ``_admin.py``).

``Client`` is composed of one part per concern, each a module of its RPC methods:
``_tasks.py`` (tasks, history, bulk actions), ``_workflows.py``, ``_schedules.py`` and
``_expectations.py``; every RPC method goes through ``_base.py``'s one call helper
(``_Base._rpc``: metadata, deadline, typed errors).
"""

from __future__ import annotations

from typing import Any, cast

import grpc

from scheduler import wire
from scheduler._proto.tickwheel.v1 import tickwheel_pb2_grpc as pbg
from scheduler.client._admin import AdminClient
from scheduler.client._base import (
    ADMIN_TOKEN_HEADER,
    API_KEY_HEADER,
    REGION_HEADER,
    check_header_value,
)
from scheduler.client._channel import (
    check_reachable,
    connect_failover,
    open_channel,
    region_targets,
)
from scheduler.client._expectations import ExpectationCalls
from scheduler.client._flow import FlowCalls
from scheduler.client._schedules import ScheduleCalls
from scheduler.client._tasks import WAIT_SLICE_S, TaskCalls
from scheduler.client._tls import TLSConfig
from scheduler.client._workers import WorkerCalls
from scheduler.client._workflows import WorkflowCalls
from scheduler.regions import RegionDirectory

__all__ = [
    "ADMIN_TOKEN_HEADER",
    "API_KEY_HEADER",
    "REGION_HEADER",
    "WAIT_SLICE_S",
    "AdminClient",
    "Client",
]


class Client(TaskCalls, WorkflowCalls, ScheduleCalls, ExpectationCalls, FlowCalls, WorkerCalls):
    """A tenant's connection to Tickwheel. Create with :meth:`connect`.

    Every call has a deadline (``rpc_timeout_s``) and raises the same
    :class:`~scheduler._errors.TickwheelError` subclass the server raised
    (:class:`RPCError` for transport failures).
    """

    def __init__(
        self, channel: grpc.aio.Channel, *, api_key: str, rpc_timeout_s: float = 30.0
    ) -> None:
        # Answers carry JSON values as bytes (orjson reads them; no Struct walk).
        metadata = ((API_KEY_HEADER, api_key), (wire.JSON_HEADER, "bytes"))
        super().__init__(channel, metadata, rpc_timeout_s)
        self._sched = pbg.SchedulerServiceStub(channel)  # type: ignore[no-untyped-call]
        self._worker = pbg.WorkerServiceStub(channel)  # type: ignore[no-untyped-call]
        # SubmitTasks with the request's bytes written by _submit_wire (no message
        # built), and its answer's bytes read there.
        self._submit_bytes = channel.unary_unary(
            "/tickwheel.v1.SchedulerService/SubmitTasks",
            request_serializer=None,
            response_deserializer=None,
        )

    @classmethod
    async def connect(
        cls,
        target: str | None = None,
        *,
        api_key: str,
        tls: TLSConfig | None = None,
        rpc_timeout_s: float = 30.0,
        connect_timeout_s: float = 10.0,
        regions: RegionDirectory | None = None,
    ) -> Client:
        """Open a channel to ``target`` (host:port) and check the server answers.

        With ``regions`` (the region directory) the client goes straight to the
        endpoints of the region its API key names, in directory order, and a call that
        finds one unreachable is made on the next (docs/regions.md); ``target`` is then
        needed only for a key that names no listed region."""
        if not api_key:
            raise ValueError("api_key is required")
        check_header_value("API key", api_key)
        if regions is not None:
            targets = region_targets(target, api_key, regions)
            failover = await connect_failover(targets, tls, connect_timeout_s)
            return cls(cast(Any, failover), api_key=api_key, rpc_timeout_s=rpc_timeout_s)
        if not target:
            raise ValueError("target is required (or regions)")
        channel = open_channel(target, tls)
        try:
            await check_reachable(channel, target, connect_timeout_s)
        except BaseException:
            await channel.close(None)
            raise
        return cls(channel, api_key=api_key, rpc_timeout_s=rpc_timeout_s)
