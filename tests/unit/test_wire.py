"""The hand-written wire encoders' pieces (``scheduler.wire``) against protobuf's own."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest
from google.protobuf import timestamp_pb2, wrappers_pb2

from scheduler.wire import timestamp_bytes, varint


def _reference_varint(n: int) -> bytes:
    """A UInt64Value's value field is tag 0x08 then the varint."""
    return wrappers_pb2.UInt64Value(value=n).SerializeToString()[1:]


def test_varint_matches_protobuf_at_every_boundary() -> None:
    rng = random.Random(7)
    values = [*range(20_000)]
    values += [2**k + d for k in range(12, 64) for d in (-1, 0, 1)]
    values += [rng.getrandbits(64) for _ in range(5_000)]
    for n in values:
        if n == 0:
            continue  # proto3 leaves a zero out of the message
        assert varint(n) == _reference_varint(n), n
    assert varint(0) == b"\x00"


def test_a_negative_varint_is_refused() -> None:
    with pytest.raises(ValueError, match="range"):
        varint(-1)


def test_timestamp_bytes_match_protobuf() -> None:
    rng = random.Random(11)
    now = datetime(2026, 12, 5, tzinfo=UTC)
    instants = [now + timedelta(microseconds=rng.getrandbits(42)) for _ in range(20_000)]
    instants += [
        datetime(1970, 1, 1, tzinfo=UTC),
        datetime(1970, 1, 1, 0, 0, 0, 1, tzinfo=UTC),
        datetime(1970, 1, 1, 0, 0, 1, tzinfo=UTC),
        datetime(9999, 12, 31, 23, 59, 59, 999_999, tzinfo=UTC),
    ]
    for dt in instants:
        ts = timestamp_pb2.Timestamp()
        ts.FromDatetime(dt)
        want = ts.SerializeToString()
        assert timestamp_bytes(dt) == bytes([len(want)]) + want, dt
