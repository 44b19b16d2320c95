"""The worker's OpenTelemetry span: one CONSUMER span per attempt.

The task's trace context (captured at submission, hours or days earlier) arrives with
the assignment. The span is parented on the server's dispatch span when the server
records one (else on the submission context), and always *linked* to the submission
context, so a tracing UI shows the whole path from the user's click to the result.
Uses opentelemetry-api only: without an SDK ``TracerProvider`` every call is a no-op.

May call: opentelemetry-api. Called by: the handler runner (one span per attempt).
"""

from __future__ import annotations

from collections.abc import Mapping

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Link, Span, SpanKind, Tracer, TracerProvider
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from scheduler.worker._context import TaskContext

_W3C = TraceContextTextMapPropagator()
TRACER_NAME = "tickwheel.worker"


def context_from(carrier: Mapping[str, str] | None) -> Context | None:
    """An OpenTelemetry context from a ``{"traceparent", "tracestate"}`` dict, or None
    when it holds no valid span context."""
    if not carrier or not carrier.get("traceparent"):
        return None
    ctx = _W3C.extract({k: v for k, v in carrier.items() if v})
    if not trace.get_current_span(ctx).get_span_context().is_valid:
        return None
    return ctx


def tracing_off(provider: TracerProvider | None) -> bool:
    """Whether no SDK records spans (no ``provider`` given and none installed yet):
    the worker then skips building spans it would throw away (a few µs a task)."""
    current = provider if provider is not None else trace.get_tracer_provider()
    return isinstance(current, trace.ProxyTracerProvider | trace.NoOpTracerProvider)


def worker_tracer(provider: TracerProvider | None) -> Tracer:
    """The SDK's tracer (the global provider's, late-bound, when ``provider`` is None)."""
    return trace.get_tracer(TRACER_NAME, tracer_provider=provider)


def start_attempt_span(
    tracer: Tracer, ctx: TaskContext, dispatch_context: Mapping[str, str] | None
) -> Span:
    """Start (not activate) the CONSUMER span of one attempt."""
    submit = context_from(ctx.trace_context)
    parent = context_from(dispatch_context) or submit
    links = []
    if submit is not None:
        links.append(
            Link(
                trace.get_current_span(submit).get_span_context(),
                {"tickwheel.link": "submit"},
            )
        )
    return tracer.start_span(
        f"tickwheel.process {ctx.type}",
        context=parent,
        kind=SpanKind.CONSUMER,
        links=links,
        attributes={
            "messaging.system": "tickwheel",
            "messaging.operation.type": "process",
            "tickwheel.task_id": str(ctx.task_id),
            "tickwheel.task_type": ctx.type,
            "tickwheel.attempt": ctx.attempt,
            "tickwheel.fencing_token": ctx.fencing_token,
            "tickwheel.resumed": ctx.checkpoint_data is not None,
        },
    )
