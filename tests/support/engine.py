"""The engine as the tests build it: one fast configuration and a started engine.

:func:`engine_config` is the tests' :class:`EngineConfig`: the defaults with a
pre-load pass every 50 ms (a test waits for the pre-loader, never for a second), and
any field changed; :func:`started` runs an engine for the length of a ``with``. The
``clock`` fixture (tests/conftest.py) is the :class:`~tests.support.clock.FakeClock`
the engine tests pass as ``clock``.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from scheduler.engine import Engine, EngineConfig
from scheduler.store import Store

FAST_PRELOAD_S = 0.05


def engine_config(**changes: Any) -> EngineConfig:
    """The tests' engine configuration, ``changes`` applied."""
    return EngineConfig(**{"preload_interval_s": FAST_PRELOAD_S, **changes})


@contextlib.asynccontextmanager
async def started(
    store: Store, config: EngineConfig | None = None, **kw: Any
) -> AsyncIterator[Engine]:
    """An engine over ``store`` (``config``: :func:`engine_config`), started, and
    stopped on the way out; ``kw`` as :class:`Engine` takes them (``clock=...``)."""
    engine = Engine(store, config or engine_config(), **kw)
    await engine.start()
    try:
        yield engine
    finally:
        await engine.stop()
