"""The value types every layer shares: tasks, keys, pools, assignments and outcomes.

The store, the engine, the index, the Kafka wire format and both SDKs speak these types;
they import nothing but the state machine, the jitter modes and the error root, so an
SDK that names a task never loads the persistence package (River's ``rivertype``).

Re-exports only; the types are cut by concern into private modules: ``_tasks`` (the
task, its key, pool, retry policy and rows), ``_tenants`` (tenants, scopes, API keys),
``_preloaded`` (PRELOADED tasks bound for the wheel), ``_writes`` (dispatch, the fenced
writes and their results), ``_reads`` (listing, counts, forecasts, the audit) and
``_workflows`` (workflows, schedules, expectations). Import from ``scheduler.types``.
"""

from __future__ import annotations

from scheduler.states import TaskState
from scheduler.types._flow import (
    Debounce,
    DebouncePayload,
    FlowOptions,
    IdempotencyScope,
    Throttle,
    check_flow,
    debounced_due,
)
from scheduler.types._flow_rules import ALL_TENANTS, DispatchPause, RateLimitRule
from scheduler.types._preloaded import Preloaded, PreloadedGroup, PreloadedPage
from scheduler.types._reads import (
    FORECAST_STATES,
    MAX_COUNT_GROUPS,
    MAX_OVERDUE_GROUPS,
    ActivityBucket,
    Forecast,
    MaintenanceResult,
    OverdueGroup,
    Page,
    RefusedWrite,
    TaskCount,
    TaskCounts,
    TaskFilter,
    TaskOrder,
    Transition,
    dispatch_note,
)
from scheduler.types._tasks import (
    JSON,
    InsertResult,
    NewTask,
    Pool,
    RawJSON,
    RetryPolicy,
    TaskKey,
    TaskRecord,
)
from scheduler.types._tenants import DEFAULT_SCOPES, ApiKey, Scope, Tenant
from scheduler.types._workflows import (
    UPSTREAM_FAILED,
    Expectation,
    OverlapPolicy,
    Schedule,
    UpstreamPolicy,
    Workflow,
    WorkflowView,
)
from scheduler.types._writes import (
    Assignment,
    CancelResult,
    CompleteResult,
    Completion,
    ConcurrencyLimit,
    DispatchRequest,
    FailResult,
    Failure,
    FencedWrite,
    Held,
    Outcome,
    ReclaimResult,
    Release,
    ShardClaim,
    raise_for_outcome,
)

__all__ = [
    "ALL_TENANTS",
    "DEFAULT_SCOPES",
    "FORECAST_STATES",
    "JSON",
    "MAX_COUNT_GROUPS",
    "MAX_OVERDUE_GROUPS",
    "UPSTREAM_FAILED",
    "ActivityBucket",
    "ApiKey",
    "Assignment",
    "CancelResult",
    "CompleteResult",
    "Completion",
    "ConcurrencyLimit",
    "Debounce",
    "DebouncePayload",
    "DispatchPause",
    "DispatchRequest",
    "Expectation",
    "FailResult",
    "Failure",
    "FencedWrite",
    "FlowOptions",
    "Forecast",
    "Held",
    "IdempotencyScope",
    "InsertResult",
    "MaintenanceResult",
    "NewTask",
    "Outcome",
    "OverdueGroup",
    "OverlapPolicy",
    "Page",
    "Pool",
    "Preloaded",
    "PreloadedGroup",
    "PreloadedPage",
    "RateLimitRule",
    "RawJSON",
    "ReclaimResult",
    "RefusedWrite",
    "Release",
    "RetryPolicy",
    "Schedule",
    "Scope",
    "ShardClaim",
    "TaskCount",
    "TaskCounts",
    "TaskFilter",
    "TaskKey",
    "TaskOrder",
    "TaskRecord",
    "TaskState",
    "Tenant",
    "Throttle",
    "Transition",
    "UpstreamPolicy",
    "Workflow",
    "WorkflowView",
    "check_flow",
    "debounced_due",
    "dispatch_note",
    "raise_for_outcome",
]
