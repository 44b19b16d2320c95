"""Hypothesis strategies for protobuf messages, generated from their descriptors.

``messages(cls, fields)`` draws a message of ``cls`` with each field of its descriptor
set or left unset: the values of a field named in ``fields`` come from there, those of
every other field from its type (a nested message recursively, to ``depth``). A field
added to the proto is therefore drawn by every differential test without anyone
writing it in, and a name in ``fields`` that is not a field fails at once.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any, TypeVar

from google.protobuf import message_factory
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message
from hypothesis import strategies as st

M = TypeVar("M", bound=Message)

_I32 = st.integers(-(2**31), 2**31 - 1)
_I64 = st.integers(-(2**63), 2**63 - 1)
_SCALARS: dict[int, st.SearchStrategy[Any]] = {
    FieldDescriptor.TYPE_DOUBLE: st.floats(allow_nan=True, allow_infinity=True),
    FieldDescriptor.TYPE_FLOAT: st.floats(width=32, allow_nan=False),
    FieldDescriptor.TYPE_INT64: _I64,
    FieldDescriptor.TYPE_SINT64: _I64,
    FieldDescriptor.TYPE_SFIXED64: _I64,
    FieldDescriptor.TYPE_UINT64: st.integers(0, 2**64 - 1),
    FieldDescriptor.TYPE_FIXED64: st.integers(0, 2**64 - 1),
    FieldDescriptor.TYPE_INT32: _I32,
    FieldDescriptor.TYPE_SINT32: _I32,
    FieldDescriptor.TYPE_SFIXED32: _I32,
    FieldDescriptor.TYPE_UINT32: st.integers(0, 2**32 - 1),
    FieldDescriptor.TYPE_FIXED32: st.integers(0, 2**32 - 1),
    FieldDescriptor.TYPE_BOOL: st.booleans(),
    FieldDescriptor.TYPE_STRING: st.text(max_size=40),
    FieldDescriptor.TYPE_BYTES: st.binary(max_size=40),
}


def _class(d: Descriptor) -> type[Message]:
    return message_factory.GetMessageClass(d)


def _is_map(f: FieldDescriptor) -> bool:
    return f.type == FieldDescriptor.TYPE_MESSAGE and f.message_type.GetOptions().map_entry


def _one(f: FieldDescriptor, depth: int) -> st.SearchStrategy[Any]:
    """One value of ``f``'s type (an element of a repeated field)."""
    if f.type == FieldDescriptor.TYPE_MESSAGE:
        if depth <= 0:
            return st.nothing()
        return messages(_class(f.message_type), depth=depth - 1)
    if f.type == FieldDescriptor.TYPE_ENUM:
        return st.sampled_from([v.number for v in f.enum_type.values])
    return _SCALARS[f.type]


def _values(f: FieldDescriptor, depth: int) -> st.SearchStrategy[Any]:
    """What ``f`` holds: a value, a list of them, or a dict for a map."""
    if _is_map(f):
        key, value = (f.message_type.fields_by_name[n] for n in ("key", "value"))
        return st.dictionaries(_one(key, depth), _one(value, depth), max_size=3)
    if f.is_repeated:
        return st.lists(_one(f, depth), max_size=3)
    return _one(f, depth)


def _set(msg: Message, f: FieldDescriptor, value: Any) -> None:
    if _is_map(f):
        target = getattr(msg, f.name)
        for k, v in value.items():
            if isinstance(v, Message):
                target[k].CopyFrom(v)
            else:
                target[k] = v
    elif f.is_repeated:
        getattr(msg, f.name).extend(value)
    elif f.type == FieldDescriptor.TYPE_MESSAGE:
        getattr(msg, f.name).CopyFrom(value)
    else:
        setattr(msg, f.name, value)


def messages(
    cls: type[M],
    fields: Mapping[str, st.SearchStrategy[Any]] | None = None,
    *,
    only: Collection[str] | None = None,
    rare: Collection[str] = (),
    always: Collection[str] = (),
    depth: int = 2,
) -> st.SearchStrategy[M]:
    """Messages of ``cls``, each field set or not. ``fields``: the values of the fields
    named (None drawn: unset); ``only``: the fields ever set (None: all); ``rare``: set
    about one time in four instead of one in two; ``always``: always set."""
    d: Descriptor = cls.DESCRIPTOR
    given = dict(fields or {})
    unknown = (set(given) | set(only or ()) | set(rare) | set(always)) - set(d.fields_by_name)
    if unknown:
        raise ValueError(f"{d.full_name} has no field {sorted(unknown)}")
    parts: dict[str, st.SearchStrategy[Any]] = {}
    for f in d.fields:
        if only is not None and f.name not in only:
            continue
        value = given[f.name] if f.name in given else _values(f, depth)
        unset: list[st.SearchStrategy[Any]] = [st.none()] * (3 if f.name in rare else 1)
        parts[f.name] = value if f.name in always else st.one_of(*unset, value)

    def build(values: dict[str, Any]) -> M:
        msg = cls()
        for name, value in values.items():
            if value is not None:
                _set(msg, d.fields_by_name[name], value)
        return msg

    return st.fixed_dictionaries(parts).map(build)


def native_fields(wire_fields: Mapping[str, Any], message: str) -> frozenset[str]:
    """The fields a codec's ``WIRE_FIELDS`` says it reads natively for ``message``."""
    native, _general = wire_fields[message]
    return frozenset(native)
