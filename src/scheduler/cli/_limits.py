"""The server-protection flags of ``serve`` and ``dev`` (docs/keys.md): each has a
``TICKWHEEL_*`` env var and its default in :mod:`scheduler.limits`.

:func:`server_limit_options` adds them to a command and hands the command one
``limits`` argument, a mapping of :class:`~scheduler.server.ServerConfig` field names to
values. Used by ``_serve``; calls only click.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import click

from scheduler import limits as lim

F = TypeVar("F", bound=Callable[..., Any])

LIMIT_FLAGS: tuple[tuple[str, type, float, str], ...] = (
    (
        "max_streams_per_tenant",
        int,
        lim.MAX_STREAMS_PER_TENANT,
        "Open worker streams per tenant on this node (RESOURCE_EXHAUSTED past it).",
    ),
    (
        "max_inflight_calls_per_key",
        int,
        lim.MAX_INFLIGHT_CALLS_PER_KEY,
        "Unary calls of one API key served at once (RESOURCE_EXHAUSTED past it).",
    ),
    (
        "auth_failures_per_source",
        int,
        lim.AUTH_FAILURES_PER_SOURCE,
        "Failed authentications one address may make in the window before it is throttled.",
    ),
    (
        "auth_failure_window_s",
        float,
        lim.AUTH_FAILURE_WINDOW_S,
        "The window failed authentications are counted over.",
    ),
    (
        "auth_throttle_s",
        float,
        lim.AUTH_THROTTLE_S,
        "How long a throttled address is refused without a key look-up.",
    ),
    (
        "stream_key_recheck_s",
        float,
        lim.STREAM_KEY_RECHECK_S,
        "How often an open worker stream re-checks its API key (revocation bound).",
    ),
)
"""(ServerConfig field, type, default, help) of every flag; the flag is the field with
dashes, the env var ``TICKWHEEL_`` and the field in capitals."""


def server_limit_options(fn: F) -> F:
    """Add the limit flags; the command receives them as one ``limits`` mapping."""
    names = [name for name, *_ in LIMIT_FLAGS]

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        kwargs["limits"] = {name: kwargs.pop(name) for name in names}
        return fn(*args, **kwargs)

    command: Any = wrapper
    for name, kind, default, text in reversed(LIMIT_FLAGS):
        command = click.option(
            "--" + name.replace("_", "-"),
            name,
            envvar="TICKWHEEL_" + name.upper(),
            type=kind,
            default=default,
            show_default=True,
            show_envvar=True,
            help=text,
        )(command)
    return command  # type: ignore[no-any-return]
