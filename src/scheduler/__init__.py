"""Tickwheel: a multi-tenant, distributed task scheduler.

The public names are re-exported here from private modules; subpackages
(``scheduler.client``, ``scheduler.worker``, ``scheduler.engine``, ``scheduler.store``,
``scheduler.server``, ``scheduler.wheel``) hold the rest.
"""

from typing import TYPE_CHECKING, Any

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
from scheduler.jitter import JitterMode
from scheduler.states import TaskState
from scheduler.types import RetryPolicy

if TYPE_CHECKING:
    from scheduler.client import App, Client, SyncClient

__version__ = "0.1.0.dev0"

_CLIENT_NAMES = frozenset({"App", "Client", "SyncClient"})


def __getattr__(name: str) -> Any:
    """``scheduler.App``, ``scheduler.Client`` (the async client) and
    ``scheduler.SyncClient``, loaded on first use: importing ``scheduler`` (and so
    the engine or the store) loads no grpc."""
    if name in _CLIENT_NAMES:
        import scheduler.client

        return getattr(scheduler.client, name)
    raise AttributeError(f"module 'scheduler' has no attribute {name!r}")


__all__ = [
    "AlreadyExists",
    "App",
    "Client",
    "InvalidArgument",
    "InvalidTransition",
    "JitterMode",
    "NotFound",
    "PermissionDenied",
    "ResourceExhausted",
    "RetryPolicy",
    "StaleFencingToken",
    "StoreError",
    "SyncClient",
    "TaskState",
    "TickwheelError",
    "Unauthenticated",
    "Unavailable",
    "__version__",
]
