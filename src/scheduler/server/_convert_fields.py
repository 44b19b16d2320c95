"""Proto <-> engine conversion of the scalars and JSON values every request carries: ids,
timestamps, pools, states, trace contexts, Structs and their ``_json`` bytes twins.

Each function raises :class:`~scheduler._errors.InvalidArgument` naming the field with
its full path; ``_convert.py`` re-exports every public name (``conv.parse_uuid``).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from google.protobuf import struct_pb2, timestamp_pb2

from scheduler import jsonbytes, wire
from scheduler._errors import InvalidArgument
from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from scheduler._wellknown import dict_to_struct, struct_to_dict, timestamp, utc_datetime
from scheduler.ids import uuid_of_bytes
from scheduler.limits import (
    MAX_JSON_DEPTH,
    MAX_RESULT_BYTES,
    MAX_TIMESTAMP_SECONDS,
    MIN_TIMESTAMP_SECONDS,
    TIMESTAMP_RANGE_TEXT,
)
from scheduler.states import TaskState
from scheduler.types import JSON, Pool, RawJSON

_TRACEPARENT = re.compile(r"^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}\Z")
_TYPE_CHARS = re.compile(r"^[\x21-\x7e]+\Z")
_POOL_TO_PROTO = wire.POOL_TO_PROTO
_POOL_FROM_PROTO: Mapping[int, Pool] = {**wire.POOL_FROM_PROTO, pb.POOL_UNSPECIFIED: Pool.STANDARD}
_STATE_TO_PROTO = wire.STATE_TO_PROTO
_STATE_FROM_PROTO = wire.STATE_FROM_PROTO
_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\Z")
"""The canonical text form of a UUID (8-4-4-4-12 hex digits), the only one accepted:
``uuid.UUID`` also takes braces, a ``urn:uuid:`` prefix and 32 bare digits."""


def parse_uuid(value: str, field: str) -> uuid.UUID:
    """A UUID from its canonical text form; InvalidArgument naming ``field`` otherwise."""
    if not value:
        raise InvalidArgument(field, "required")
    if not _UUID.match(value):
        raise InvalidArgument(field, f"not a UUID in its 8-4-4-4-12 hex form: {value[:64]!r}")
    return uuid_of_bytes(bytes.fromhex(value.replace("-", "")))


def to_datetime(ts: timestamp_pb2.Timestamp, field: str) -> datetime:
    """A timezone-aware UTC datetime from a Timestamp inside the accepted range
    (``scheduler.limits``: after the epoch, before 9999-12-31)."""
    if not 0 <= ts.nanos < 1_000_000_000:
        raise InvalidArgument(field, "nanos must be 0..999999999")
    if not MIN_TIMESTAMP_SECONDS <= ts.seconds < MAX_TIMESTAMP_SECONDS:
        raise InvalidArgument(
            field, f"out of range: a Timestamp must be {TIMESTAMP_RANGE_TEXT} (UTC)"
        )
    return utc_datetime(ts)


def from_datetime(dt: datetime) -> timestamp_pb2.Timestamp:
    """A Timestamp from a timezone-aware datetime."""
    return timestamp(dt)


def pool_from_proto(value: int, field: str) -> Pool:
    """Pool enum; unspecified means standard."""
    try:
        return _POOL_FROM_PROTO[value]
    except KeyError:
        raise InvalidArgument(field, f"unknown pool {value}") from None


def filter_pool(value: int, field: str) -> Pool:
    """A pool a filter names: unspecified and unknown values are rejected."""
    try:
        return wire.POOL_FROM_PROTO[value]
    except KeyError:
        raise InvalidArgument(
            field, f"unknown pool {value} (POOL_CRITICAL, POOL_STANDARD or POOL_BULK)"
        ) from None


def pool_to_proto(pool: Pool) -> pb.Pool:
    """The proto pool."""
    return _POOL_TO_PROTO[pool]


def state_to_proto(state: TaskState) -> pb.TaskState:
    """The proto state."""
    return _STATE_TO_PROTO[state]


def state_from_proto(value: int, field: str) -> TaskState:
    """A task state; unspecified and unknown values are rejected."""
    try:
        return _STATE_FROM_PROTO[value]
    except KeyError:
        raise InvalidArgument(field, f"unknown task state {value}") from None


def trace_from_proto(tc: pb.TraceContext, field: str) -> JSON | None:
    """A validated W3C trace context, or None when traceparent is empty."""
    if not tc.traceparent:
        if tc.tracestate:
            raise InvalidArgument(f"{field}.traceparent", "required when tracestate is set")
        return None
    if not _TRACEPARENT.match(tc.traceparent):
        raise InvalidArgument(f"{field}.traceparent", "not a W3C traceparent")
    if len(tc.tracestate) > 512:
        raise InvalidArgument(f"{field}.tracestate", "longer than 512 characters")
    return {"traceparent": tc.traceparent, "tracestate": tc.tracestate}


def trace_from_metadata(metadata: Iterable[tuple[str, str | bytes]] | None) -> JSON | None:
    """W3C trace context from call metadata; an invalid header is ignored (W3C §3.2)."""
    traceparent = tracestate = ""
    for key, value in metadata or ():
        if isinstance(value, bytes):
            continue
        if key == "traceparent":
            traceparent = value.strip()
        elif key == "tracestate":
            tracestate = value.strip()
    if not _TRACEPARENT.match(traceparent):
        return None
    return {"traceparent": traceparent, "tracestate": tracestate[:512]}


def trace_to_proto(trace: JSON | None) -> pb.TraceContext:
    """Proto trace context (empty when none)."""
    if not trace:
        return pb.TraceContext()
    return pb.TraceContext(
        traceparent=str(trace.get("traceparent", "")),
        tracestate=str(trace.get("tracestate", "")),
    )


def _struct_of(value: JSON | RawJSON) -> struct_pb2.Struct:
    return dict_to_struct(jsonbytes.as_dict(value))


def _too_deep(value: Any, depth: int) -> bool:
    """Whether ``value`` (at nesting ``depth``) nests deeper than MAX_JSON_DEPTH."""
    if isinstance(value, dict):
        if depth > MAX_JSON_DEPTH:
            return True
        return any(_too_deep(v, depth + 1) for v in value.values())
    if isinstance(value, list):
        if depth > MAX_JSON_DEPTH:
            return True
        return any(_too_deep(v, depth + 1) for v in value)
    return False


DEPTH_PROBLEM = f"nested deeper than {MAX_JSON_DEPTH} levels (the limit of a JSON value)"
"""The error text of a Struct nested too deep (here and where a request cannot decode)."""


def json_of(value: struct_pb2.Struct, field: str) -> JSON:
    """A Struct as a JSON object; InvalidArgument naming ``field`` for a number JSON
    cannot hold (a Struct can carry NaN and the infinities) or nesting deeper than
    :data:`~scheduler.limits.MAX_JSON_DEPTH`."""
    try:
        data = struct_to_dict(value)
    except ValueError as exc:
        raise InvalidArgument(field, f"{exc}: NaN and infinities are not JSON") from None
    # Each level costs at least 4 bytes on the wire: a small Struct cannot be too deep.
    if value.ByteSize() > 4 * MAX_JSON_DEPTH and _too_deep(data, 1):
        raise InvalidArgument(field, DEPTH_PROBLEM)
    return data


def bounded_struct(value: struct_pb2.Struct, field: str) -> JSON:
    """A result or checkpoint as a dict, refused when over :data:`MAX_RESULT_BYTES`."""
    if value.ByteSize() > MAX_RESULT_BYTES:
        raise InvalidArgument(field, f"larger than {MAX_RESULT_BYTES} bytes")
    return json_of(value, field)


def json_field(
    struct: struct_pb2.Struct,
    data: bytes,
    field: str,
    limit_bytes: int = MAX_RESULT_BYTES,
) -> JSON | RawJSON:
    """A JSON object sent as a Struct (``field``) or as its bytes twin
    (``field``_json): the bytes checked and kept as text (``scheduler.jsonbytes``),
    the Struct read as a dict. Both set (a Struct with a field and non-empty bytes) is
    InvalidArgument naming the ``_json`` field."""
    if data:
        if struct.fields:
            name = field.rpartition(".")[2]
            raise InvalidArgument(f"{field}_json", f"set {name} or {name}_json, not both")
        return jsonbytes.raw(data, f"{field}_json", limit_bytes)
    if struct.ByteSize() > limit_bytes:
        raise InvalidArgument(field, f"larger than {limit_bytes} bytes")
    return json_of(struct, field)
