"""The wire vocabulary the server and both SDKs share: proto enum tables, trailer keys.

Each table maps a domain enum to its proto value and back; the ``_FROM_PROTO`` tables
hold only the values a peer may send on purpose (a side that accepts UNSPECIFIED as a
default adds that mapping itself: the server for requests, the SDKs by a fallback).
Imports the generated messages and the domain enums only (no grpc).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import cast

from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
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

ERROR_TYPE_KEY = "tickwheel-error-type"
"""Trailing metadata key: the error's class name."""
ERROR_FIELDS_KEY = "tickwheel-error-fields"
"""Trailing metadata key: the error's constructor arguments as a JSON object."""
