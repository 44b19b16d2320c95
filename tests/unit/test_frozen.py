"""``scheduler._frozen.fast_init``: every class it is applied to builds the same object
as the dataclass's own ``__init__``, with the same parameters, defaults and errors."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

import scheduler.engine
import scheduler.types
from scheduler._frozen import APPLIED, STOCK_INIT, fast_init

CLASSES = sorted(APPLIED, key=lambda c: c.__qualname__)


def _fields(cls: type) -> list[dataclasses.Field[Any]]:
    return list(dataclasses.fields(cls))  # type: ignore[arg-type]


def _stock(cls: type, *args: Any, **kwargs: Any) -> Any:
    obj = object.__new__(cls)
    getattr(cls, STOCK_INIT)(obj, *args, **kwargs)
    return obj


def _call(cls: type, values: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
    """``values`` as the arguments the class takes (positional fields positionally)."""
    args = [values[f.name] for f in _fields(cls) if not f.kw_only and f.name in values]
    kwargs = {f.name: values[f.name] for f in _fields(cls) if f.kw_only and f.name in values}
    return args, kwargs


def test_it_is_applied_to_the_types_built_per_task() -> None:
    names = {c.__name__ for c in APPLIED}
    assert {
        "TaskRecord",
        "NewTask",
        "InsertResult",
        "DispatchRequest",
        "Assignment",
        "FencedWrite",
        "Completion",
        "SubmitSpec",
        "CompleteResult",
    } <= names
    assert scheduler.types.TaskRecord in APPLIED


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_every_field_is_set_as_the_dataclass_sets_it(cls: type) -> None:
    values = {f.name: object() for f in _fields(cls)}  # a distinct object per field
    args, kwargs = _call(cls, values)
    fast, stock = cls(*args, **kwargs), _stock(cls, *args, **kwargs)
    for f in _fields(cls):
        assert getattr(fast, f.name) is values[f.name] is getattr(stock, f.name)
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(fast, _fields(cls)[0].name, None)


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_defaults_are_the_dataclass_defaults(cls: type) -> None:
    required = {
        f.name: object()
        for f in _fields(cls)
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    }
    args, kwargs = _call(cls, required)
    fast, stock = cls(*args, **kwargs), _stock(cls, *args, **kwargs)
    for f in _fields(cls):
        if f.default_factory is dataclasses.MISSING:
            assert getattr(fast, f.name) is getattr(stock, f.name)
        else:  # a fresh object from the factory for each
            assert getattr(fast, f.name) == getattr(stock, f.name)
            assert getattr(fast, f.name) is not getattr(cls(*args, **kwargs), f.name)


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_the_same_calls_are_refused(cls: type) -> None:
    values = {f.name: object() for f in _fields(cls)}
    args, kwargs = _call(cls, values)
    bad_calls: list[tuple[list[Any], dict[str, Any]]] = [
        (args, {**kwargs, "no_such_field": 1}),  # an unknown keyword
        ([*args, object()], kwargs),  # one positional too many
    ]
    first = _fields(cls)[0]
    if first.default is first.default_factory is dataclasses.MISSING:  # a required one left out
        # by keyword, so the others do not shift into its place
        bad_calls.append(([], {k: v for k, v in values.items() if k != first.name}))
    for bad_args, bad_kwargs in bad_calls:
        with pytest.raises(TypeError):
            _stock(cls, *bad_args, **bad_kwargs)
        with pytest.raises(TypeError):
            cls(*bad_args, **bad_kwargs)


def test_what_it_cannot_do_exactly_is_refused() -> None:
    @dataclasses.dataclass(frozen=True)
    class NoSlots:
        a: int

    @dataclasses.dataclass(frozen=True, slots=True)
    class NotInInit:
        a: int = dataclasses.field(default=0, init=False)

    @dataclasses.dataclass(frozen=True, slots=True)
    class PostInit:
        a: int

        def __post_init__(self) -> None:
            pass

    @dataclasses.dataclass(slots=True)
    class NotFrozen:
        a: int

    for cls in (NoSlots, NotInInit, PostInit, NotFrozen):
        with pytest.raises(TypeError):
            fast_init(cls)
