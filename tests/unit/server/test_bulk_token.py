"""The bulk plan token: round trip, and every malformed form answers INVALID_ARGUMENT
naming ``plan_token`` (never an exception of its own)."""

from __future__ import annotations

import base64
import dataclasses
import json
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from scheduler._errors import InvalidArgument
from scheduler.server._bulk import Plan, decode_plan, encode_plan
from scheduler.states import TaskState
from scheduler.types import Pool

NOW = datetime(2026, 3, 10, 12, 0, 0, 123456, tzinfo=UTC)
PLAN = Plan(
    tenant_id=uuid.uuid4(),
    action="cancel",
    states=(TaskState.SCHEDULED, TaskState.RUNNING),
    type="email",
    pools=(Pool.CRITICAL,),
    scheduled_from=NOW - timedelta(days=1),
    scheduled_to=None,
    planned_at=NOW,
    expires_at=NOW + timedelta(minutes=15),
)


def _b64(doc: object) -> str:
    return base64.urlsafe_b64encode(json.dumps(doc).encode()).decode().rstrip("=")


def test_round_trip() -> None:
    token = encode_plan(PLAN)
    assert not set(token) & set("=+/")
    assert decode_plan(token) == PLAN


def _doc(**kw: object) -> dict[str, object]:
    doc = json.loads(base64.urlsafe_b64decode(encode_plan(PLAN) + "=="))
    doc.update(kw)
    return doc


@pytest.mark.parametrize(
    "token",
    [
        "",
        "not a token",
        "A" * 5000,
        _b64([1, 2]),
        _b64(_doc(v=2)),
        _b64(_doc(a="delete")),
        _b64(_doc(s=["DEAD_LETTER"])),  # not a state cancel applies to
        _b64(_doc(s=[])),
        _b64(_doc(t="nope")),
        _b64(_doc(p=["huge"])),
        _b64(_doc(at="yesterday")),
        _b64(_doc(x=True)),
        _b64(_doc(x=10**30)),
        _b64(_doc(y=5)),
        _b64({k: v for k, v in _doc().items() if k != "x"}),
    ],
)
def test_malformed_tokens_name_the_field(token: str) -> None:
    with pytest.raises(InvalidArgument) as err:
        decode_plan(token)
    assert err.value.field == "plan_token"


def test_a_redrive_plan_carries_only_dead_letter() -> None:
    plan = dataclasses.replace(PLAN, action="redrive", states=(TaskState.DEAD_LETTER,))
    assert decode_plan(encode_plan(plan)).states == (TaskState.DEAD_LETTER,)
