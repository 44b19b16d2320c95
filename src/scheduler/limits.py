"""Every bound on what a caller may send, stated once.

The gRPC services check them first (so a client in any language gets the same answer
whatever path its call takes), the engine checks the same constants again for
in-process callers, and the SDKs split their batches by them. A leaf: imports nothing.
A value that is a configuration of a node (lease times, batch sizes of the store) is
not here: it lives in that part's config dataclass.
"""

from __future__ import annotations

MAX_TYPE_CHARS = 64
"""A task type's length."""
MAX_IDEMPOTENCY_KEY_CHARS = 128
"""An idempotency key's length."""
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
MAX_SUBMIT_BATCH = 10_000
"""Tasks in one ``SubmitTasks`` call (RESOURCE_EXHAUSTED over it)."""
MAX_PAGE_SIZE = 1000
"""Rows in one page of a list call."""
DEFAULT_PAGE_SIZE = 100
"""Rows in a page when the caller leaves the size unset."""
MAX_ERROR_CHARS = 4096
"""A failure's error text."""
MAX_NAME_CHARS = 128
"""A tenant's, key's, schedule's or workflow's name."""
MAX_WORKER_ID_CHARS = 256
"""A worker's id."""
MAX_TASK_TYPES = 256
"""Task types one worker stream declares."""
MAX_SLOTS = 100_000
"""Slots one worker stream may grant at once."""
