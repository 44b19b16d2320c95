"""Request decoding, the depth walker, bound page tokens and overflow-free jitter."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest
from google.protobuf import struct_pb2
from google.protobuf.internal.encoder import _VarintBytes

from scheduler._errors import InvalidArgument
from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from scheduler.engine._admission import shifted
from scheduler.server import _convert as conv
from scheduler.server._decode import decode, too_deep_field
from scheduler.states import TaskState
from scheduler.types import TaskFilter


def _ld(number: int, payload: bytes) -> bytes:
    return _VarintBytes((number << 3) | 2) + _VarintBytes(len(payload)) + payload


def _deep(levels: int) -> bytes:
    data = b""
    inner = struct_pb2.Struct()
    inner.fields["x"].number_value = 1
    data = inner.SerializeToString()
    for _ in range(levels - 1):
        data = _ld(1, b"\x0a\x01a" + _ld(2, _ld(5, data)))
    return data


def test_undecodable_bytes_name_the_message() -> None:
    with pytest.raises(InvalidArgument) as info:
        decode(pb.GetTaskRequest, _ld(1, b"\xff\xfe"))
    assert info.value.field == "request"
    assert "tickwheel.v1.GetTaskRequest" in info.value.problem


@pytest.mark.parametrize("levels", [33, 40, 500])
def test_too_deep_payload_names_the_field(levels: int) -> None:
    data = _ld(1, b"\x0a\x01t" + _ld(2, _deep(levels)))
    assert too_deep_field(pb.SubmitTaskRequest.DESCRIPTOR, data) == "task.payload"


def test_depth_walker_indexes_repeated_fields() -> None:
    spec = b"\x0a\x01t"
    data = _ld(1, spec) + _ld(1, spec + _ld(2, _deep(40)))
    assert too_deep_field(pb.SubmitTasksRequest.DESCRIPTOR, data) == "tasks[1].payload"
    shallow = _ld(1, spec + _ld(2, _deep(32)))
    assert too_deep_field(pb.SubmitTasksRequest.DESCRIPTOR, shallow) is None


def test_depth_limit_after_decoding() -> None:
    s = struct_pb2.Struct()
    value = s.fields["a"]
    for _ in range(39):
        value = value.list_value.values.add()
    value.number_value = 1
    with pytest.raises(InvalidArgument) as info:
        conv.json_of(s, "task.payload")
    assert info.value.field == "task.payload"
    assert "32" in info.value.problem


def test_page_token_is_bound_to_tenant_and_filter() -> None:
    tenant = uuid.uuid4()
    flt = TaskFilter(statuses=(TaskState.SCHEDULED,), type="t")
    token = conv.page_token_out(tenant, flt, "store-token")
    assert conv.page_token_in(tenant, flt, token) == "store-token"
    assert conv.page_token_out(tenant, flt, "") == ""
    for other_tenant, other in (
        (tenant, TaskFilter(type="t")),
        (tenant, TaskFilter(statuses=(TaskState.SCHEDULED,), type="u")),
        (uuid.uuid4(), flt),
    ):
        with pytest.raises(InvalidArgument, match="different filter"):
            conv.page_token_in(other_tenant, other, token)
    with pytest.raises(InvalidArgument, match="not a token"):
        conv.page_token_in(tenant, flt, "store-token")


@pytest.mark.parametrize(
    "value",
    [
        "{0190d6c4-0000-7000-8000-000000000000}",
        "0190d6c4000070008000000000000000",
        "urn:uuid:0190d6c4-0000-7000-8000-000000000000",
    ],
)
def test_only_canonical_uuids(value: str) -> None:
    with pytest.raises(InvalidArgument):
        conv.parse_uuid(value, "task_id")
    assert conv.parse_uuid("0190D6C4-0000-7000-8000-000000000000", "task_id") == uuid.UUID(
        "0190d6c4-0000-7000-8000-000000000000"
    )


def test_jitter_never_overflows() -> None:
    last = datetime.max.replace(tzinfo=UTC)
    assert shifted(last, 120_000) == last
    start = datetime(2030, 1, 1, tzinfo=UTC)
    assert shifted(start, 1000) == datetime(2030, 1, 1, 0, 0, 1, tzinfo=UTC)
