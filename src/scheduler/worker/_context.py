"""What a task handler receives: :class:`TaskContext`, the cancel reasons, the two
exceptions a handler raises on purpose (:class:`Interrupted`, :class:`ApplicationError`),
and how a failure's type, message and traceback are sent (:func:`error_of`,
:func:`traceback_of`).

May call: nothing in the worker SDK (a checkpoint goes through the ``checkpointer`` it
is given). Called by: handlers, and the handler runner and the drain, which make the
contexts and cancel them (:func:`cancel`).
"""

from __future__ import annotations

import asyncio
import traceback
import uuid
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

from scheduler._errors import TickwheelError

JSON = dict[str, Any]


class ApplicationError(TickwheelError):
    """Raise from a handler to fail the attempt with a message; ``non_retryable=True``
    dead-letters the task at once instead of retrying it."""

    def __init__(self, message: str, *, non_retryable: bool = False) -> None:
        super().__init__(message)
        self.non_retryable = non_retryable


CANCELLED = "cancelled"
"""``cancel_reason`` when a client cancelled the task (it ends CANCELLED)."""
DRAIN = "drain"
"""``cancel_reason`` when the worker is draining: finish within the grace period, or
checkpoint and raise :class:`Interrupted` (the task goes back without using an attempt
and another worker resumes from the checkpoint)."""
LEASE_LOST = "lease_lost"
"""``cancel_reason`` when this attempt lost its lease: its writes will be rejected."""


class Interrupted(TickwheelError):
    """Raise from a handler that stopped because ``ctx.cancelled`` was set.

    What happens next depends on ``ctx.cancel_reason``: ``"drain"`` releases the lease
    with the last checkpoint (RUNNING -> PRELOADED, no attempt used); ``"cancelled"``
    confirms the cancel (RUNNING -> CANCELLED); ``"lease_lost"`` writes nothing. Raised
    without a cancellation it fails the attempt like any other error.
    """

    def __init__(self, reason: str | None = None) -> None:
        super().__init__(f"handler interrupted ({reason or 'no cancellation'})")
        self.reason = reason


class TaskContext:
    """One attempt of one task, as the handler sees it.

    ``fencing_token`` identifies this attempt: pass it to downstream systems so they
    can reject a write from a zombie attempt, exactly as the scheduler does.
    ``cancelled`` is set when a client cancels the task, when the worker starts to
    drain (SIGTERM), or when the lease is lost; ``cancel_reason`` says which
    (:data:`CANCELLED`, :data:`DRAIN`, :data:`LEASE_LOST`). A long handler checks
    :attr:`is_cancelled` (or calls :meth:`raise_if_cancelled`) between units of work,
    writes a checkpoint and raises :class:`Interrupted`; a short one may ignore it and
    finish within the grace period.
    """

    __slots__ = (
        "_cancelled",
        "_checkpointer",
        "_loop",
        "attempt",
        "cancel_reason",
        "checkpoint_data",
        "drain_deadline",
        "due_at",
        "fencing_token",
        "max_retries",
        "payload",
        "received_at",
        "scheduled_at",
        "task_id",
        "timeout_s",
        "trace_context",
        "type",
    )

    def __init__(
        self,
        *,
        task_id: uuid.UUID,
        type: str,
        attempt: int,
        max_retries: int,
        payload: JSON,
        fencing_token: int,
        checkpoint_data: JSON | None,
        trace_context: dict[str, str] | None,
        scheduled_at: datetime,
        due_at: datetime,
        timeout_s: float,
        received_at: datetime,
        loop: asyncio.AbstractEventLoop,
        checkpointer: Callable[[TaskContext, JSON], Awaitable[None]],
    ) -> None:
        self.task_id = task_id
        self.type = type
        self.attempt = attempt
        self.max_retries = max_retries
        self.payload = payload
        self.fencing_token = fencing_token
        self.checkpoint_data = checkpoint_data
        """The last checkpoint (from an earlier attempt or from this one)."""
        self.trace_context = trace_context
        self.scheduled_at = scheduled_at
        self.due_at = due_at
        self.timeout_s = timeout_s
        self.received_at = received_at
        """When the assignment reached this worker (``received_at - due_at`` is the
        dispatch lateness the worker saw)."""
        self._cancelled: asyncio.Event | None = None
        """Made when first asked for (:attr:`cancelled`): most handlers never wait on
        it, and a busy worker holds thousands of contexts (each object one more for
        the garbage collector to walk)."""
        self.cancel_reason: str | None = None
        """Why the handler should stop (None: it should not)."""
        self.drain_deadline: datetime | None = None
        """While draining: when the worker releases whatever is still running."""
        self._loop = loop
        self._checkpointer = checkpointer

    @property
    def cancelled(self) -> asyncio.Event:
        """Set when the handler should stop: ``await ctx.cancelled.wait()`` in an async
        handler (a sync one reads :attr:`is_cancelled`)."""
        event = self._cancelled
        if event is None:
            event = self._cancelled = asyncio.Event()
            if self.cancel_reason is not None:  # cancelled before anyone asked
                event.set()
        return event

    @property
    def is_cancelled(self) -> bool:
        """Whether the handler should stop (safe to read from a sync handler's thread)."""
        return self.cancel_reason is not None

    def raise_if_cancelled(self) -> None:
        """Raise :class:`Interrupted` when the handler should stop (after saving a
        checkpoint, if it has progress to keep)."""
        if self.cancel_reason is not None:
            raise Interrupted(self.cancel_reason)

    async def checkpoint(self, data: JSON) -> None:
        """Store progress so a later attempt resumes from it (fenced; raises
        :class:`~scheduler._errors.StaleFencingToken` when this attempt lost the task)."""
        await self._checkpointer(self, dict(data))
        self.checkpoint_data = dict(data)

    def checkpoint_sync(self, data: JSON, timeout_s: float = 30.0) -> None:
        """:meth:`checkpoint` for sync handlers running in the worker's thread pool."""
        future = asyncio.run_coroutine_threadsafe(self.checkpoint(data), self._loop)
        future.result(timeout_s)

    def _cancel(self, reason: str) -> None:
        # The first reason wins: a client cancel during a drain still ends CANCELLED
        # (the store turns a release with a pending cancel into CANCELLED).
        if self.cancel_reason is None:
            self.cancel_reason = reason
            if self._cancelled is not None:
                self._cancelled.set()

    def __repr__(self) -> str:
        return (
            f"TaskContext(task_id={self.task_id}, type={self.type!r}, attempt={self.attempt}, "
            f"fencing_token={self.fencing_token})"
        )


def cancel(ctx: TaskContext, reason: str) -> None:
    """Set ``ctx.cancelled`` with ``reason`` (the first reason wins). The SDK's way to
    tell a handler to stop; not part of the handler's API."""
    ctx._cancel(reason)


def error_of(exc: BaseException) -> tuple[str, str]:
    """A failure's type as the wire takes it (its class name when printable ASCII, else
    "") and its message (the type when the exception says nothing)."""
    error_type = type(exc).__name__
    if not (error_type.isascii() and error_type.isprintable()):
        error_type = ""
    return error_type, str(exc) or error_type


MAX_TRACEBACK_CHARS = 16_384
"""The server's bound on ``Failure.traceback``."""


def traceback_of(exc: BaseException) -> str:
    """``exc`` formatted as Python prints it, chained causes included; past the
    server's bound its start is cut (the frames nearest the error stay)."""
    try:
        text = "".join(traceback.format_exception(exc))
    except Exception:  # a broken __str__ must not lose the failure itself
        return ""
    if len(text) > MAX_TRACEBACK_CHARS:
        text = "…" + text[-(MAX_TRACEBACK_CHARS - 1) :]
    return text
