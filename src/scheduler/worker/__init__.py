"""The worker SDK: register handlers per task type and :meth:`Worker.run`.

Handlers take a :class:`TaskContext` and may be sync (run in a thread pool) or async.
"""

from scheduler.client._tls import TLSConfig
from scheduler.worker._context import ApplicationError, TaskContext
from scheduler.worker._worker import Handler, ReconnectConfig, Worker

__all__ = ["ApplicationError", "Handler", "ReconnectConfig", "TLSConfig", "TaskContext", "Worker"]
