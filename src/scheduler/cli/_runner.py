"""How the CLI runs its coroutines and reaches a server: the event loop, the errors a
user sees, signals, the GC tuning of services, and connected clients.

Calls the client SDK; used by every command module (``_serve``, ``_tasks``,
``_worker``, ``_admin``, ``_watchdog``, ``_orchestration``, ``_dev``).
"""

from __future__ import annotations

import asyncio
import gc
import os
import re
import signal
import sqlite3
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import Any, Literal, NoReturn, TypeVar, cast

import click

from scheduler._errors import TickwheelError
from scheduler.client import AdminClient, Client, TLSConfig
from scheduler.client._tls import is_pem

T = TypeVar("T")


MIGRATE_HINT = "run `tickwheel migrate --postgres-dsn DSN` first"

_CONFIG_FIELD = re.compile(r"\b[A-Z]\w*Config\.(\w+)")


def flag_words(message: str) -> str:
    """A configuration error in the user's words: ``ServerConfig.admin_token`` (an
    internal class) becomes ``--admin-token`` (the flag that sets it)."""
    return _CONFIG_FIELD.sub(lambda m: "--" + m.group(1).replace("_", "-"), message)


def _postgres_hint(exc: BaseException) -> str | None:
    """PostgreSQL errors a user can fix, without importing asyncpg."""
    if not type(exc).__module__.startswith("asyncpg"):
        return None
    sqlstate = getattr(exc, "sqlstate", None)
    if sqlstate == "42P01":  # undefined_table: the schema was never created
        return f"the database has no Tickwheel schema ({exc}): {MIGRATE_HINT}"
    return f"PostgreSQL: {exc}"


def user_error(exc: BaseException) -> str | None:
    """The one line a user sees for a known error, or None for a bug (a traceback)."""
    from scheduler.cluster import LeaseHeld
    from scheduler.server import ListenError

    hint = _postgres_hint(exc)
    if hint is None and exc.__cause__ is not None:
        hint = _postgres_hint(exc.__cause__)
    if hint is not None:
        return hint
    if isinstance(exc, ListenError):
        return str(exc.args[-1])
    if isinstance(exc, sqlite3.Error):
        # A file that is not an SQLite database, or one another version wrote.
        return f"SQLite: {exc}"
    if isinstance(exc, LeaseHeld):
        return str(exc)
    if isinstance(exc, TickwheelError):
        if "does not exist" in str(exc) and "relation" in str(exc):
            return f"{exc}: {MIGRATE_HINT}"
        return str(exc)
    if isinstance(exc, OSError):
        where = f": {exc.filename}" if exc.filename else ""
        return f"{exc.strerror or exc}{where}"
    if isinstance(exc, ValueError):
        return flag_words(str(exc))
    return None


def fail(message: str, code: int = 1) -> NoReturn:
    """Print ``Error: message`` on stderr as one line and exit with ``code``."""
    # click, not rich: the console would wrap the line at 80 columns.
    click.echo(f"Error: {message}", err=True)
    raise SystemExit(code)


EVENT_LOOP_ENV = "TICKWHEEL_EVENT_LOOP"
EVENT_LOOPS = ("auto", "uvloop", "asyncio")
Loop = Literal["uvloop", "asyncio"]


def event_loop_factory(auto: Loop = "asyncio") -> Callable[[], asyncio.AbstractEventLoop] | None:
    """The event loop a command runs on, as ``TICKWHEEL_EVENT_LOOP`` asks: ``uvloop``
    (libuv's loop: task switches and callbacks in C), ``asyncio`` (the standard
    library's), or ``auto``, the default: the command's own choice, ``auto``
    (``tickwheel worker`` chooses uvloop, where it is installed: a dependency
    everywhere but Windows; every other command asyncio). None means asyncio's own
    default. ValueError names the variable for any other value, or for uvloop asked
    for and not installed."""
    choice = os.environ.get(EVENT_LOOP_ENV, "").strip().lower() or "auto"
    if choice not in EVENT_LOOPS:
        raise ValueError(f"{EVENT_LOOP_ENV}={choice!r}: use one of {', '.join(EVENT_LOOPS)}")
    if choice == "asyncio" or (choice == "auto" and auto == "asyncio"):
        return None
    try:
        import uvloop
    except ImportError:
        if choice == "uvloop":
            raise ValueError(
                f"{EVENT_LOOP_ENV}=uvloop: uvloop is not installed (pip install uvloop)"
            ) from None
        return None
    return cast(Callable[[], asyncio.AbstractEventLoop], uvloop.new_event_loop)


def run_coro(coro: Coroutine[Any, Any, T], *, loop: Loop = "asyncio") -> T:
    """Run ``coro`` to completion on the event loop :func:`event_loop_factory` gives
    (``loop``: the command's own choice when the environment leaves it to it); a known
    error (see :func:`user_error`) is one line on stderr and exit code 1, not a
    traceback."""
    try:
        factory = event_loop_factory(loop)
    except ValueError as exc:
        coro.close()
        fail(str(exc))
    try:
        with asyncio.Runner(loop_factory=factory) as runner:
            return runner.run(coro)
    except Exception as exc:
        message = user_error(exc)
        if message is None:
            raise
        fail(message)


def run_node(coro: Coroutine[Any, Any, None]) -> None:
    """Run a node (``serve``, ``dev``): a busy port, a database another node holds or
    one without its schema is a one-line error and exit code 1, not a traceback."""
    run_coro(coro)


def tune_gc() -> None:
    """Garbage collection for a long-running service (``serve``, ``worker``, ``dev``).

    The hot paths allocate container objects (records, dicts, protos' wrappers) by the
    thousand per batch, and CPython's default first-generation threshold (700) runs a
    collection every few hundred of them, and a full one, over every object alive,
    every hundred or so of those. Everything alive after start-up (modules, classes,
    configuration) is frozen out of those passes, and a collection waits for 50,000 new
    containers (a few MB at most). Measured: the 40,000-task lifecycle benchmark, 4-7%
    more tasks/s (docs/benchmarks.md)."""
    gc.freeze()
    gc.set_threshold(50_000, 20, 20)


def _read(path: str | None) -> bytes | None:
    return Path(path).read_bytes() if path else None


def tls_config(kw: dict[str, Any]) -> TLSConfig | None:
    """Pop the client TLS options of ``client_options`` from ``kw``; None without TLS."""
    ca, cert, key = kw.pop("tls_ca"), kw.pop("tls_client_cert"), kw.pop("tls_client_key")
    system = kw.pop("tls_system")
    if not (ca or cert or key or system):
        return None
    if bool(cert) != bool(key):
        fail("--tls-cert and --tls-key go together (mutual TLS)", 2)
    files = {"--tls-ca": _read(ca), "--tls-cert": _read(cert), "--tls-key": _read(key)}
    for flag, data in files.items():
        if data is not None and not is_pem(data):
            fail(f"{flag}: not a PEM file (no '-----BEGIN' line)", 2)
    return TLSConfig(
        server_root_ca_cert=files["--tls-ca"],
        client_cert=files["--tls-cert"],
        client_private_key=files["--tls-key"],
    )


async def with_client(kw: dict[str, Any], fn: Callable[[Client], Awaitable[T]]) -> T:
    """Connect a client from the popped options in ``kw``, call ``fn`` with it, close it."""
    tls = tls_config(kw)
    client = await Client.connect(kw.pop("target"), api_key=kw.pop("api_key"), tls=tls)
    try:
        return await fn(client)
    finally:
        await client.close()


async def with_admin(kw: dict[str, Any], fn: Callable[[AdminClient], Awaitable[T]]) -> T:
    """Connect an admin client from the popped options in ``kw``, call ``fn``, close it."""
    tls = tls_config(kw)
    admin = await AdminClient.connect(kw.pop("target"), admin_token=kw.pop("admin_token"), tls=tls)
    try:
        return await fn(admin)
    finally:
        await admin.close()


async def wait_for_signal() -> None:
    """Return on the first SIGINT or SIGTERM."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
