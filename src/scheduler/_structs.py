"""``google.protobuf.Struct`` <-> JSON objects, for every payload, result and checkpoint.

Struct keeps every number as a double; integral ones come back as ``int``, the way a
JSON user expects ``payload["n"]`` to round-trip. An empty Struct (the common payload)
skips ``json_format`` altogether: it is converted once per submit, per assignment and
per completion, and ``MessageToDict`` costs about 1 µs even for nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from google.protobuf import json_format, struct_pb2

JSON = dict[str, Any]


def _normalise(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    if isinstance(value, dict):
        return {k: _normalise(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_normalise(v) for v in value]
    return value


def struct_to_dict(s: struct_pb2.Struct) -> JSON:
    """A JSON object from a Struct (integral numbers as ints)."""
    if not s.fields:
        return {}
    result: JSON = _normalise(json_format.MessageToDict(s))
    return result


def dict_to_struct(data: Mapping[str, Any] | None) -> struct_pb2.Struct:
    """A Struct from a JSON object (None -> empty); TypeError/ValueError for values JSON
    cannot hold."""
    s = struct_pb2.Struct()
    if data:
        s.update(dict(data))
    return s
