"""SchedulerService's bulk actions (issue 18): PlanBulkAction and RunBulkAction.

A mixin of :class:`~scheduler.server._scheduler.SchedulerService`, like
``_workflows.py``. The plan counts what a filter matches now and hands back a plan token
that carries the tenant, the action, the filter (with the action's states added) and
the plan's time; the run takes only the token, so a reloaded page or a lost filter can
never widen what it acts on. The token is base64url of a small versioned JSON document
with no secret: it can only ever name tasks of the tenant it carries, and the run checks
that tenant against the caller's.

A run walks the tenant's matching tasks in creation order, page by page, and acts on
each through the engine's own single-task paths (:meth:`Engine.cancel`,
:meth:`Engine.redrive`), so the wheel, the ready queues and the workers hear of each
change and each change is audited as CancelTask's or RedriveTask's would be.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import json
import uuid
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import grpc

from scheduler._errors import (
    FailedPrecondition,
    InvalidArgument,
    InvalidTransition,
    NotFound,
    PermissionDenied,
)
from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from scheduler.engine import Engine
from scheduler.limits import MAX_PAGE_SIZE, MAX_TYPE_CHARS
from scheduler.server import _convert as conv
from scheduler.server._auth import Gatekeeper, tenant_of
from scheduler.server._status import unary
from scheduler.states import TaskState, sources
from scheduler.types import Pool, Scope, TaskFilter, TaskOrder, TaskRecord

Context = grpc.aio.ServicerContext[Any, Any]

MAX_BULK = 100_000
"""At most this many tasks per plan and per run (the proto says so)."""
PLAN_TTL_S = 900
"""A plan token is valid for 15 minutes."""
TOKEN_VERSION = 1
MAX_TOKEN_CHARS = 4096

CANCEL = "cancel"
REDRIVE = "redrive"

_ACTION_FROM_PROTO = {pb.BULK_ACTION_CANCEL: CANCEL, pb.BULK_ACTION_REDRIVE: REDRIVE}
_ACTION_TO_PROTO = {v: k for k, v in _ACTION_FROM_PROTO.items()}

APPLICABLE: dict[str, tuple[TaskState, ...]] = {
    # As CancelTask: immediate from every legal source of CANCELLED, requested from
    # DISPATCHED and RUNNING (the worker is told).
    CANCEL: tuple(
        s
        for s in TaskState
        if s in sources(TaskState.CANCELLED) or s in (TaskState.DISPATCHED, TaskState.RUNNING)
    ),
    REDRIVE: (TaskState.DEAD_LETTER,),
}
"""The states each action applies to, in TaskState order."""


@dataclasses.dataclass(frozen=True, slots=True)
class Plan:
    """What a plan token carries."""

    tenant_id: uuid.UUID
    action: str
    states: tuple[TaskState, ...]
    type: str | None
    pools: tuple[Pool, ...]
    scheduled_from: datetime | None
    scheduled_to: datetime | None
    planned_at: datetime
    expires_at: datetime

    def task_filter(self) -> TaskFilter:
        """The store filter of the plan."""
        return TaskFilter(
            statuses=self.states,
            type=self.type,
            pools=self.pools,
            scheduled_from=self.scheduled_from,
            scheduled_to=self.scheduled_to,
            order=TaskOrder.CREATED_ASC,
        )

    def matches(self, task: TaskRecord) -> bool:
        """Whether a task of the store's page belongs to the plan."""
        return task.created_at <= self.planned_at and (not self.pools or task.pool in self.pools)


def _us(dt: datetime | None) -> int | None:
    return None if dt is None else round(dt.timestamp() * 1_000_000)


def _dt(us: Any) -> datetime | None:
    if us is None:
        return None
    if not isinstance(us, int) or isinstance(us, bool):
        raise ValueError("not an integer time")
    return datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=us)


def encode_plan(plan: Plan) -> str:
    """The opaque token of a plan: base64url (unpadded) of versioned JSON."""
    doc = {
        "v": TOKEN_VERSION,
        "t": str(plan.tenant_id),
        "a": plan.action,
        "s": [s.value for s in plan.states],
        "y": plan.type,
        "p": [p.value for p in plan.pools],
        "f": _us(plan.scheduled_from),
        "u": _us(plan.scheduled_to),
        "at": _us(plan.planned_at),
        "x": _us(plan.expires_at),
    }
    raw = json.dumps(doc, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_plan(token: str) -> Plan:
    """The plan a token carries; InvalidArgument naming ``plan_token`` when it is none."""
    if not token:
        raise InvalidArgument("plan_token", "required")
    if len(token) > MAX_TOKEN_CHARS:
        raise InvalidArgument("plan_token", "malformed")
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        doc = json.loads(raw)
        if not isinstance(doc, dict) or doc.get("v") != TOKEN_VERSION:
            raise ValueError("unknown version")
        action = doc["a"]
        if action not in APPLICABLE:
            raise ValueError("unknown action")
        states = tuple(TaskState(s) for s in doc["s"])
        if not states or not set(states) <= set(APPLICABLE[action]):
            raise ValueError("states")
        typ = doc["y"]
        if typ is not None and not isinstance(typ, str):
            raise ValueError("type")
        planned, expires = _dt(doc["at"]), _dt(doc["x"])
        if planned is None or expires is None:
            raise ValueError("times")
        return Plan(
            tenant_id=uuid.UUID(doc["t"]),
            action=action,
            states=states,
            type=typ,
            pools=tuple(Pool(p) for p in doc["p"]),
            scheduled_from=_dt(doc["f"]),
            scheduled_to=_dt(doc["u"]),
            planned_at=planned,
            expires_at=expires,
        )
    except (ValueError, TypeError, KeyError, AttributeError, OverflowError, binascii.Error):
        raise InvalidArgument("plan_token", "malformed") from None


def filter_of(
    req: pb.TaskFilter, action: str
) -> tuple[tuple[TaskState, ...], TaskFilter, tuple[Pool, ...]]:
    """The states (the request's narrowed to the action's), the store filter and the
    pools of a plan request's filter; fields named ``filter.*``."""
    applicable = APPLICABLE[action]
    asked = {conv.state_from_proto(s, f"filter.states[{i}]") for i, s in enumerate(req.states)}
    states = tuple(s for s in applicable if not asked or s in asked)
    if not states:
        raise InvalidArgument(
            "filter.states",
            f"none is a state {action} applies to ({', '.join(s.value for s in applicable)})",
        )
    if len(req.type) > MAX_TYPE_CHARS:
        raise InvalidArgument("filter.type", f"longer than {MAX_TYPE_CHARS} characters")
    start = (
        conv.to_datetime(req.scheduled_from, "filter.scheduled_from")
        if req.HasField("scheduled_from")
        else None
    )
    end = (
        conv.to_datetime(req.scheduled_to, "filter.scheduled_to")
        if req.HasField("scheduled_to")
        else None
    )
    if start is not None and end is not None and end < start:
        raise InvalidArgument("filter.scheduled_to", "before scheduled_from")
    flt = TaskFilter(type=req.type or None, scheduled_from=start, scheduled_to=end)
    pools = tuple(
        sorted(
            {conv.pool_from_proto(p, f"filter.pools[{i}]") for i, p in enumerate(req.pools)},
            key=lambda p: list(Pool).index(p),
        )
    )
    return states, flt, pools


def filter_to_proto(plan: Plan) -> pb.TaskFilter:
    """The plan's filter as the caller is shown it (the action's states added)."""
    out = pb.TaskFilter(
        states=[conv.state_to_proto(s) for s in plan.states],
        type=plan.type or "",
        pools=[conv.pool_to_proto(p) for p in plan.pools],
    )
    if plan.scheduled_from is not None:
        out.scheduled_from.CopyFrom(conv.from_datetime(plan.scheduled_from))
    if plan.scheduled_to is not None:
        out.scheduled_to.CopyFrom(conv.from_datetime(plan.scheduled_to))
    return out


async def matching(engine: Engine, plan: Plan, limit: int) -> AsyncIterator[Sequence[TaskRecord]]:
    """The plan's tasks, a page at a time, at most ``limit`` in all. Creation order:
    pages continue by id, so a task the run changes (and so leaves the filter) never
    moves another past the cursor; the walk ends at the first task created well after
    the plan (UUIDv7 ids follow creation)."""
    token = ""
    seen = 0
    flt = plan.task_filter()
    late = plan.planned_at + timedelta(seconds=60)
    while seen < limit:
        page = await engine.list_tasks(plan.tenant_id, flt, MAX_PAGE_SIZE, token)
        mine = [t for t in page.tasks if plan.matches(t)][: limit - seen]
        seen += len(mine)
        if mine:
            yield mine
        if not page.next_page_token or any(t.created_at > late for t in page.tasks):
            return
        token = page.next_page_token


class BulkRpcs:
    """PlanBulkAction and RunBulkAction."""

    _engine: Engine
    _gate: Gatekeeper

    @unary
    async def PlanBulkAction(
        self, request: pb.PlanBulkActionRequest, context: Context
    ) -> pb.PlanBulkActionResponse:
        """Count what the filter matches now; a token for exactly that."""
        tenant = await tenant_of(self._gate, context, Scope.SUBMIT)
        action = _ACTION_FROM_PROTO.get(request.action)
        if action is None:
            raise InvalidArgument("action", "required: BULK_ACTION_CANCEL or BULK_ACTION_REDRIVE")
        states, flt, pools = filter_of(request.filter, action)
        now = self._engine.now()
        plan = Plan(
            tenant_id=tenant,
            action=action,
            states=states,
            type=flt.type,
            pools=pools,
            scheduled_from=flt.scheduled_from,
            scheduled_to=flt.scheduled_to,
            planned_at=now,
            expires_at=now + timedelta(seconds=PLAN_TTL_S),
        )
        count = 0
        async for page in matching(self._engine, plan, MAX_BULK + 1):
            count += len(page)
        if count > MAX_BULK:
            raise InvalidArgument(
                "filter", f"matches more than {MAX_BULK:,} tasks; narrow it (type, pools, time)"
            )
        out = pb.PlanBulkActionResponse(
            count=count,
            plan_token=encode_plan(plan),
            action=_ACTION_TO_PROTO[action],
            filter=filter_to_proto(plan),
        )
        out.planned_at.CopyFrom(conv.from_datetime(plan.planned_at))
        out.expires_at.CopyFrom(conv.from_datetime(plan.expires_at))
        return out

    @unary
    async def RunBulkAction(
        self, request: pb.RunBulkActionRequest, context: Context
    ) -> pb.RunBulkActionResponse:
        """Act on the plan's tasks that still match, in pages."""
        tenant = await tenant_of(self._gate, context, Scope.SUBMIT)
        plan = decode_plan(request.plan_token)
        if plan.tenant_id != tenant:
            raise PermissionDenied("plan_token: was planned for another tenant")
        if self._engine.now() >= plan.expires_at:
            raise FailedPrecondition("plan_token", "expired; plan again")
        matched = changed = 0
        async for page in matching(self._engine, plan, MAX_BULK):
            matched += len(page)
            for task in page:
                changed += await self._act(plan, task)
        return pb.RunBulkActionResponse(
            action=_ACTION_TO_PROTO[plan.action],
            filter=filter_to_proto(plan),
            matched=matched,
            changed=changed,
        )

    async def _act(self, plan: Plan, task: TaskRecord) -> int:
        """1 when the task changed (cancelled, cancel requested, or redriven); 0 when
        it finished or moved on in between."""
        try:
            if plan.action == CANCEL:
                after = await self._engine.cancel(plan.tenant_id, task.id)
                return int(
                    after.status is TaskState.CANCELLED
                    or (after.cancel_requested and not task.cancel_requested)
                )
            await self._engine.redrive(plan.tenant_id, task.id)
            return 1
        except (InvalidTransition, NotFound):
            return 0
