"""The worker SDK: register handlers per task type and :meth:`Worker.run`.

Handlers take a :class:`TaskContext` and may be sync (run in a thread pool) or async;
a :class:`Batch` handler takes a list of them (up to its size) at once.
:meth:`Worker.shutdown` drains in two phases (see ``docs/worker.md``): stop taking work,
then let handlers finish or checkpoint and raise :class:`Interrupted` within the grace.

Re-exports only; how the parts behind :class:`Worker` are cut is in ``_worker.py`` and
``docs/worker.md`` ("How the SDK is built").
"""

from __future__ import annotations

from scheduler.client._tls import TLSConfig
from scheduler.worker._backoff import ReconnectConfig
from scheduler.worker._batch import Batch, BatchMismatch, batch
from scheduler.worker._context import ApplicationError, Interrupted, TaskContext
from scheduler.worker._drain import DrainReport
from scheduler.worker._invoke import Handler
from scheduler.worker._kafka import KafkaSource
from scheduler.worker._members import ClusterWorker, fetch_members
from scheduler.worker._worker import Worker

__all__ = [
    "ApplicationError",
    "Batch",
    "BatchMismatch",
    "ClusterWorker",
    "DrainReport",
    "Handler",
    "Interrupted",
    "KafkaSource",
    "ReconnectConfig",
    "TLSConfig",
    "TaskContext",
    "Worker",
    "batch",
    "fetch_members",
]
