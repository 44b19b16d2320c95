"""Struct <-> JSON object: integral numbers come back as ints, every JSON kind survives
the wire, and an empty Struct is an empty dict."""

from __future__ import annotations

from typing import Any

import pytest
from google.protobuf import struct_pb2

from scheduler._structs import dict_to_struct, struct_to_dict

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
