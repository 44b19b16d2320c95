"""Tickwheel: a multi-tenant, distributed task scheduler.

The public names are re-exported here from private modules; subpackages
(``scheduler.client``, ``scheduler.worker``, ``scheduler.engine``, ``scheduler.store``,
``scheduler.server``, ``scheduler.wheel``) hold the rest.
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
from scheduler.jitter import JitterMode
from scheduler.states import TaskState

__version__ = "0.1.0.dev0"

__all__ = [
    "AlreadyExists",
    "InvalidArgument",
    "InvalidTransition",
    "JitterMode",
    "NotFound",
    "PermissionDenied",
    "ResourceExhausted",
    "StaleFencingToken",
    "StoreError",
    "TaskState",
    "TickwheelError",
    "Unauthenticated",
    "Unavailable",
    "__version__",
]
