"""Task handles: what ``submit``/``delay`` give back, with ``result(timeout=...)``.

A handle waits through :meth:`Client.wait` (the ``WaitTask`` long poll: the server
answers when the task settles), never by polling ``GetTask`` in a loop.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from scheduler._errors import TickwheelError
from scheduler.client._types import JSON, Task
from scheduler.states import TaskState

if TYPE_CHECKING:
    from scheduler.client._client import Client


class TaskFailed(TickwheelError):
    """The task dead-lettered: its attempts failed (``task.last_error`` says why)."""

    def __init__(self, task: Task) -> None:
        super().__init__(
            f"task {task.id} ({task.type}) is {task.state.value}: {task.last_error or 'no error'}"
        )
        self.task = task


class TaskCancelled(TaskFailed):
    """The task was cancelled before it completed."""

    def __init__(self, task: Task) -> None:
        # Not TaskFailed's "is CANCELLED: no error": a cancel is no failure.
        why = f": {task.last_error}" if task.last_error else ""
        TickwheelError.__init__(self, f"task {task.id} ({task.type}) was cancelled{why}")
        self.task = task


def outcome(task: Task) -> JSON:
    """A settled task's result, or the exception its state means."""
    if task.state is TaskState.COMPLETED:
        return task.result or {}
    if task.state is TaskState.CANCELLED:
        raise TaskCancelled(task)
    raise TaskFailed(task)


class TaskHandle:
    """A submitted task (async). ``await handle.result(timeout=30)``."""

    def __init__(self, client: Client, task: Task) -> None:
        self._client = client
        self.task = task
        """The task as the submit answered it (``due_at`` is its effective time)."""

    @property
    def id(self) -> uuid.UUID:
        """The task id."""
        return self.task.id

    def __repr__(self) -> str:
        return f"<TaskHandle {self.task.type} {self.task.id}>"

    async def get(self) -> Task:
        """The task as it is now."""
        return await self._client.get(self.id)

    # ``timeout=`` as Celery's AsyncResult has it; the wait is the server's long poll.
    async def wait(self, timeout: float | None = None) -> Task:  # noqa: ASYNC109
        """The task once COMPLETED, CANCELLED or DEAD_LETTER; TimeoutError after
        ``timeout`` seconds (None: no limit)."""
        return await self._client.wait(self.id, timeout)

    async def result(self, timeout: float | None = None) -> JSON:  # noqa: ASYNC109
        """The handler's result (a JSON object); TaskFailed for a dead letter,
        TaskCancelled for a cancelled task, TimeoutError after ``timeout`` seconds."""
        return outcome(await self.wait(timeout))

    async def cancel(self) -> Task:
        """Cancel the task."""
        return await self._client.cancel(self.id)
