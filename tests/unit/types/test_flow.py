"""The pure rules of flow control at submission (``scheduler/types/_flow.py``)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from scheduler._errors import InvalidArgument
from scheduler.limits import MAX_FLOW_KEY_CHARS, flow_key, flow_key_ok
from scheduler.types import (
    Debounce,
    FlowOptions,
    IdempotencyScope,
    Throttle,
    check_flow,
    debounced_due,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _refused(flow: FlowOptions, field: str, *, key: bool = False) -> None:
    with pytest.raises(InvalidArgument) as err:
        check_flow(flow, "task", idempotency_key=key)
    assert err.value.field == field


@pytest.mark.parametrize(
    ("debounce", "field"),
    [
        (Debounce(key="", period_s=1), "task.debounce.key"),
        (Debounce(key="k" * 129, period_s=1), "task.debounce.key"),
        (Debounce(key="k", period_s=-1), "task.debounce.period_s"),
        (Debounce(key="k", period_s=0), "task.debounce.period_s"),
        (Debounce(key="k", period_s=float("inf")), "task.debounce.period_s"),
        (Debounce(key="k", period_s=8 * 86_400), "task.debounce.period_s"),
        (Debounce(key="k", period_s=2, max_delay_s=1), "task.debounce.max_delay_s"),
        (Debounce(key="k", period_s=2, max_delay_s=-1), "task.debounce.max_delay_s"),
    ],
)
def test_bad_debounce_names_the_field(debounce: Debounce, field: str) -> None:
    _refused(FlowOptions(debounce=debounce), field)


def test_bad_combinations_name_the_field() -> None:
    d, t = Debounce(key="k", period_s=1), Throttle(key="k", period_s=1)
    _refused(FlowOptions(debounce=d, throttle=t), "task.throttle")
    _refused(FlowOptions(debounce=d), "task.idempotency_key", key=True)
    _refused(FlowOptions(throttle=t), "task.idempotency_key", key=True)
    _refused(FlowOptions(throttle=Throttle(key="k", period_s=0)), "task.throttle.period_s")
    _refused(FlowOptions(idempotency_ttl_s=60), "task.idempotency_ttl_s")
    _refused(FlowOptions(idempotency_ttl_s=-1), "task.idempotency_ttl_s", key=True)
    until = IdempotencyScope.UNTIL_FINISHED
    _refused(FlowOptions(idempotency_scope=until), "task.idempotency_scope")


def test_good_options_pass() -> None:
    check_flow(
        FlowOptions(debounce=Debounce(key="k", period_s=1, max_delay_s=1)),
        "t",
        idempotency_key=False,
    )
    check_flow(FlowOptions(idempotency_ttl_s=60), "t", idempotency_key=True)


def test_the_debounced_due_time_is_capped_by_the_first_submission() -> None:
    d = Debounce(key="k", period_s=1.0, max_delay_s=3.0)
    assert debounced_due(T0, T0, d) == T0 + timedelta(seconds=1)
    assert debounced_due(T0 + timedelta(seconds=2.5), T0, d) == T0 + timedelta(seconds=3)
    # past the cap (nothing dispatched it yet): due now, never in the past
    late = T0 + timedelta(seconds=5)
    assert debounced_due(late, T0, d) == late
    uncapped = Debounce(key="k", period_s=1.0)
    assert debounced_due(late, T0, uncapped) == late + timedelta(seconds=1)


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("", "required"),
        ("k" * 129, "longer than 128 characters"),
        ("a\x00b", "must not contain NUL"),
        (7, "must be a string"),
    ],
)
def test_one_flow_key_check_names_each_field(value: object, problem: str) -> None:
    """Every flow key (concurrency, rate limit, debounce, throttle) has one bound and
    one check (``limits.flow_key``); the error names the caller's field."""
    for field in ("task.concurrency_key", "tasks[2].rate_limit_key", "limit.key"):
        with pytest.raises(InvalidArgument) as err:
            flow_key(value, field)
        assert (err.value.field, err.value.problem) == (field, problem)
    assert not flow_key_ok(value)
    assert flow_key("k" * MAX_FLOW_KEY_CHARS, "f") == "k" * 128
    assert flow_key_ok("acme")
