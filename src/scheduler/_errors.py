"""The one exception tree of Tickwheel.

Every error the library raises on purpose derives from :class:`TickwheelError`. Each
subclass carries typed fields and a ``retryable`` flag, and maps to exactly one gRPC
status code (the table lives in the transport layer, ``scheduler.server._status``),
so clients in any language get the same meaning back.
"""

from __future__ import annotations


class TickwheelError(Exception):
    """Root of every Tickwheel error."""

    retryable: bool = False

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidArgument(TickwheelError):
    """A request field is malformed; ``field`` names it (dotted path for nested fields)."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field
        self.problem = problem


class FailedPrecondition(TickwheelError):
    """A request field is well formed but no longer usable (an expired plan token);
    ``field`` names it."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field
        self.problem = problem


class NotFound(TickwheelError):
    """The named entity does not exist (or is not visible to the caller's tenant)."""

    def __init__(self, kind: str, key: str) -> None:
        super().__init__(f"{kind} {key} not found")
        self.kind = kind
        self.key = key


class AlreadyExists(TickwheelError):
    """An entity with this unique name already exists."""

    def __init__(self, kind: str, key: str) -> None:
        super().__init__(f"{kind} {key} already exists")
        self.kind = kind
        self.key = key


class InvalidTransition(TickwheelError):
    """The task state machine forbids moving ``task_id`` from ``from_state`` to ``to_state``."""

    def __init__(self, task_id: str, from_state: str, to_state: str, reason: str = "") -> None:
        detail = f": {reason}" if reason else ""
        if from_state == to_state:
            # Cancelling a cancelled task: say so, not "CANCELLED -> CANCELLED".
            super().__init__(f"task {task_id} is already {from_state}{detail}")
        elif to_state == "CANCELLED" and from_state in ("COMPLETED", "DEAD_LETTER"):
            # Cancelling a finished task: nothing left to cancel.
            super().__init__(
                f"task {task_id} is already {from_state}: a finished task cannot be "
                f"cancelled{detail}"
            )
        else:
            super().__init__(
                f"task {task_id}: illegal transition {from_state} -> {to_state}{detail}"
            )
        self.task_id = task_id
        self.from_state = from_state
        self.to_state = to_state
        self.reason = reason


class StaleFencingToken(TickwheelError):
    """A worker wrote with a fencing token that is no longer current: it is a zombie."""

    def __init__(
        self, task_id: str, token: int, reason: str = "fencing token is not current"
    ) -> None:
        super().__init__(f"task {task_id}: stale fencing token {token}: {reason}")
        self.task_id = task_id
        self.token = token
        self.reason = reason


class Unauthenticated(TickwheelError):
    """No API key, or an API key that matches no tenant."""


class PermissionDenied(TickwheelError):
    """The caller's tenant may not touch this resource."""


class ResourceExhausted(TickwheelError):
    """A quota or size limit was hit; ``limit`` names which."""

    retryable = True

    def __init__(self, limit: str, detail: str) -> None:
        super().__init__(f"{limit}: {detail}")
        self.limit = limit
        self.detail = detail


class StoreError(TickwheelError):
    """The durable store failed (connection lost, server error). Wraps the driver error."""

    retryable = True


class Unavailable(TickwheelError):
    """The service is shutting down or not ready yet."""

    retryable = True


class WrongRegion(FailedPrecondition):
    """The call belongs to another region and is not proxied (a worker stream): connect
    to ``endpoints`` (``host:port`` joined by ``,``, in the order to try them), where
    region ``region``, the tenant's home, answers."""

    def __init__(self, region: str, endpoints: str) -> None:
        problem = f"this tenant's home is region {region!r}: connect there ({endpoints})"
        super().__init__("x-api-key", problem)
        self.region = region
        self.endpoints = endpoints


class UnknownRegion(InvalidArgument):
    """``field`` names region ``region``, which the region directory does not list
    (``known``: the regions it does, joined by ``, ``)."""

    def __init__(self, field: str, region: str, known: str) -> None:
        super().__init__(field, f"unknown region {region!r} (known: {known or 'none'})")
        self.region = region
        self.known = known


class TenantMoving(Unavailable):
    """Tenant ``tenant_id``'s home is moving between regions (``tickwheel tenants
    move``): this region does not serve it for the moment (at most a couple of
    seconds). Nothing was done; the call may be made again as it was (the Python SDK
    does so by itself), and a worker reconnects."""

    def __init__(self, tenant_id: str, detail: str = "is moving between regions") -> None:
        super().__init__(f"tenant {tenant_id} {detail}: retry shortly")
        self.tenant_id = tenant_id
        self.detail = detail
