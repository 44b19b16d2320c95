"""The overview and forecast pages and their live JSON.

Overview: CountTasks (by state and pool), GetActivity (throughput and lateness over
the last minutes), ListWorkers (the workers, and the overdue tasks none of them takes)
a forecast of the next hour (with the tasks flow rules hold) and the dispatch pauses
(ListDispatchPauses, issue 43). Forecast: GetForecast
by second or minute, per pool, firing (after jitter) against nominal (before).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from aiohttp import web
from google.protobuf.timestamp_pb2 import Timestamp

from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from scheduler.ui import _format as fmt
from scheduler.ui._api import Section
from scheduler.ui._web import Ctx, ctx_of, render

ACTIVITY_WINDOW_S = 600
ACTIVITY_BUCKET_S = 10
FORECAST_SHAPES = {60: 60, 1: 300}
"""Buckets per width: the next hour by minute, the next five minutes by second."""


def _shown(section: Section, convert: Any) -> dict[str, Any]:
    """A section as JSON: its figures, or why there are none."""
    if section.unavailable:
        return {"available": False, "error": None, "data": None}
    if section.error:
        return {"available": True, "error": section.error, "data": None}
    return {"available": True, "error": None, "data": convert(section.value)}


async def overview_data(ctx: Ctx) -> dict[str, Any]:
    api, md = ctx.api, ctx.metadata
    count, act, work, fore, paused = await asyncio.gather(
        api.section(api.scheduler.CountTasks, pb.CountTasksRequest(), md),
        api.section(
            api.scheduler.GetActivity,
            pb.GetActivityRequest(window_s=ACTIVITY_WINDOW_S, bucket_s=ACTIVITY_BUCKET_S),
            md,
        ),
        api.section(api.scheduler.ListWorkers, pb.ListWorkersRequest(), md),
        api.section(
            api.scheduler.GetForecast,
            pb.GetForecastRequest(start=aligned_start(60), bucket_s=60, buckets=60),
            md,
        ),
        api.section(api.scheduler.ListDispatchPauses, pb.ListDispatchPausesRequest(), md),
    )
    return {
        "counts": _shown(count, fmt.counts),
        "activity": _shown(act, fmt.activity),
        "workers": _shown(work, fmt.workers),
        "unserved": _shown(work, fmt.unserved),
        "forecast": _shown(fore, fmt.forecast),
        "pauses": _shown(paused, fmt.pauses),
        "states": list(fmt.STATES),
        "pools": list(fmt.POOLS),
    }


async def overview(request: web.Request) -> web.Response:
    ctx = ctx_of(request)
    data = await overview_data(ctx)
    return await render(request, "overview.html", {"title": "Overview", "data": data})


async def overview_json(request: web.Request) -> web.Response:
    return web.json_response(await overview_data(ctx_of(request)))


def _forecast_params(request: web.Request) -> tuple[int, list[str]]:
    try:
        bucket = int(request.query.get("bucket", "60") or 60)
    except ValueError:
        bucket = 0
    if bucket not in FORECAST_SHAPES:
        raise web.HTTPBadRequest(text="bucket: must be 60 or 1")
    pools = [p.upper() for p in request.query.getall("pool", []) if p]
    for p in pools:
        if p not in fmt.POOLS:
            raise web.HTTPBadRequest(text=f"pool: {p!r} is not one of {', '.join(fmt.POOLS)}")
    return bucket, pools


def aligned_start(bucket_s: int) -> Timestamp:
    """Now, rounded down to a whole bucket: buckets start on whole seconds or minutes,
    so a task asked for 12:00:00 falls in the bucket that says 12:00:00."""
    now = int(time.time())
    return Timestamp(seconds=now - now % bucket_s)


async def forecast_data(ctx: Ctx, bucket: int, pools: list[str]) -> dict[str, Any]:
    request = pb.GetForecastRequest(
        start=aligned_start(bucket),
        bucket_s=bucket,
        buckets=FORECAST_SHAPES[bucket],
        pools=[fmt.pool_value(p) for p in pools],
    )
    section = await ctx.api.section(ctx.api.scheduler.GetForecast, request, ctx.metadata)
    return {"forecast": _shown(section, fmt.forecast), "bucket": bucket, "selected": pools}


async def forecast(request: web.Request) -> web.Response:
    ctx = ctx_of(request)
    bucket, pools = _forecast_params(request)
    data = await forecast_data(ctx, bucket, pools)
    return await render(
        request,
        "forecast.html",
        {"title": "Forecast", "data": data, "all_pools": fmt.POOLS},
    )


async def forecast_json(request: web.Request) -> web.Response:
    ctx = ctx_of(request)
    bucket, pools = _forecast_params(request)
    return web.json_response(await forecast_data(ctx, bucket, pools))
