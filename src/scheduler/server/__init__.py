"""The gRPC transport: SchedulerService, WorkerService and AdminService over the engine.

Start one with :class:`Server` (or :func:`build_server` for a bare ``grpc.aio.Server``);
every domain error is answered through the single table in :data:`STATUS_CODES`.
"""

from scheduler.server._config import ServerConfig
from scheduler.server._server import SERVICE_NAMES, ListenError, Server, build_server
from scheduler.server._standby import NotPromotedServer
from scheduler.server._status import STATUS_CODES, code_of

__all__ = [
    "SERVICE_NAMES",
    "STATUS_CODES",
    "ListenError",
    "NotPromotedServer",
    "Server",
    "ServerConfig",
    "build_server",
    "code_of",
]
