"""Proto <-> engine conversion of task listing: the filter and order of ListTasks (and of
the filters other RPCs take), and the page tokens bound to the tenant and filter they
were issued for; ``_convert.py`` re-exports them.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import uuid

from scheduler._errors import InvalidArgument
from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from scheduler.limits import (
    DEFAULT_PAGE_SIZE,
    MAX_IDEMPOTENCY_KEY_CHARS,
    MAX_PAGE_SIZE,
    MAX_TYPE_CHARS,
)
from scheduler.server._convert_fields import filter_pool, state_from_proto, to_datetime
from scheduler.types import TaskFilter, TaskOrder

_ORDER_FROM_PROTO = {
    pb.TASK_ORDER_UNSPECIFIED: TaskOrder.SCHEDULED_ASC,
    pb.TASK_ORDER_SCHEDULED_ASC: TaskOrder.SCHEDULED_ASC,
    pb.TASK_ORDER_SCHEDULED_DESC: TaskOrder.SCHEDULED_DESC,
    pb.TASK_ORDER_CREATED_ASC: TaskOrder.CREATED_ASC,
    pb.TASK_ORDER_CREATED_DESC: TaskOrder.CREATED_DESC,
}

_FilterMessage = pb.ListTasksRequest | pb.TaskFilter


def task_filter_from_proto(req: _FilterMessage, prefix: str = "") -> TaskFilter:
    """The narrowing fields (states, type, pools, scheduled_from/to) of a ListTasks
    request or a TaskFilter; ``prefix`` (``filter.``) goes before each field's name."""
    states = tuple(state_from_proto(s, f"{prefix}states[{i}]") for i, s in enumerate(req.states))
    if req.type and len(req.type) > MAX_TYPE_CHARS:
        raise InvalidArgument(f"{prefix}type", f"longer than {MAX_TYPE_CHARS} characters")
    pools = tuple(
        dict.fromkeys(filter_pool(p, f"{prefix}pools[{i}]") for i, p in enumerate(req.pools))
    )
    start = (
        to_datetime(req.scheduled_from, f"{prefix}scheduled_from")
        if req.HasField("scheduled_from")
        else None
    )
    end = (
        to_datetime(req.scheduled_to, f"{prefix}scheduled_to")
        if req.HasField("scheduled_to")
        else None
    )
    if start is not None and end is not None and end < start:
        raise InvalidArgument(f"{prefix}scheduled_to", "before scheduled_from")
    return TaskFilter(
        statuses=states, type=req.type or None, pools=pools, scheduled_from=start, scheduled_to=end
    )


def filter_from_proto(req: pb.ListTasksRequest) -> tuple[TaskFilter, int]:
    """The filter and page size of a ListTasks request."""
    narrowed = task_filter_from_proto(req)
    if len(req.idempotency_key) > MAX_IDEMPOTENCY_KEY_CHARS:
        raise InvalidArgument(
            "idempotency_key", f"longer than {MAX_IDEMPOTENCY_KEY_CHARS} characters"
        )
    if req.page_size > MAX_PAGE_SIZE:
        raise InvalidArgument("page_size", f"at most {MAX_PAGE_SIZE}")
    if len(req.page_token) > 1024:
        raise InvalidArgument("page_token", "malformed")
    order = _ORDER_FROM_PROTO.get(req.order)
    if order is None:
        raise InvalidArgument("order", f"unknown TaskOrder {req.order}")
    flt = dataclasses.replace(narrowed, order=order, idempotency_key=req.idempotency_key or None)
    return flt, req.page_size or DEFAULT_PAGE_SIZE


_PAGE_TOKEN_PREFIX = "p1."


def _filter_digest(tenant_id: uuid.UUID, flt: TaskFilter) -> str:
    parts = [
        str(tenant_id),
        ",".join(sorted(s.value for s in flt.statuses)),
        flt.type or "",
        flt.scheduled_from.isoformat() if flt.scheduled_from else "",
        flt.scheduled_to.isoformat() if flt.scheduled_to else "",
        ",".join(sorted(p.value for p in flt.pools)),
        flt.idempotency_key or "",
    ]
    digest = hashlib.blake2b("\x1f".join(parts).encode(), digest_size=9).digest()
    return base64.urlsafe_b64encode(digest).decode()


def page_token_out(tenant_id: uuid.UUID, flt: TaskFilter, store_token: str) -> str:
    """The token a client gets for the store's next-page position ('' at the end)."""
    if not store_token:
        return ""
    return f"{_PAGE_TOKEN_PREFIX}{_filter_digest(tenant_id, flt)}.{store_token}"


def page_token_in(tenant_id: uuid.UUID, flt: TaskFilter, token: str) -> str:
    """The store's position inside a client's token ('' for the first page);
    InvalidArgument when it is not a token of this server or was issued for another
    filter."""
    if not token:
        return ""
    prefix, dot, rest = token.partition(".")
    digest, dot2, store_token = rest.partition(".")
    if f"{prefix}{dot}" != _PAGE_TOKEN_PREFIX or not dot2 or not store_token:
        raise InvalidArgument("page_token", "is not a token this server issued")
    if digest != _filter_digest(tenant_id, flt):
        raise InvalidArgument("page_token", "was issued for a different filter")
    return store_token
