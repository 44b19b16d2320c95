"""Structured log lines: the task fields a line carries, and the JSON formatter.

Owns the names of the fields a log line about a task carries (:data:`FIELDS`: task id,
tenant, fencing token, worker id, trace id), the context variable that binds them for
a stretch of code (:func:`bind`: the worker SDK binds its worker id for its whole run
and a task's fields for the run of its handler, so the handler's own lines carry them
too), :class:`ContextFields` (the filter that copies the bound fields onto each
record), :class:`JsonFormatter` (one JSON object per line) and :func:`configure` (what
the CLI's ``--log-format`` / ``--log-level`` install on the root logger).

A log call outside a bound stretch passes its fields explicitly with
``extra=task_extra(...)``; an explicit field wins over a bound one. An application
that embeds the SDKs and configures logging itself adds ``ContextFields()`` to its
handler and, for JSON, ``JsonFormatter()``.

Calls nothing in Tickwheel; used by the engine, the server, the worker SDK and the CLI.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import logging
import sys
import uuid
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from typing import Any, Literal, Protocol

FIELDS = ("task_id", "tenant_id", "fencing_token", "worker_id", "trace_id")
"""The task fields a line may carry, in the order the JSON object lists them."""

LogFormat = Literal["text", "json"]
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
"""The plain-text line (the default)."""


class FieldSource(Protocol):
    """Something that knows its fields, asked only when a line is logged (binding it
    costs one context-variable set, whatever the fields cost to compute)."""

    def log_fields(self) -> Mapping[str, object]:
        """The fields, as :func:`task_extra` returns them."""
        ...


_Source = Mapping[str, object] | FieldSource
_bound: contextvars.ContextVar[tuple[_Source, ...]] = contextvars.ContextVar(
    "tickwheel_log_fields", default=()
)


def trace_id_of(traceparent: str | None) -> str | None:
    """The trace id of a W3C ``traceparent`` (``00-<32 hex>-<16 hex>-<flags>``)."""
    if not traceparent:
        return None
    parts = traceparent.split("-")
    if len(parts) < 4 or len(parts[1]) != 32 or parts[1] == "0" * 32:
        return None
    return parts[1]


def task_extra(
    *,
    task_id: uuid.UUID | str | None = None,
    tenant_id: uuid.UUID | str | None = None,
    fencing_token: int | None = None,
    worker_id: str | None = None,
    trace_id: str | None = None,
) -> dict[str, object]:
    """The fields given (not None, not empty), for ``extra=`` or :func:`bind`."""
    out: dict[str, object] = {}
    if task_id is not None:
        out["task_id"] = str(task_id)
    if tenant_id is not None:
        out["tenant_id"] = str(tenant_id)
    if fencing_token is not None:
        out["fencing_token"] = int(fencing_token)
    if worker_id:
        out["worker_id"] = worker_id
    if trace_id:
        out["trace_id"] = trace_id
    return out


def bind_fields(fields: _Source) -> contextvars.Token[tuple[_Source, ...]]:
    """Add ``fields`` (a mapping, or a :class:`FieldSource`) to the bound ones of the
    current context; a task of its own keeps them to itself. Undo with :func:`unbind`."""
    return _bound.set((*_bound.get(), fields))


def unbind(token: contextvars.Token[tuple[_Source, ...]]) -> None:
    """Undo one :func:`bind_fields`."""
    _bound.reset(token)


@contextlib.contextmanager
def bind(**fields: object) -> Iterator[None]:
    """The fields (None dropped) on every line logged in this block of this context."""
    token = bind_fields({k: v for k, v in fields.items() if v is not None})
    try:
        yield
    finally:
        unbind(token)


def bound() -> dict[str, object]:
    """The fields bound in the current context (a later binding wins)."""
    out: dict[str, object] = {}
    for source in _bound.get():
        out.update(source if isinstance(source, Mapping) else source.log_fields())
    return out


class ContextFields(logging.Filter):
    """Copies the bound fields onto each record that does not set them itself."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not _bound.get():
            return True
        for key, value in bound().items():
            if key not in record.__dict__:
                setattr(record, key, value)
        return True


def _rfc3339(created: float) -> str:
    return datetime.fromtimestamp(created, UTC).isoformat(timespec="microseconds")[:-6] + "Z"


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ``time`` (RFC 3339, UTC), ``level``, ``logger``,
    ``message``, then each of :data:`FIELDS` the record has, then ``exc_info`` /
    ``stack_info`` as text when present. A newline in a message stays inside its
    JSON string, so a line is always one whole object."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "time": _rfc3339(record.created),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        attrs = record.__dict__
        for key in FIELDS:
            value = attrs.get(key)
            if value is not None and value != "":
                out[key] = value
        if record.exc_info:
            out["exc_info"] = self.formatException(record.exc_info)
        elif record.exc_text:
            out["exc_info"] = record.exc_text
        if record.stack_info:
            out["stack_info"] = self.formatStack(record.stack_info)
        return json.dumps(out, default=str, ensure_ascii=False)


class _Stderr(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever ``sys.stderr`` is at the time of the line (a test runner
    swaps it per command)."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    def emit(self, record: logging.LogRecord) -> None:
        self.stream = sys.stderr
        super().emit(record)


_format: dict[str, LogFormat] = {"current": "text"}


def current_format() -> LogFormat:
    """The format :func:`configure` set last (``text`` until it is called)."""
    return _format["current"]


def json_notice(logger: str, message: str) -> bool:
    """In JSON mode, write ``message`` to stderr as one INFO line of ``logger``
    whatever the level (a command's own always-shown notice, such as the port it
    serves on); whether it did (in text mode the caller prints it its own way)."""
    if _format["current"] != "json":
        return False
    record = logging.LogRecord(logger, logging.INFO, "", 0, message, None, None)
    ContextFields().filter(record)
    sys.stderr.write(JsonFormatter().format(record) + "\n")
    sys.stderr.flush()
    return True


def configure(level: int, fmt: LogFormat = "text") -> None:
    """The root logger at ``level``, writing ``fmt`` lines to stderr through one
    handler of ours (replaced on each call; other handlers are left alone)."""
    root = logging.getLogger()
    for h in list(root.handlers):
        if isinstance(h, _Stderr):
            root.removeHandler(h)
    handler = _Stderr()
    handler.addFilter(ContextFields())
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(TEXT_FORMAT))
    root.addHandler(handler)
    root.setLevel(level)
    _format["current"] = fmt
