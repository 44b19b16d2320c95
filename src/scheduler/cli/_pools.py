"""The pool flags of ``serve`` (docs/flow-control.md, "Reservation"): each has a
``TICKWHEEL_*`` env var and its default in :class:`~scheduler.engine.EngineConfig`.

:func:`pool_options` adds them to a command and hands the command one ``pools_config``
argument, a mapping of EngineConfig field names to values. Used by ``_serve``; calls
click and ``SlotReserve.parse``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])


def parse_reserves(value: str | None) -> tuple[Any, ...]:
    """``--reserve`` as SlotReserve values; a bad one is a usage error naming the flag."""
    from scheduler.engine import SlotReserve

    if (value or "").strip().lower() in ("none", "off", "0"):
        return ()
    try:
        return SlotReserve.parse(value or "")
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--reserve") from None


def pool_options(fn: F) -> F:
    """Add ``--critical-reserved-slots``, ``--bulk-max-slots``, ``--reserve`` and
    ``--reserve-always``; the
    command receives them as one ``pools_config`` mapping."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        kwargs["pools_config"] = {
            "critical_reserved_slots": kwargs.pop("critical_reserved_slots"),
            "bulk_max_slots": kwargs.pop("bulk_max_slots"),
            "reserves": parse_reserves(kwargs.pop("reserve")),
            "reserve_linger_s": None if kwargs.pop("reserve_always") else 300.0,
        }
        return fn(*args, **kwargs)

    options = [
        click.option(
            "--critical-reserved-slots",
            envvar="TICKWHEEL_CRITICAL_RESERVED_SLOTS",
            type=click.IntRange(min=0),
            default=500,
            show_default=True,
            show_envvar=True,
            help="Slots of this node's workers that standard and bulk work may not grow "
            "into while a critical task waits (they may while none waits).",
        ),
        click.option(
            "--bulk-max-slots",
            envvar="TICKWHEEL_BULK_MAX_SLOTS",
            type=click.IntRange(min=0),
            default=150,
            show_default=True,
            show_envvar=True,
            help="Most bulk tasks on this node's workers at once.",
        ),
        click.option(
            "--reserve",
            envvar="TICKWHEEL_RESERVE",
            default="critical=10%",
            show_default=True,
            show_envvar=True,
            metavar="POOL=N|POOL=P%,...|none",
            help="Free slots every worker keeps idle for a pool, as a number or a share of "
            "its slots (e.g. critical=10%,standard=2; none: no reserve): a critical task "
            "then starts at once however long bulk tasks run. Held while the pool has "
            "work in sight (a task of it waiting, in the wheel, or due in the last 5 minutes).",
        ),
        click.option(
            "--reserve-always",
            envvar="TICKWHEEL_RESERVE_ALWAYS",
            is_flag=True,
            default=False,
            show_envvar=True,
            help="Hold the reserves at all times, not only while their pool has work in sight.",
        ),
    ]
    command: Any = wrapper
    for option in reversed(options):
        command = option(command)
    return command  # type: ignore[no-any-return]
