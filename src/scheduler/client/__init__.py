"""The Tickwheel client: submit and manage tasks (:class:`Client`, async;
:class:`SyncClient`, blocking, for scripts), Celery-style task functions
(:class:`App`, ``@app.task``, ``.delay()``), administer tenants (:class:`AdminClient`).
Errors come back as the server's typed :class:`~scheduler._errors.TickwheelError`
subclasses, or :class:`RPCError`.
"""

from scheduler._errors import (
    AlreadyExists,
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
)
from scheduler.client._app import (
    App,
    AsyncFunctionHandle,
    FunctionHandle,
    TaskFunction,
    TaskOptions,
)
from scheduler.client._client import AdminClient, Client
from scheduler.client._errors import RPCError
from scheduler.client._flow import PauseInfo, RateLimitInfo
from scheduler.client._handle import TaskCancelled, TaskFailed, TaskHandle
from scheduler.client._sync import SyncClient, SyncTaskHandle
from scheduler.client._tls import TLSConfig
from scheduler.client._types import (
    ApiKeyInfo,
    ApiKeySecret,
    BulkPlan,
    BulkResult,
    ExpectationInfo,
    RotatedApiKey,
    ScheduleInfo,
    Task,
    TaskPage,
    TaskSpec,
    TenantInfo,
    WorkflowInfo,
)
from scheduler.client._workers import WorkerInfo
from scheduler.jitter import JitterMode
from scheduler.states import TaskState
from scheduler.types import (
    Debounce,
    DebouncePayload,
    IdempotencyScope,
    OverlapPolicy,
    Pool,
    RetryPolicy,
    Scope,
    TaskOrder,
    Throttle,
    Transition,
    UpstreamPolicy,
)

__all__ = [
    "AdminClient",
    "AlreadyExists",
    "ApiKeyInfo",
    "ApiKeySecret",
    "App",
    "AsyncFunctionHandle",
    "BulkPlan",
    "BulkResult",
    "Client",
    "Debounce",
    "DebouncePayload",
    "ExpectationInfo",
    "FunctionHandle",
    "IdempotencyScope",
    "InvalidArgument",
    "InvalidTransition",
    "JitterMode",
    "NotFound",
    "OverlapPolicy",
    "PauseInfo",
    "PermissionDenied",
    "Pool",
    "RPCError",
    "RateLimitInfo",
    "ResourceExhausted",
    "RetryPolicy",
    "RotatedApiKey",
    "ScheduleInfo",
    "Scope",
    "StaleFencingToken",
    "StoreError",
    "SyncClient",
    "SyncTaskHandle",
    "TLSConfig",
    "Task",
    "TaskCancelled",
    "TaskFailed",
    "TaskFunction",
    "TaskHandle",
    "TaskOptions",
    "TaskOrder",
    "TaskPage",
    "TaskSpec",
    "TaskState",
    "TenantInfo",
    "Throttle",
    "TickwheelError",
    "Transition",
    "Unauthenticated",
    "Unavailable",
    "UpstreamPolicy",
    "WorkerInfo",
    "WorkflowInfo",
]
