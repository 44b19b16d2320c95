"""JSON objects as bytes: the codec of the ``*_json`` proto fields (payload, result,
checkpoint) shared by the server and both SDKs.

A JSON object travels in one of two forms: a ``google.protobuf.Struct`` or its UTF-8
JSON text in a ``bytes`` twin (``payload_json``). The text form is validated once, on
the way in, by orjson (RFC 8259, UTF-8, no lone surrogates), then kept as
:class:`~scheduler.types.RawJSON` text: the store writes it into JSONB as it is, a
dispatch reads the stored JSONB's text back without parsing it, and the server hands
those bytes to a worker that asked for bytes. No Python dict is built on the server's
side of that path, except inside the validation itself (orjson builds one and drops
it: about a microsecond for a small object, against about 10 for a Struct's walk).

The checks are those of a Struct plus what PostgreSQL needs: one JSON object, nested
at most :data:`~scheduler.limits.MAX_JSON_DEPTH` levels, no ``\\u0000`` (JSONB cannot
hold NUL), within a size limit counted in bytes. Encoding a Python value the SDKs were
given keeps the Struct path's rules: NaN and the infinities are refused (orjson would
write them as ``null``), as is any value neither JSON nor a Struct can hold (a set, an
object); unlike a Struct, integers keep their precision (a Struct holds doubles).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import orjson

from scheduler._errors import InvalidArgument
from scheduler.limits import MAX_JSON_DEPTH
from scheduler.types import JSON, RawJSON

DEPTH_PROBLEM = f"nested deeper than {MAX_JSON_DEPTH} levels (the limit of a JSON value)"
"""The error text of a value nested too deep (the Struct path says the same)."""

DUMPS_OPTIONS = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS
"""What orjson would write for a datetime or a dataclass, a Struct cannot hold: passed
through to :func:`refuse`, as TypeError, like the Struct path."""


def refuse(value: Any) -> Any:
    """orjson's ``default``: a value JSON cannot hold is a TypeError."""
    raise TypeError(f"{type(value).__name__} is not a JSON value")


def too_deep(value: Any, depth: int = 1) -> bool:
    """Whether ``value`` (a dict or list at nesting ``depth``) nests deeper than
    MAX_JSON_DEPTH."""
    if isinstance(value, dict):
        if depth > MAX_JSON_DEPTH:
            return True
        return any(too_deep(v, depth + 1) for v in value.values())
    if isinstance(value, list):
        if depth > MAX_JSON_DEPTH:
            return True
        return any(too_deep(v, depth + 1) for v in value)
    return False


def _has_nul(value: Any) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any("\x00" in k or _has_nul(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_nul(v) for v in value)
    return False


def _non_finite(value: Any) -> bool:
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, Mapping):
        return any(_non_finite(v) for v in value.values())
    if isinstance(value, list | tuple):
        return any(_non_finite(v) for v in value)
    return False


def check(data: bytes, field: str, limit_bytes: int) -> JSON:
    """The JSON object ``data`` holds; InvalidArgument naming ``field`` when it is not
    UTF-8 JSON, not an object, over ``limit_bytes``, nested too deep or holds NUL."""
    if len(data) > limit_bytes:
        raise InvalidArgument(field, f"is {len(data)} bytes, over the {limit_bytes}-byte limit")
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise InvalidArgument(field, f"is not valid UTF-8 JSON: {exc}") from None
    if type(value) is not dict:
        raise InvalidArgument(field, f"must be a JSON object, not {type(value).__name__}")
    # Each level opens a bracket: fewer brackets than levels cannot be too deep, and
    # a NUL needs its escape. Both walks run only for the odd value that might fail.
    if data.count(b"{") + data.count(b"[") > MAX_JSON_DEPTH and too_deep(value):
        raise InvalidArgument(field, DEPTH_PROBLEM)
    if b"\\u0000" in data and _has_nul(value):
        raise InvalidArgument(field, "must not contain NUL characters (\\u0000)")
    return value


def raw(data: bytes, field: str, limit_bytes: int) -> RawJSON:
    """``data`` checked (:func:`check`) and kept as text for the store."""
    check(data, field, limit_bytes)
    return RawJSON(data.decode())


def dumps(value: Mapping[str, Any]) -> bytes:
    """A Python JSON object as compact UTF-8 JSON bytes. TypeError for a value JSON
    cannot hold (a set, a datetime, a non-string key), ValueError for NaN or an
    infinity: the Struct path's rules."""
    try:
        out = orjson.dumps(value, default=refuse, option=DUMPS_OPTIONS)
    except orjson.JSONEncodeError as exc:
        raise TypeError(str(exc)) from None
    # orjson writes NaN and the infinities as null: look for them only when it did.
    if b"null" in out and _non_finite(value):
        raise ValueError("NaN and infinities are not JSON numbers")
    return out


def to_bytes(value: JSON | RawJSON) -> bytes:
    """The bytes of a JSON object held either way (a stored text passes through)."""
    if isinstance(value, RawJSON):
        return value.encode()
    return dumps(value)


def loads(data: bytes | str) -> JSON:
    """A JSON object from bytes the server sent (trusted: it checked them)."""
    value = orjson.loads(data)
    if type(value) is not dict:
        raise ValueError(f"a JSON object was expected, not {type(value).__name__}")
    return value


def as_dict(value: JSON | RawJSON) -> JSON:
    """A JSON object as a dict, whichever way it is held."""
    if isinstance(value, RawJSON):
        return loads(value.encode())  # orjson reads exact str or bytes, not a subclass
    return value
