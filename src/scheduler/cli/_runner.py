"""How the CLI runs its coroutines and reaches a server: the event loop, the errors a
user sees, signals, the GC tuning of services, and connected clients.

Calls the client SDK; used by every command module (``_serve``, ``_tasks``,
``_worker``, ``_admin``, ``_watchdog``, ``_orchestration``, ``_dev``).
"""

from __future__ import annotations

import asyncio
import gc
import signal
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

import click

from scheduler._errors import TickwheelError
from scheduler.cli._output import err_console
from scheduler.client import AdminClient, Client, TLSConfig

T = TypeVar("T")


def run_coro(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to completion; a Tickwheel error is printed and exits with code 1."""
    try:
        return asyncio.run(coro)
    except TickwheelError as exc:
        err_console.print(f"[red]error:[/] {type(exc).__name__}: {exc}")
        raise SystemExit(1) from None


def run_node(coro: Coroutine[Any, Any, None]) -> None:
    """Run a node (``serve``, ``dev``): a busy port or a database another node holds
    is a one-line error and exit code 1, not a traceback."""
    from scheduler.cluster import LeaseHeld
    from scheduler.server import ListenError

    try:
        asyncio.run(coro)
    except (ListenError, LeaseHeld) as exc:
        # click, not rich: the console would wrap the line at 80 columns.
        click.echo(f"error: {exc.args[-1] if isinstance(exc, OSError) else exc}", err=True)
        raise SystemExit(1) from None
    except TickwheelError as exc:
        err_console.print(f"[red]error:[/] {type(exc).__name__}: {exc}")
        raise SystemExit(1) from None


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
    return TLSConfig(
        server_root_ca_cert=_read(ca), client_cert=_read(cert), client_private_key=_read(key)
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
