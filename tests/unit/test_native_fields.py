"""Each native codec's fields checked against the proto (issue 37).

Every Cython reader or writer exports ``WIRE_FIELDS``: per message, the fields it
handles with the tag it reads or writes each one by, and the fields it leaves to the
generated classes. Here every field of each message must be on exactly one side, each
tag must be the descriptor's (field number and wire type), and every tag the code
compares or writes must be one it declares, so a field added to the proto and not to a
codec fails here rather than passing its differential tests."""

from __future__ import annotations

import importlib
import re
from pathlib import Path
from types import ModuleType

import pytest
from google.protobuf import descriptor_pool, timestamp_pb2
from google.protobuf.descriptor import Descriptor, FieldDescriptor

from scheduler._proto.tickwheel.v1 import tickwheel_pb2

SRC = Path(__file__).resolve().parents[2] / "src"
CODECS = (
    "scheduler._pbread",
    "scheduler.server._submit_c",
    "scheduler.server._stream_c",
    "scheduler.client._tasks_c",
    "scheduler.worker._pushed_c",
)
_WIRE_TYPE = {
    FieldDescriptor.TYPE_DOUBLE: 1,
    FieldDescriptor.TYPE_FIXED64: 1,
    FieldDescriptor.TYPE_SFIXED64: 1,
    FieldDescriptor.TYPE_FLOAT: 5,
    FieldDescriptor.TYPE_FIXED32: 5,
    FieldDescriptor.TYPE_SFIXED32: 5,
    FieldDescriptor.TYPE_STRING: 2,
    FieldDescriptor.TYPE_BYTES: 2,
    FieldDescriptor.TYPE_MESSAGE: 2,
}
"""Wire types other than varint (0)."""

# The tags a codec's code uses, as literals: compared with ``tag``, or written.
_LITERAL = re.compile(
    r"tag\s*[!=]=\s*(0x[0-9A-Fa-f]+|\d+)"
    r"|_put_(?:varint|uuid|field_bytes|timestamp)\(&?\w+, (0x[0-9A-Fa-f]+|\d+)\)?"
    r"|\.append\((0x[0-9A-Fa-f]+)\)"
    r'|bytearray\(b"\\x([0-9a-fA-F]{2})'
)


def _descriptor(name: str) -> Descriptor:
    assert tickwheel_pb2.DESCRIPTOR is not None  # registered in the default pool
    assert timestamp_pb2.DESCRIPTOR is not None
    return descriptor_pool.Default().FindMessageTypeByName(name)


def _tag(field: FieldDescriptor) -> int:
    return field.number << 3 | _WIRE_TYPE.get(field.type, 0)


def _module(name: str) -> ModuleType:
    return importlib.import_module(name)


@pytest.mark.parametrize("codec", CODECS)
def test_every_field_is_native_or_left_to_the_general_path(codec: str) -> None:
    fields = _module(codec).WIRE_FIELDS
    assert fields, codec
    for message, (native, general) in fields.items():
        names = {f.name for f in _descriptor(message).fields}
        assert not set(native) & set(general), (codec, message)
        assert set(native) | set(general) == names, (
            f"{codec}: {message} fields not declared: {sorted(names - set(native) - set(general))}"
            f"; declared but not in the proto: {sorted((set(native) | set(general)) - names)}"
        )


@pytest.mark.parametrize("codec", CODECS)
def test_every_tag_is_the_descriptors(codec: str) -> None:
    for message, (native, _general) in _module(codec).WIRE_FIELDS.items():
        by_name = _descriptor(message).fields_by_name
        for name, tag in native.items():
            field = by_name[name]
            assert tag == _tag(field), (
                f"{codec}: {message}.{name} is field {field.number}, tag {_tag(field):#x}, "
                f"not {tag:#x}"
            )


@pytest.mark.parametrize("codec", CODECS)
def test_the_code_uses_only_declared_tags(codec: str) -> None:
    """Each tag literal in the codec's source is one of the tags it declares, and each
    declared tag appears in the source (what the export says is what the code does)."""
    source = (SRC / (codec.replace(".", "/") + ".pyx")).read_text()
    used: set[int] = set()
    for m in _LITERAL.finditer(source):
        *literals, prefix = m.groups()
        used.add(int(prefix, 16) if prefix else int(next(g for g in literals if g), 0))
    used.discard(0)  # ``_once``'s "malformed, unknown or repeated", no field's tag
    declared = {t for native, _ in _module(codec).WIRE_FIELDS.values() for t in native.values()}
    assert used <= declared, (
        f"{codec}: tags in the code but not declared: {sorted(used - declared)}"
    )
    assert declared <= used, f"{codec}: declared but not in the code: {sorted(declared - used)}"


def test_every_native_codec_is_listed() -> None:
    found = {
        ".".join(p.relative_to(SRC).with_suffix("").parts)
        for p in (SRC / "scheduler").rglob("*.pyx")
    }
    assert found == set(CODECS)
