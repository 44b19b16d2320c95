"""The wire vocabulary the server and both SDKs share: proto enum tables, trailer keys.

Each table maps a domain enum to its proto value and back; the ``_FROM_PROTO`` tables
hold only the values a peer may send on purpose (a side that accepts UNSPECIFIED as a
default adds that mapping itself: the server for requests, the SDKs by a fallback).
The error details (``google.rpc.Status`` in the ``grpc-status-details-bin`` trailer)
are built and read here too, so server and client share one format. Imports the
generated messages, the googleapis error protos and the domain enums only (no grpc).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, cast

from google.rpc import error_details_pb2, status_pb2

from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from scheduler._wellknown import timestamp_parts
from scheduler.jitter import JitterMode
from scheduler.states import TaskState
from scheduler.types import OverlapPolicy, Pool, UpstreamPolicy

POOL_TO_PROTO: Mapping[Pool, pb.Pool] = {
    Pool.CRITICAL: pb.POOL_CRITICAL,
    Pool.STANDARD: pb.POOL_STANDARD,
    Pool.BULK: pb.POOL_BULK,
}
POOL_FROM_PROTO: Mapping[int, Pool] = {v: k for k, v in POOL_TO_PROTO.items()}

JITTER_TO_PROTO: Mapping[JitterMode, pb.JitterMode] = {
    JitterMode.SYMMETRIC: pb.JITTER_MODE_SYMMETRIC,
    JitterMode.LATE_ONLY: pb.JITTER_MODE_LATE_ONLY,
    JitterMode.NONE: pb.JITTER_MODE_NONE,
}
JITTER_FROM_PROTO: Mapping[int, JitterMode] = {v: k for k, v in JITTER_TO_PROTO.items()}

STATE_TO_PROTO: Mapping[TaskState, pb.TaskState] = {
    s: cast(pb.TaskState, pb.TaskState.Value(f"TASK_STATE_{s.value}")) for s in TaskState
}
STATE_FROM_PROTO: Mapping[int, TaskState] = {v: k for k, v in STATE_TO_PROTO.items()}

UPSTREAM_TO_PROTO: Mapping[UpstreamPolicy, pb.UpstreamPolicy] = {
    UpstreamPolicy.CANCEL: pb.UPSTREAM_POLICY_CANCEL,
    UpstreamPolicy.CONTINUE: pb.UPSTREAM_POLICY_CONTINUE,
}
UPSTREAM_FROM_PROTO: Mapping[int, UpstreamPolicy] = {v: k for k, v in UPSTREAM_TO_PROTO.items()}

OVERLAP_TO_PROTO: Mapping[OverlapPolicy, pb.OverlapPolicy] = {
    OverlapPolicy.SKIP: pb.OVERLAP_POLICY_SKIP,
    OverlapPolicy.ALLOW: pb.OVERLAP_POLICY_ALLOW,
    OverlapPolicy.BUFFER_ONE: pb.OVERLAP_POLICY_BUFFER_ONE,
}
OVERLAP_FROM_PROTO: Mapping[int, OverlapPolicy] = {v: k for k, v in OVERLAP_TO_PROTO.items()}


def _varint_slow(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


SMALL_VARINTS = [_varint_slow(n) for n in range(1 << 12)]
"""Varints of the values below 4096 (almost every length on the wire), looked up."""
_LOW14 = [bytes(((n & 0x7F) | 0x80, ((n >> 7) & 0x7F) | 0x80)) for n in range(1 << 14)]
"""The first two bytes of the varint of a value of 2**14 or more, by its low 14 bits."""


def varint(n: int) -> bytes:
    """The base-128 varint of a non-negative int (the hand-written wire encoders: a
    submit, both ways, and the worker stream's Results)."""
    if 0 <= n < 4096:
        return SMALL_VARINTS[n]
    if n < 16384:
        return _varint_slow(n)  # a negative int: ValueError there
    return _LOW14[n & 0x3FFF] + varint(n >> 14)


_TIMESTAMPS: dict[datetime, bytes] = {}
""":func:`timestamp_bytes` by instant (a batch's tasks share a few; a datetime keeps
its hash, so a repeat costs one lookup)."""


def timestamp_bytes(dt: datetime) -> bytes:
    """A ``google.protobuf.Timestamp`` field's value on the wire, length first (put its
    tag before it), for a datetime after the epoch (``scheduler.limits``; a naive one is
    taken as UTC, as :func:`~scheduler._wellknown.timestamp_parts` does)."""
    out = _TIMESTAMPS.get(dt)
    if out is None:
        seconds, nanos = timestamp_parts(dt)
        body = (b"\x08" + varint(seconds) if seconds else b"") + (
            b"\x10" + varint(nanos) if nanos else b""
        )
        if len(_TIMESTAMPS) >= 4096:
            _TIMESTAMPS.clear()
        out = _TIMESTAMPS[dt] = SMALL_VARINTS[len(body)] + body
    return out


SHARED_PARTS = 1024
"""Distinct shared parts a wire encoder remembers per batch (a batch has a handful)."""


def shared_part(
    cache: dict[Any, bytes], key: Any, build: Callable[..., bytes], *args: Any
) -> bytes:
    """The encoded part a batch's items with ``key`` share: ``cache[key]``, or
    ``build(*args)`` remembered there (up to :data:`SHARED_PARTS` keys; an unhashable key is
    built each time). Callers compare ``key`` with the previous item's first, which
    spares the hash for a run of items that share the same objects."""
    try:
        found = cache.get(key)
    except TypeError:  # an unhashable part (a retry policy holding a list)
        return build(*args)
    if found is None:
        found = build(*args)
        if len(cache) < SHARED_PARTS:
            cache[key] = found
    return found


JSON_HEADER = "x-tickwheel-json"
"""Call metadata key: with the value ``bytes`` a unary call's answers carry JSON values
(payload, result, checkpoint) in their ``*_json`` bytes fields instead of Structs."""

STATUS_DETAILS_KEY = "grpc-status-details-bin"
"""Trailing metadata key of the standard ``google.rpc.Status`` (binary)."""
ERROR_DOMAIN = "tickwheel.dev"
"""``ErrorInfo.domain`` of every Tickwheel error."""


def error_reason(class_name: str) -> str:
    """``ErrorInfo.reason`` of an error class: ``StaleFencingToken`` -> ``STALE_FENCING_TOKEN``."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", class_name).upper()


def _text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)


def status_details(
    code: int,
    message: str,
    class_name: str,
    fields: Mapping[str, object],
    kind: str | None = None,
) -> bytes:
    """The serialised ``google.rpc.Status`` of an error: ErrorInfo always (``reason``
    from ``class_name``), BadRequest for an invalid argument (``field`` and ``problem``),
    QuotaFailure for an exhausted limit (``limit`` and ``detail``). ``kind`` chooses
    the detail when it differs from ``class_name``."""
    kind = kind or class_name
    status = status_pb2.Status(code=code, message=message)
    info = error_details_pb2.ErrorInfo(
        reason=error_reason(class_name),
        domain=ERROR_DOMAIN,
        metadata={k: _text(v) for k, v in fields.items()},
    )
    status.details.add().Pack(info)
    if kind == "InvalidArgument":
        bad = error_details_pb2.BadRequest()
        bad.field_violations.add(
            field=_text(fields.get("field")), description=_text(fields.get("problem"))
        )
        status.details.add().Pack(bad)
    elif kind == "ResourceExhausted":
        quota = error_details_pb2.QuotaFailure()
        quota.violations.add(
            subject=_text(fields.get("limit")), description=_text(fields.get("detail"))
        )
        status.details.add().Pack(quota)
    return cast(bytes, status.SerializeToString())


def error_info(details: bytes) -> error_details_pb2.ErrorInfo | None:
    """The Tickwheel ErrorInfo inside a serialised ``google.rpc.Status``, or None."""
    try:
        status = status_pb2.Status.FromString(details)
    except Exception:  # not a Status at all: no typed error
        return None
    for any_ in status.details:
        if any_.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            any_.Unpack(info)
            if info.domain == ERROR_DOMAIN:
                return info
    return None
