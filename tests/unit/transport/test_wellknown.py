"""Well-known types: Struct <-> JSON object (integral numbers come back as ints, every
JSON kind survives the wire, an empty Struct is an empty dict) and Timestamp <->
datetime (the same as the protobuf library's own conversions)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from google.protobuf import struct_pb2, timestamp_pb2

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


def test_a_timestamp_outside_datetime_range_overflows() -> None:
    with pytest.raises(OverflowError):
        utc_datetime(timestamp_pb2.Timestamp(seconds=400_000_000_000))
    with pytest.raises(OverflowError):
        utc_datetime(timestamp_pb2.Timestamp(seconds=-70_000_000_000))
