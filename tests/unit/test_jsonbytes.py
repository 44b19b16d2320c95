"""The JSON-bytes codec (``scheduler.jsonbytes``) and the server's use of it: what a
``*_json`` field accepts, what it refuses (naming the field), and that text passes
through to the store and to a worker unchanged."""

from __future__ import annotations

import math
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from scheduler import jsonbytes
from scheduler._errors import InvalidArgument
from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from scheduler._wellknown import dict_to_struct, struct_to_dict
from scheduler.client import _convert as cconv
from scheduler.jitter import JitterMode
from scheduler.limits import MAX_JSON_DEPTH
from scheduler.server import _convert as conv
from scheduler.states import TaskState
from scheduler.store import _validate
from scheduler.types import Assignment, Pool, RawJSON, TaskKey, TaskRecord
from tests.support.records import task_record

NOW = datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)


def _nested(levels: int) -> bytes:
    """A JSON object nested ``levels`` deep (the outermost object is level 1)."""
    return b'{"a":' * (levels - 1) + b"{}" + b"}" * (levels - 1)


# -- check ---------------------------------------------------------------------------


def test_a_json_object_is_accepted_and_kept_as_its_text() -> None:
    data = '{"n": 1, "s": "é", "l": [1, 2.5, null, true], "o": {}}'.encode()
    raw = jsonbytes.raw(data, "task.payload_json", 1024)
    assert type(raw) is RawJSON
    assert raw == data.decode()  # the very text, not a re-encoding
    assert jsonbytes.as_dict(raw) == {"n": 1, "s": "é", "l": [1, 2.5, None, True], "o": {}}


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (b"", "not valid UTF-8 JSON"),
        (b"{", "not valid UTF-8 JSON"),
        (b"{'a': 1}", "not valid UTF-8 JSON"),
        (b'{"a": NaN}', "not valid UTF-8 JSON"),
        (b'{"a": 1,}', "not valid UTF-8 JSON"),
        (b'{"a": "\xff"}', "not valid UTF-8 JSON"),
        (b'{"a": "\\ud800"}', "not valid UTF-8 JSON"),  # a lone surrogate
        (b"\xef\xbb\xbf{}", "not valid UTF-8 JSON"),  # a byte order mark
        (b"[1, 2]", "must be a JSON object, not list"),
        (b'"text"', "must be a JSON object, not str"),
        (b"null", "must be a JSON object, not NoneType"),
        (b'{"a": "x\\u0000y"}', "NUL"),
        (b'{"a\\u0000": 1}', "NUL"),
    ],
)
def test_bad_bytes_are_refused_naming_the_field(data: bytes, problem: str) -> None:
    with pytest.raises(InvalidArgument) as err:
        jsonbytes.check(data, "tasks[3].payload_json", 1024)
    assert err.value.field == "tasks[3].payload_json"
    assert problem in err.value.problem


def test_an_escaped_backslash_before_u0000_is_not_a_nul() -> None:
    assert jsonbytes.check(b'{"a": "\\\\u0000"}', "f", 1024) == {"a": "\\u0000"}


def test_the_size_limit_counts_bytes() -> None:
    data = orjson.dumps({"s": "é" * 100})  # 200 bytes of text in 100 characters
    assert jsonbytes.check(data, "f", len(data)) == {"s": "é" * 100}
    with pytest.raises(InvalidArgument) as err:
        jsonbytes.check(data, "result_json", len(data) - 1)
    assert err.value.field == "result_json"
    assert "limit" in err.value.problem


def test_nesting_is_limited_as_for_a_struct() -> None:
    assert jsonbytes.check(_nested(MAX_JSON_DEPTH), "f", 1 << 20)
    with pytest.raises(InvalidArgument) as err:
        jsonbytes.check(_nested(MAX_JSON_DEPTH + 1), "checkpoint.data_json", 1 << 20)
    assert err.value.field == "checkpoint.data_json"
    assert "nested deeper" in err.value.problem
    # Many brackets side by side are not deep.
    wide = orjson.dumps({f"k{i}": [{}] for i in range(100)})
    assert jsonbytes.check(wide, "f", 1 << 20)
    # Brackets inside strings are text.
    assert jsonbytes.check(orjson.dumps({"s": "[" * 100}), "f", 1 << 20)


# -- dumps ---------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_dumps_refuses_what_json_cannot_hold_like_a_struct(bad: float) -> None:
    with pytest.raises(ValueError, match="NaN"):
        jsonbytes.dumps({"a": [1, {"b": bad}]})
    with pytest.raises(ValueError, match="not a JSON number"):
        dict_to_struct({"a": [1, {"b": bad}]})  # the Struct path says the same


@pytest.mark.parametrize(
    "bad", [{1, 2}, datetime(2030, 1, 1, tzinfo=UTC), object(), b"bytes", {1: "int key"}]
)
def test_dumps_refuses_values_a_struct_refuses(bad: Any) -> None:
    with pytest.raises(TypeError):
        jsonbytes.dumps({"a": bad})
    with pytest.raises(TypeError):
        dict_to_struct({"a": bad})


def test_dumps_keeps_nulls_and_integers() -> None:
    assert jsonbytes.dumps({"a": None, "n": 2**60}) == b'{"a":null,"n":1152921504606846976}'


_keys = st.text(max_size=8).filter(lambda k: "\x00" not in k)
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53) + 1, max_value=2**53 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00")),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_keys, inner, max_size=4),
    max_leaves=20,
)


@given(st.dictionaries(_keys, json_values))
def test_dumps_then_check_round_trips_any_object(value: dict[str, Any]) -> None:
    data = jsonbytes.dumps(value)
    assert jsonbytes.check(data, "f", 1 << 30) == value
    assert jsonbytes.as_dict(jsonbytes.raw(data, "f", 1 << 30)) == value
    assert jsonbytes.to_bytes(value) == data


# -- the server's fields -------------------------------------------------------------


def _parse(spec: pb.TaskSpec) -> Any:
    return conv.spec_from_proto(spec, "tasks[2]", max_payload_bytes=64)


def test_a_spec_with_payload_json_carries_the_text() -> None:
    spec = _parse(pb.TaskSpec(type="t", payload_json=b'{"n": 1}'))
    assert type(spec.payload) is RawJSON
    assert spec.payload == '{"n": 1}'


def test_a_spec_with_a_struct_payload_still_works() -> None:
    spec = _parse(pb.TaskSpec(type="t", payload=dict_to_struct({"n": 1})))
    assert spec.payload == {"n": 1}


@pytest.mark.parametrize(
    ("spec", "field", "problem"),
    [
        (pb.TaskSpec(type="t", payload_json=b"{"), "tasks[2].payload_json", "not valid"),
        (pb.TaskSpec(type="t", payload_json=b"[]"), "tasks[2].payload_json", "object"),
        (
            pb.TaskSpec(type="t", payload_json=b'{"s": "' + b"x" * 64 + b'"}'),
            "tasks[2].payload_json",
            "limit",
        ),
        (
            pb.TaskSpec(type="t", payload=dict_to_struct({"a": 1}), payload_json=b"{}"),
            "tasks[2].payload_json",
            "not both",
        ),
    ],
)
def test_bad_payload_json_names_the_field(spec: pb.TaskSpec, field: str, problem: str) -> None:
    with pytest.raises(InvalidArgument) as err:
        _parse(spec)
    assert err.value.field == field
    assert problem in err.value.problem


def test_an_empty_struct_beside_bytes_is_not_both() -> None:
    spec = pb.TaskSpec(type="t", payload_json=b'{"n": 1}')
    spec.payload.SetInParent()  # some libraries always send the message field
    assert _parse(spec).payload == '{"n": 1}'


def test_completion_release_and_checkpoint_take_either_form() -> None:
    ref = pb.TaskRef(task_id=str(uuid.uuid4()), fencing_token=3)
    ref.scheduled_at.seconds = 1_900_000_000
    done = conv.completion_from_proto(pb.Completion(task=ref, result_json=b'{"ok":1}'), "c")
    assert done.result == '{"ok":1}'
    assert type(done.result) is RawJSON
    done = conv.completion_from_proto(
        pb.Completion(task=ref, result=dict_to_struct({"ok": 1})), "c"
    )
    assert done.result == {"ok": 1}
    rel = conv.release_from_proto(pb.Release(task=ref, checkpoint_json=b'{"row":9}'), "release")
    assert rel.checkpoint == '{"row":9}'
    assert conv.release_from_proto(pb.Release(task=ref), "release").checkpoint is None
    with pytest.raises(InvalidArgument) as err:
        conv.completion_from_proto(pb.Completion(task=ref, result_json=b"nope"), "items[1]")
    assert err.value.field == "items[1].result_json"
    with pytest.raises(InvalidArgument) as err:
        conv.json_field(dict_to_struct({"a": 1}), b"{}", "checkpoint.data")
    assert err.value.field == "checkpoint.data_json"


def _assignment(payload: Any, checkpoint: Any) -> Assignment:
    return Assignment(
        key=TaskKey(uuid.uuid4(), NOW),
        tenant_id=uuid.uuid4(),
        type="t",
        payload=payload,
        fencing_token=2,
        attempt=1,
        max_retries=3,
        due_at=NOW,
        lease_expires_at=NOW + timedelta(seconds=30),
        checkpoint=checkpoint,
        trace_context=None,
        pool=Pool.STANDARD,
        worker_id="w",
        timeout_s=0.0,
    )


def test_an_assignment_hands_the_stored_text_to_a_bytes_worker_unchanged() -> None:
    stored = RawJSON('{"b": 2, "a": [1, 2]}')  # JSONB's own spacing and key order
    msg = conv.assignment_to_proto(_assignment(stored, RawJSON('{"row": 7}')), json_bytes=True)
    assert msg.payload_json == b'{"b": 2, "a": [1, 2]}'
    assert msg.checkpoint_json == b'{"row": 7}'
    assert not msg.HasField("payload")
    assert not msg.HasField("checkpoint")
    # A Struct worker gets the same object as a Struct.
    msg = conv.assignment_to_proto(_assignment(stored, None))
    assert struct_to_dict(msg.payload) == {"b": 2, "a": [1, 2]}
    assert not msg.payload_json
    assert not msg.HasField("checkpoint")
    # The worker SDK reads either form.
    assert cconv.json_of(msg.payload, msg.payload_json, True) == {"b": 2, "a": [1, 2]}


def _record(**kw: Any) -> TaskRecord:
    """A COMPLETED task with JSON in its payload, result and checkpoint; ``kw`` set."""
    fields: dict[str, Any] = {
        "type": "t",
        "status": TaskState.COMPLETED,
        "scheduled_at": NOW,
        "due_at": NOW,
        "idempotency_key": "k",
        "shard_id": 1,
        "jitter_mode": JitterMode.NONE,
        "fencing_token": 1,
        "payload": {"n": 1},
        "result_payload": {"ok": True},
        "checkpoint": {"row": 4},
        "last_error": None,
        "worker_id": None,
        "created_at": NOW,
        "updated_at": NOW,
    }
    return task_record(**{**fields, **kw})


def test_a_task_answers_bytes_when_asked_and_structs_otherwise() -> None:
    rec = _record()
    msg = conv.task_to_proto(rec, json_bytes=True)
    assert orjson.loads(msg.payload_json) == {"n": 1}
    assert orjson.loads(msg.result_json) == {"ok": True}
    assert orjson.loads(msg.checkpoint_json) == {"row": 4}
    assert not msg.HasField("payload")
    assert not msg.HasField("result")
    msg = conv.task_to_proto(rec)
    assert struct_to_dict(msg.result) == {"ok": True}
    assert not msg.payload_json
    assert not msg.result_json
    # A submit answers with the request's own bytes.
    msg = conv.task_to_proto(_record(payload=RawJSON('{"n":1}')), b'{"n":1}')
    assert msg.payload_json == b'{"n":1}'
    task = cconv.task_from_proto(msg)
    assert task.payload == {"n": 1}
    assert task.result == {"ok": True}


def test_the_metadata_entry_asks_for_bytes() -> None:
    assert conv.wants_json_bytes((("x-api-key", "k"), ("x-tickwheel-json", "bytes")))
    assert not conv.wants_json_bytes((("x-tickwheel-json", "struct"),))
    assert not conv.wants_json_bytes(None)


def test_the_store_writes_checked_text_as_it_is() -> None:
    raw = RawJSON('{"b": 1, "a": 2}')
    assert _validate.json_object("payload", raw, 1024) is raw
    with pytest.raises(InvalidArgument) as err:
        _validate.json_object("items[0].result", RawJSON('{"s": "' + "é" * 10 + '"}'), 20)
    assert err.value.field == "items[0].result"
