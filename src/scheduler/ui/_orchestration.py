"""The schedules (next fire times, pause and resume), workflows (the list, and one
workflow's DAG with each node's state) and expectations (the watchdog's status) pages.
"""

from __future__ import annotations

import uuid
from typing import Any

from aiohttp import web

from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from scheduler.ui import _format as fmt
from scheduler.ui._api import ApiError
from scheduler.ui._dag import MAX_DRAWN, layout
from scheduler.ui._web import Ctx, ctx_of, not_found, redirect, render


async def schedules_data(ctx: Ctx) -> dict[str, Any]:
    section = await ctx.api.section(
        ctx.api.scheduler.ListSchedules, pb.ListSchedulesRequest(), ctx.metadata
    )
    rows = [fmt.schedule(s) for s in section.value.schedules] if section.ok else []
    return {"section": section, "schedules": rows}


async def schedules(request: web.Request) -> web.Response:
    data = await schedules_data(ctx_of(request))
    return await render(request, "schedules.html", {"title": "Schedules", **data})


async def schedules_json(request: web.Request) -> web.Response:
    data = await schedules_data(ctx_of(request))
    return web.json_response({"schedules": data["schedules"], "error": data["section"].error})


async def _toggle(request: web.Request, pause: bool) -> web.StreamResponse:
    ctx = ctx_of(request)
    try:
        schedule_id = str(uuid.UUID(request.match_info["schedule_id"]))
    except ValueError:
        return await not_found(request, "This schedule")
    api = ctx.api
    try:
        if pause:
            await api.call(
                api.scheduler.PauseSchedule,
                pb.PauseScheduleRequest(schedule_id=schedule_id),
                ctx.metadata,
            )
        else:
            await api.call(
                api.scheduler.ResumeSchedule,
                pb.ResumeScheduleRequest(schedule_id=schedule_id),
                ctx.metadata,
            )
        ctx.session.flash("info", "Schedule paused." if pause else "Schedule resumed.")
    except ApiError as exc:
        if exc.not_found:
            return await not_found(request, "This schedule")
        if exc.unauthenticated:
            raise
        ctx.session.flash("error", f"refused: {exc}")
    raise redirect(ctx.url("/schedules"))


async def pause(request: web.Request) -> web.StreamResponse:
    return await _toggle(request, True)


async def resume(request: web.Request) -> web.StreamResponse:
    return await _toggle(request, False)


async def workflows(request: web.Request) -> web.Response:
    ctx = ctx_of(request)
    section = await ctx.api.section(
        ctx.api.scheduler.ListWorkflows, pb.ListWorkflowsRequest(limit=200), ctx.metadata
    )
    rows = (
        [
            {
                "id": w.id,
                "name": w.name,
                "node_count": w.node_count,
                "created_at": fmt.ts(w, "created_at"),
                "policy": pb.UpstreamPolicy.Name(w.on_upstream_failure).removeprefix(
                    "UPSTREAM_POLICY_"
                ),
            }
            for w in section.value.workflows
        ]
        if section.ok
        else []
    )
    return await render(
        request, "workflows.html", {"title": "Workflows", "section": section, "workflows": rows}
    )


async def workflow_data(ctx: Ctx, workflow_id: str) -> dict[str, Any]:
    got = await ctx.api.call(
        ctx.api.scheduler.GetWorkflow, pb.GetWorkflowRequest(workflow_id=workflow_id), ctx.metadata
    )
    nodes = [(n.id, fmt.state_name(n.task.state), n.task.id) for n in got.nodes]
    edges = [(e.parent, e.child) for e in got.edges]
    states: dict[str, int] = {}
    for _, state, _ in nodes:
        states[state] = states.get(state, 0) + 1
    return {
        "workflow": {
            "id": got.workflow.id,
            "name": got.workflow.name,
            "node_count": got.workflow.node_count,
            "created_at": fmt.ts(got.workflow, "created_at"),
        },
        "nodes": [
            {
                "id": n.id,
                "state": fmt.state_name(n.task.state),
                "task_id": n.task.id,
                "type": n.task.type,
                "last_error": n.task.last_error,
                "parents": [e.parent for e in got.edges if e.child == n.id],
            }
            for n in got.nodes
        ],
        "edges": [{"parent": p, "child": c} for p, c in edges],
        "states": states,
        "layout": layout(nodes, edges) if len(nodes) <= MAX_DRAWN else None,
    }


async def workflow(request: web.Request) -> web.StreamResponse:
    ctx = ctx_of(request)
    try:
        workflow_id = str(uuid.UUID(request.match_info["workflow_id"]))
        data = await workflow_data(ctx, workflow_id)
    except ValueError:
        return await not_found(request, "This workflow")
    except ApiError as exc:
        if exc.not_found or exc.code.name == "INVALID_ARGUMENT":
            return await not_found(request, "This workflow")
        raise
    return await render(
        request,
        "workflow.html",
        {"title": f"Workflow {data['workflow']['name'] or workflow_id}", **data},
    )


async def workflow_json(request: web.Request) -> web.Response:
    ctx = ctx_of(request)
    try:
        workflow_id = str(uuid.UUID(request.match_info["workflow_id"]))
        data = await workflow_data(ctx, workflow_id)
    except ValueError:
        return web.json_response({"error": "not found"}, status=404)
    except ApiError as exc:
        if exc.not_found or exc.code.name == "INVALID_ARGUMENT":
            return web.json_response({"error": "not found"}, status=404)
        raise
    data.pop("layout")
    return web.json_response(data)


async def expectations_data(ctx: Ctx) -> dict[str, Any]:
    section = await ctx.api.section(
        ctx.api.scheduler.ListExpectations, pb.ListExpectationsRequest(), ctx.metadata
    )
    rows = [fmt.expectation(e) for e in section.value.expectations] if section.ok else []
    return {"section": section, "expectations": rows}


async def expectations(request: web.Request) -> web.Response:
    data = await expectations_data(ctx_of(request))
    return await render(request, "expectations.html", {"title": "Expectations", **data})


async def expectations_json(request: web.Request) -> web.Response:
    data = await expectations_data(ctx_of(request))
    return web.json_response({"expectations": data["expectations"], "error": data["section"].error})
