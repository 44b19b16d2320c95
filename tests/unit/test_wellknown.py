"""Well-known types: Struct <-> JSON object (integral numbers come back as ints, every
JSON kind survives the wire, an empty Struct is an empty dict) and Timestamp <->
datetime (the same as the protobuf library's own conversions)."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from google.protobuf import json_format, struct_pb2, timestamp_pb2

from scheduler._wellknown import dict_to_struct, struct_to_dict, timestamp, utc_datetime

SAMPLES: list[dict[str, Any]] = [
    {},
    {"n": 1, "f": 1.5, "neg": -3, "huge": 1e300, "tiny": 5e-324},
    {"s": "héllo ✓", "empty": "", "t": True, "f": False, "none": None},
    {"nested": {"a": [1, "two", {"three": [3, None, []]}], "b": {}}},
    {"list": [[], [[]], [1, [2, [3]]]]},
]


@pytest.mark.parametrize("data", SAMPLES)
def test_round_trip_over_the_wire(data: dict[str, Any]) -> None:
    wire = struct_pb2.Struct.FromString(dict_to_struct(data).SerializeToString())
    assert struct_to_dict(wire) == data


def _reference(s: struct_pb2.Struct) -> Any:
    """What the protobuf library makes of a Struct, integral numbers as ints."""

    def normalise(value: Any) -> Any:
        if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
            return int(value)
        if isinstance(value, dict):
            return {k: normalise(v) for k, v in value.items()}
        if isinstance(value, list):
            return [normalise(v) for v in value]
        return value

    return normalise(json_format.MessageToDict(s))


@pytest.mark.parametrize("data", SAMPLES)
def test_the_same_result_as_the_protobuf_library(data: dict[str, Any]) -> None:
    s = dict_to_struct(data)
    assert struct_to_dict(s) == _reference(s)


@pytest.mark.parametrize("number", [math.nan, math.inf, -math.inf])
def test_a_number_json_cannot_hold_is_refused_as_the_protobuf_library_refuses_it(
    number: float,
) -> None:
    s = struct_pb2.Struct()
    s.fields["deep"].list_value.values.add().number_value = number
    with pytest.raises(ValueError, match="JSON"):
        struct_to_dict(s)
    with pytest.raises(ValueError, match="Fail to serialize"):
        _reference(s)


def test_a_value_with_no_kind_and_the_largest_exact_integers() -> None:
    s = struct_pb2.Struct()
    s.fields["unset"].CopyFrom(struct_pb2.Value())
    s.fields["limit"].number_value = 2.0**53
    s.fields["below"].number_value = 2.0**53 - 1
    got = struct_to_dict(s)
    assert got == _reference(s) == {"unset": None, "limit": 2.0**53, "below": 2**53 - 1}
    assert type(got["below"]) is int


@pytest.mark.parametrize("data", SAMPLES)
def test_the_same_struct_as_the_protobuf_library_makes(data: dict[str, Any]) -> None:
    reference = struct_pb2.Struct()
    reference.update(data)
    assert dict_to_struct(data) == reference


@pytest.mark.parametrize(
    ("data", "error"),
    [
        ({"n": math.nan}, ValueError),
        ({"deep": [{"x": -math.inf}]}, ValueError),
        ({"s": {1, 2}}, TypeError),
        ({"k": {1: "int key"}}, TypeError),
        ({"o": object()}, TypeError),
    ],
)
def test_a_value_json_cannot_hold_is_refused(data: dict[str, Any], error: type) -> None:
    with pytest.raises(error):
        dict_to_struct(data)


def test_integral_numbers_come_back_as_int() -> None:
    got = struct_to_dict(dict_to_struct({"n": 7.0, "x": 7.25, "big": 2.0**60}))
    assert got == {"n": 7, "x": 7.25, "big": 2.0**60}
    assert type(got["n"]) is int
    assert type(got["big"]) is float  # beyond 2**53 a double is not an exact integer


def test_none_and_empty_are_an_empty_struct() -> None:
    assert struct_to_dict(dict_to_struct(None)) == {}
    assert struct_to_dict(struct_pb2.Struct()) == {}


DATETIMES = [
    datetime(1970, 1, 1, tzinfo=UTC),
    datetime(2026, 12, 2, 16, 38, 14, 123456, tzinfo=UTC),
    datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),  # before the epoch
    datetime(1, 1, 1, tzinfo=UTC),
    datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
    datetime(2026, 3, 29, 2, 30, tzinfo=timezone(timedelta(hours=5, minutes=30))),
]


@pytest.mark.parametrize("dt", DATETIMES)
def test_timestamps_match_the_protobuf_library(dt: datetime) -> None:
    reference = timestamp_pb2.Timestamp()
    reference.FromDatetime(dt)
    assert timestamp(dt) == reference
    assert utc_datetime(reference) == reference.ToDatetime(tzinfo=UTC) == dt
    assert utc_datetime(reference).tzinfo is UTC


def test_a_naive_datetime_is_taken_as_utc_and_sub_microseconds_are_truncated() -> None:
    assert timestamp(datetime(2026, 1, 1)) == timestamp(datetime(2026, 1, 1, tzinfo=UTC))
    ts = timestamp_pb2.Timestamp(seconds=10, nanos=1_999)
    assert utc_datetime(ts) == datetime(1970, 1, 1, 0, 0, 10, 1, tzinfo=UTC)


@pytest.mark.parametrize("dt", DATETIMES)
def test_a_timestamp_written_in_place_is_the_same_and_present(dt: datetime) -> None:
    from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
    from scheduler._wellknown import set_timestamp

    reference = timestamp_pb2.Timestamp()
    reference.FromDatetime(dt)
    task = pb.Task()
    set_timestamp(task.scheduled_at, dt)
    assert task.HasField("scheduled_at")  # even at the epoch, where both parts are 0
    assert task.scheduled_at == reference


def test_remembered_timestamps_are_the_right_ones() -> None:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    for i in range(10_000):  # more distinct instants than are remembered
        dt = start + timedelta(seconds=i % 5_000, microseconds=i)
        reference = timestamp_pb2.Timestamp()
        reference.FromDatetime(dt)
        assert timestamp(dt) == reference


def test_remembered_datetimes_are_the_right_ones() -> None:
    # More distinct instants than are remembered: each still converts exactly.
    for i in range(10_000):
        ts = timestamp_pb2.Timestamp(seconds=1_700_000_000 + i % 5_000, nanos=i * 1_000)
        assert utc_datetime(ts) == ts.ToDatetime(tzinfo=UTC)


def test_a_timestamp_outside_datetime_range_overflows() -> None:
    with pytest.raises(OverflowError):
        utc_datetime(timestamp_pb2.Timestamp(seconds=400_000_000_000))
    with pytest.raises(OverflowError):
        utc_datetime(timestamp_pb2.Timestamp(seconds=-70_000_000_000))
