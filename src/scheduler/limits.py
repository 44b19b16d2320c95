"""Every bound on what a caller may send, stated once.

The gRPC services check them first (so a client in any language gets the same answer
whatever path its call takes), the engine checks the same constants again for
in-process callers, and the SDKs split their batches by them. A leaf: imports only the
error types (for :func:`flow_key`, the one check of a flow key).
A value that is a configuration of a node (lease times, batch sizes of the store) is
not here: it lives in that part's config dataclass.
"""

from __future__ import annotations

from scheduler._errors import InvalidArgument

MAX_TYPE_CHARS = 64
"""A task type's length."""
MAX_IDEMPOTENCY_KEY_CHARS = 128
"""An idempotency key's length."""
MAX_FLOW_KEY_CHARS = 128
"""A flow control key's length (issue 43, docs/flow-control.md): a task's concurrency
key and rate limit key, a debounce key and a throttle key are 1..this characters
without NUL (:func:`flow_key`)."""
MAX_RETRIES = 100
"""``max_retries`` of a task (0..this)."""
DEFAULT_MAX_RETRIES = 3
MAX_BACKOFF_S = 86_400.0
"""Largest retry backoff a task's own retry policy may ask for (a day)."""
MAX_NON_RETRYABLE_TYPES = 32
"""Most error types one retry policy lists as non-retryable."""
MAX_ERROR_TYPE_CHARS = 128
"""Longest error type name (Failure.error_type, a policy's error types)."""
"""``max_retries`` when the caller leaves it unset."""
MAX_CONCURRENCY_LIMIT = 100_000
"""The largest concurrency limit of a (tenant, type) (1..this)."""
MAX_SUBMIT_BATCH = 10_000
"""Tasks in one ``SubmitTasks`` call (RESOURCE_EXHAUSTED over it)."""
MAX_PAGE_SIZE = 1000
"""Rows in one page of a list call."""
DEFAULT_PAGE_SIZE = 100
"""Rows in a page when the caller leaves the size unset."""
MAX_ERROR_CHARS = 4096
"""A failure's error text."""
MAX_TRACEBACK_CHARS = 16_384
"""A failure's traceback (``Failure.traceback``)."""
MAX_NAME_CHARS = 128
"""A tenant's, key's, schedule's or workflow's name."""
MAX_WORKER_ID_CHARS = 256
"""A worker's id."""
MAX_TASK_TYPES = 256
"""Task types one worker stream declares."""
MAX_SLOTS = 100_000
"""Slots one worker stream may grant at once."""
MAX_EARLY_MS = 60_000
"""How far ahead of due a worker may offer to hold its pushes (``Hello.early_ms``)."""

# -- API keys and server protection (issue 15; docs/keys.md) ----------------------------
MAX_STREAMS_PER_TENANT = 1000
"""Open worker streams (``Connect``) of one tenant on one node (RESOURCE_EXHAUSTED
``max_streams_per_tenant`` past it; ``--max-streams-per-tenant``)."""
MAX_INFLIGHT_CALLS_PER_KEY = 500
"""Unary calls of one API key being served at once on one node (RESOURCE_EXHAUSTED
``max_inflight_calls_per_key``; ``--max-inflight-calls-per-key``)."""
AUTH_FAILURES_PER_SOURCE = 10
"""Failed authentications (unknown, revoked or expired key; wrong admin token) one
source address may make within :data:`AUTH_FAILURE_WINDOW_S` before it is throttled."""
AUTH_FAILURE_WINDOW_S = 60.0
"""The window over which failed authentications of a source are counted."""
AUTH_THROTTLE_S = 60.0
"""How long a throttled source gets RESOURCE_EXHAUSTED ``auth_failures_per_source``
without its keys being looked up (keys this node verified lately still pass)."""
STREAM_KEY_RECHECK_S = 5.0
"""How often an open worker stream re-checks its API key: a revoked or expired key ends
it within this (plus the auth cache, ``auth_cache_s``, for a revocation on another node)."""
DEFAULT_ROTATION_GRACE_S = 3600
"""How long the old key keeps working after a rotation, unless the caller says."""
MAX_ROTATION_GRACE_S = 30 * 86400
"""The longest rotation grace (30 days)."""
# -- timestamps (every Timestamp a request carries) --------------------------------
MIN_TIMESTAMP_SECONDS = 1
"""Earliest accepted Timestamp, as seconds since the epoch: 1970-01-01T00:00:01Z. The
epoch itself and anything before it are refused: a zero Timestamp is what a client
sends by mistake (a JavaScript ``Date`` given where a Timestamp belongs arrives as
epoch 0), and such a task must not run at once without a word."""
MAX_TIMESTAMP_SECONDS = 253_402_214_400
"""First refused Timestamp, as seconds since the epoch: 9999-12-31T00:00:00Z. One day
below the largest instant a datetime holds, so jitter and backoff added to an accepted
time never overflow (and are clamped besides)."""
TIMESTAMP_RANGE_TEXT = "1970-01-01T00:00:01Z .. 9999-12-30T23:59:59Z"
"""The accepted range, as error messages and the proto state it."""

# -- durations and sizes -------------------------------------------------------------
MAX_TIMEOUT_S = 7 * 86400
"""``timeout_s`` of a task or schedule: 0 (none) .. 7 days."""
DEFAULT_MAX_PAYLOAD_BYTES = 1 << 20
"""A task payload's serialised size unless the server is configured otherwise (1 MiB)."""
MAX_RESULT_BYTES = 1 << 20
"""A result's or checkpoint's serialised size (1 MiB)."""
MAX_JSON_DEPTH = 32
"""Nesting of a payload, result or checkpoint: objects and lists inside one another,
the outermost object counting as 1. A deeper Struct is refused (INVALID_ARGUMENT naming
the field), whether or not the protobuf decoder could read it."""
DEFAULT_MAX_MESSAGE_BYTES = 64 << 20
"""Largest gRPC message the server receives or sends unless configured otherwise
(64 MiB: a SubmitTasks batch of 10,000 tasks fits); larger is RESOURCE_EXHAUSTED."""


def flow_key_ok(value: object) -> bool:
    """Whether ``value`` is a good flow control key (the fast path of :func:`flow_key`)."""
    return type(value) is str and 0 < len(value) <= MAX_FLOW_KEY_CHARS and "\x00" not in value


def flow_key(value: object, field: str) -> str:
    """A flow control key (concurrency, rate limit, debounce or throttle key): a string
    of 1..:data:`MAX_FLOW_KEY_CHARS` characters without NUL (PostgreSQL text holds
    none). InvalidArgument names ``field`` (``task.concurrency_key``, ``limit.key``, …)."""
    if flow_key_ok(value):
        assert isinstance(value, str)
        return value
    if not isinstance(value, str):
        raise InvalidArgument(field, "must be a string")
    if not value:
        raise InvalidArgument(field, "required")
    if len(value) > MAX_FLOW_KEY_CHARS:
        raise InvalidArgument(field, f"longer than {MAX_FLOW_KEY_CHARS} characters")
    raise InvalidArgument(field, "must not contain NUL")
