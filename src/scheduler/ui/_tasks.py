"""The tasks pages: the filtered, paginated list with search, one task's detail and
timeline, cancel and redrive, and bulk actions in two steps.

A bulk action is PlanBulkAction on the list's filter, a confirm page showing the
server's count and filter echo (kept in the session, so a reload shows the same plan
and plans nothing new), and RunBulkAction with the plan token alone; the result is kept
too, so reloading it never runs anything again.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from aiohttp import web
from multidict import MultiMapping

from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from scheduler.ui import _format as fmt
from scheduler.ui._api import ApiError
from scheduler.ui._web import Ctx, ctx_of, error_page, not_found, redirect, render

PAGE_SIZE = 50


class FilterError(ValueError):
    """A filter field the user gave is not valid; the message names it."""


def _parse_time(field: str, value: str) -> datetime | None:
    value = value.strip()
    if not value:
        return None
    try:
        dt = datetime.fromisoformat(value.replace("Z", "+00:00"))
        return dt.replace(tzinfo=UTC) if dt.tzinfo is None else dt.astimezone(UTC)
    except (ValueError, OverflowError):
        # OverflowError: an offset that moves a date out of years 1..9999 in UTC.
        raise FilterError(f"{field}: {value[:40]!r} is not a date and time (UTC)") from None


def parse_filter(source: MultiMapping[str]) -> dict[str, Any]:
    """The list filter from query or form fields: states, type, pools, from, to."""
    states = [s.strip().upper() for s in source.getall("state", []) if s.strip()]
    for s in states:
        if s not in fmt.STATES:
            raise FilterError(f"state: {s!r} is not one of {', '.join(fmt.STATES)}")
    pools = [p.strip().upper() for p in source.getall("pool", []) if p.strip()]
    for p in pools:
        if p not in fmt.POOLS:
            raise FilterError(f"pool: {p!r} is not one of {', '.join(fmt.POOLS)}")
    task_type = source.get("type", "").strip()
    if len(task_type) > 64:
        raise FilterError("type: at most 64 characters")
    return {
        "states": states,
        "type": task_type,
        "pools": pools,
        "from": _parse_time("from", source.get("from", "")),
        "to": _parse_time("to", source.get("to", "")),
    }


def filter_params(f: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The filter as query parameters (the next-page link and the bulk form)."""
    out = [("state", s) for s in f["states"]]
    if f["type"]:
        out.append(("type", f["type"]))
    out += [("pool", p) for p in f["pools"]]
    for key in ("from", "to"):
        if f[key] is not None:
            out.append((key, f[key].isoformat(timespec="seconds").replace("+00:00", "Z")))
    return out


def task_filter_message(f: Mapping[str, Any]) -> pb.TaskFilter:
    message = pb.TaskFilter(
        states=[fmt.state_value(s) for s in f["states"]],
        type=f["type"],
        pools=[fmt.pool_value(p) for p in f["pools"]],
    )
    if f["from"] is not None:
        message.scheduled_from.CopyFrom(fmt.timestamp(f["from"]))
    if f["to"] is not None:
        message.scheduled_to.CopyFrom(fmt.timestamp(f["to"]))
    return message


def _list_request(f: Mapping[str, Any], page_token: str, key: str = "") -> pb.ListTasksRequest:
    request = pb.ListTasksRequest(
        states=[fmt.state_value(s) for s in f["states"]],
        type=f["type"],
        pools=[fmt.pool_value(p) for p in f["pools"]],
        page_size=PAGE_SIZE,
        page_token=page_token,
        order=pb.TASK_ORDER_CREATED_DESC,
        idempotency_key=key,
    )
    if f["from"] is not None:
        request.scheduled_from.CopyFrom(fmt.timestamp(f["from"]))
    if f["to"] is not None:
        request.scheduled_to.CopyFrom(fmt.timestamp(f["to"]))
    return request


def _uuid(value: str) -> str | None:
    try:
        return str(uuid.UUID(value))
    except ValueError:
        return None


async def tasks_data(ctx: Ctx) -> tuple[dict[str, Any], int]:
    query = ctx.request.query
    empty: dict[str, Any] = {"states": [], "type": "", "pools": [], "from": None, "to": None}
    try:
        f = parse_filter(query)
    except FilterError as exc:
        bad: dict[str, Any] = {
            "filter": empty,
            "error": str(exc),
            "tasks": [],
            "unserved": [],
            "next": None,
            "q": "",
        }
        return {**bad, "total": None}, 400
    q = query.get("q", "").strip()
    request = _list_request(f, query.get("page_token", ""), key=q)
    api = ctx.api
    # The total of the filter: one CountTasks beside the page's ListTasks (in parallel,
    # never per row); a search by key shows what it found instead.
    counted = (
        api.section(
            api.scheduler.CountTasks,
            pb.CountTasksRequest(filter=task_filter_message(f)),
            ctx.metadata,
        )
        if not q
        else None
    )
    listed = api.call(api.scheduler.ListTasks, request, ctx.metadata)
    # The overdue (type, pool) groups no connected worker takes: the "no worker" badge.
    workers = api.section(api.scheduler.ListWorkers, pb.ListWorkersRequest(), ctx.metadata)
    try:
        if counted is None:
            resp, served = await asyncio.gather(listed, workers)
            count = None
        else:
            resp, count, served = await asyncio.gather(listed, counted, workers)
    except ApiError as exc:
        if exc.unauthenticated:
            raise
        status = 400 if exc.code.name == "INVALID_ARGUMENT" else 502
        failed: dict[str, Any] = {
            "filter": f,
            "error": str(exc),
            "tasks": [],
            "unserved": [],
            "next": None,
            "q": q,
        }
        return {**failed, "total": None}, status
    found = list(resp.tasks)
    if q:
        # A server that predates the idempotency_key filter answers every task.
        found = [t for t in found if t.idempotency_key == q]
    total = len(found) if q else (count.value.total if count is not None and count.ok else None)
    unserved = fmt.unserved(served.value) if served.ok else []
    rows = fmt.mark_unserved([fmt.task_row(t) for t in found], unserved)
    params = filter_params(f)
    next_url = None
    if resp.next_page_token:
        extra = [("q", q)] if q else []
        next_url = ctx.url("/tasks", [*params, *extra, ("page_token", resp.next_page_token)])
    return {
        "filter": f,
        "params": params,
        "error": None,
        "tasks": rows,
        "unserved": unserved,
        "total": total,
        "next": next_url,
        "first": ctx.url("/tasks", params) if query.get("page_token") else None,
        "q": q,
    }, 200


async def tasks(request: web.Request) -> web.StreamResponse:
    ctx = ctx_of(request)
    q = request.query.get("q", "").strip()
    if q:
        task_id = _uuid(q)
        if task_id is not None:
            raise redirect(ctx.url(f"/tasks/{task_id}"))
    data, status = await tasks_data(ctx)
    if q and status == 200 and len(data["tasks"]) == 1:
        # An idempotency key names at most one task of a tenant: open it.
        raise redirect(ctx.url(f"/tasks/{data['tasks'][0]['id']}"))
    return await render(
        request,
        "tasks.html",
        {
            "title": "Tasks",
            "data": data,
            "states": fmt.STATES,
            "pools": fmt.POOLS,
            "form_filter": _form_values(data["filter"]),
        },
        status=status,
    )


def _form_values(f: Mapping[str, Any]) -> dict[str, Any]:
    def local(dt: datetime | None) -> str:
        return dt.strftime("%Y-%m-%dT%H:%M:%S") if dt else ""

    return {**f, "from": local(f["from"]), "to": local(f["to"])}


async def tasks_json(request: web.Request) -> web.Response:
    data, status = await tasks_data(ctx_of(request))
    data = {k: v for k, v in data.items() if k in ("tasks", "total", "next", "error", "unserved")}
    return web.json_response(data, status=status)


async def _task_and_history(ctx: Ctx, task_id: str) -> tuple[pb.Task, list[dict[str, Any]], Any]:
    api, md = ctx.api, ctx.metadata
    task_call = api.call(api.scheduler.GetTask, pb.GetTaskRequest(task_id=task_id), md)
    history_call = api.section(
        api.scheduler.GetTaskHistory, pb.GetTaskHistoryRequest(task_id=task_id), md
    )
    got, history = await asyncio.gather(task_call, history_call)
    rows = fmt.timeline(history.value) if history.ok else []
    return got.task, rows, history


async def task_detail(request: web.Request) -> web.StreamResponse:
    ctx = ctx_of(request)
    task_id = _uuid(request.match_info["task_id"])
    if task_id is None:
        return await not_found(request, "This task")
    try:
        task, rows, history = await _task_and_history(ctx, task_id)
    except ApiError as exc:
        if exc.not_found or exc.code.name == "INVALID_ARGUMENT":
            return await not_found(request, "This task")
        raise
    detail = fmt.task_detail(task)
    return await render(
        request,
        "task.html",
        {
            "title": f"Task {task_id}",
            "task": detail,
            "timeline": rows,
            "attempts": fmt.attempts(rows),
            "history": history,
            "failure": next(
                (
                    r
                    for r in reversed(rows)
                    if r["kind"] == "transition" and r["to"] in ("DEAD_LETTER", "RETRYING")
                ),
                None,
            ),
            "can_cancel": not detail["terminal"],
            "can_redrive": detail["state"] == "DEAD_LETTER",
        },
    )


async def task_json(request: web.Request) -> web.Response:
    ctx = ctx_of(request)
    task_id = _uuid(request.match_info["task_id"])
    if task_id is None:
        return web.json_response({"error": "not found"}, status=404)
    try:
        task, rows, _ = await _task_and_history(ctx, task_id)
    except ApiError as exc:
        if exc.not_found or exc.code.name == "INVALID_ARGUMENT":
            return web.json_response({"error": "not found"}, status=404)
        raise
    return web.json_response(
        {"task": fmt.task_detail(task), "timeline": rows, "attempts": fmt.attempts(rows)}
    )


async def _act(request: web.Request, action: str) -> web.StreamResponse:
    ctx = ctx_of(request)
    task_id = _uuid(request.match_info["task_id"])
    if task_id is None:
        return await not_found(request, "This task")
    api = ctx.api
    try:
        if action == "cancel":
            await api.call(
                api.scheduler.CancelTask, pb.CancelTaskRequest(task_id=task_id), ctx.metadata
            )
            ctx.session.flash("info", "Cancel requested.")
        else:
            await api.call(
                api.scheduler.RedriveTask, pb.RedriveTaskRequest(task_id=task_id), ctx.metadata
            )
            ctx.session.flash("info", "Redriven: the task is scheduled to run now.")
    except ApiError as exc:
        if exc.not_found:
            return await not_found(request, "This task")
        if exc.unauthenticated:
            raise
        ctx.session.flash("error", f"{action} refused: {exc}")
    raise redirect(ctx.url(f"/tasks/{task_id}"))


async def cancel(request: web.Request) -> web.StreamResponse:
    return await _act(request, "cancel")


async def redrive(request: web.Request) -> web.StreamResponse:
    return await _act(request, "redrive")


# -- bulk ------------------------------------------------------------------------------

_ACTIONS = {"cancel": pb.BULK_ACTION_CANCEL, "redrive": pb.BULK_ACTION_REDRIVE}


async def bulk_plan(request: web.Request) -> web.StreamResponse:
    """POST action + filter: plan it, keep the plan, show its confirm page (PRG)."""
    ctx = ctx_of(request)
    form = await request.post()
    action = str(form.get("action", ""))
    if action not in _ACTIONS:
        return await error_page(request, 400, "Bad request", "action: must be cancel or redrive")
    try:
        f = parse_filter(form)  # type: ignore[arg-type]
    except FilterError as exc:
        return await error_page(request, 400, "Bad request", str(exc))
    api = ctx.api
    try:
        plan = await api.call(
            api.scheduler.PlanBulkAction,
            pb.PlanBulkActionRequest(action=_ACTIONS[action], filter=task_filter_message(f)),
            ctx.metadata,
        )
    except ApiError as exc:
        if exc.unavailable:
            return await error_page(
                request, 501, "Bulk actions not available", "This server has no bulk actions."
            )
        if exc.unauthenticated:
            raise
        return await error_page(request, 400, "Bulk action refused", str(exc))
    key = ctx.session.remember_plan(
        {
            "tenant": ctx.tenant,
            "action": fmt.action_name(plan.action),
            "count": plan.count,
            "filter": fmt.task_filter(plan.filter),
            "plan_token": plan.plan_token,
            "planned_at": fmt.ts(plan, "planned_at"),
            "expires_at": fmt.ts(plan, "expires_at"),
            "result": None,
        }
    )
    raise redirect(ctx.url(f"/bulk/confirm/{key}"))


def _plan(ctx: Ctx, key: str) -> dict[str, Any] | None:
    return ctx.session.plans.get(key)


async def bulk_confirm(request: web.Request) -> web.StreamResponse:
    ctx = ctx_of(request)
    key = request.match_info["key"]
    plan = _plan(ctx, key)
    if plan is None:
        return await not_found(request, "This bulk plan")
    if plan["result"] is not None:
        raise redirect(ctx.url(f"/bulk/result/{key}"))
    return await render(
        request, "bulk_confirm.html", {"title": "Confirm bulk action", "plan": plan, "key": key}
    )


async def bulk_run(request: web.Request) -> web.StreamResponse:
    """POST the plan token (only): run it once; a second POST shows the first result."""
    ctx = ctx_of(request)
    form = await request.post()
    token = str(form.get("plan_token", ""))
    found = [(k, p) for k, p in ctx.session.plans.items() if p["plan_token"] == token]
    if not token or not found:
        return await error_page(request, 400, "Bad request", "plan_token: not a plan shown here")
    key, plan = found[0]
    if plan["result"] is None:
        api = ctx.api
        try:
            ran = await api.call(
                api.scheduler.RunBulkAction,
                pb.RunBulkActionRequest(plan_token=token),
                ctx.metadata,
            )
        except ApiError as exc:
            if exc.unauthenticated:
                raise
            return await error_page(request, 400, "Bulk action refused", str(exc))
        plan["result"] = {
            "action": fmt.action_name(ran.action),
            "filter": fmt.task_filter(ran.filter),
            "matched": ran.matched,
            "changed": ran.changed,
        }
    raise redirect(ctx.url(f"/bulk/result/{key}"))


async def bulk_result(request: web.Request) -> web.StreamResponse:
    ctx = ctx_of(request)
    plan = _plan(ctx, request.match_info["key"])
    if plan is None or plan["result"] is None:
        return await not_found(request, "This bulk result")
    return await render(request, "bulk_result.html", {"title": "Bulk action done", "plan": plan})
