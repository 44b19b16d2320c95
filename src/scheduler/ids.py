"""Task identifiers: UUIDv7 (time-ordered), as the seed's schema asks.

Python 3.11 has no ``uuid.uuid7``; this is RFC 9562 §5.7 with a 48-bit millisecond
timestamp, a 12-bit sub-millisecond counter for monotonicity inside one process, and
62 random bits.

The random bits come from ``os.urandom`` 4 KiB at a time (512 ids per system call):
CPython releases the GIL around every ``getrandom`` call, and one call per id made
the submit handler wait for the GIL behind gRPC's threads (12% of a server's CPU in
a batch-submit benchmark). A forked child starts with an empty pool, so parent and
child never hand out the same bits.

Where asyncpg is loaded (the PostgreSQL store loads it), the ids are of its UUID type
(:func:`uuid_of_bytes`): a ``uuid.UUID`` subclass whose hash, equality and text are C
(hash 20 ns against 65, a dict lookup 25 against 116, ``str`` 34 against 458, built
from bytes 59 against 494 for ``uuid.UUID(int=...)``), and the type asyncpg already
returns for every uuid column. A task id is hashed some 35 times on its way through
the engine (sessions, delivery, acks, the completer), so the server makes every id it
holds of that one type: new ones here, ids read back from the wheel
(:func:`uuid_of_int`) and ids read from a worker's stream (``server/_stream_c``). It
equals and hashes as the ``uuid.UUID`` of the same value, so either kind finds the
other in a dict. Without asyncpg (SQLite), they are plain ``uuid.UUID``s: the engine
does not load a database client for its ids.
"""

from __future__ import annotations

import os
import sys
import threading
import time
import uuid
from typing import Any

_PGPROTO = "asyncpg.pgproto.pgproto"
_fast: Any = None
"""asyncpg's UUID class once asyncpg is loaded (None before)."""
_new = object.__new__
_set = object.__setattr__
_UNKNOWN = uuid.SafeUUID.unknown


def uuid_of_bytes(raw: bytes) -> uuid.UUID:
    """The UUID of 16 bytes (big-endian), of asyncpg's type where asyncpg is loaded."""
    global _fast
    if _fast is None:
        module = sys.modules.get(_PGPROTO)
        if module is None:
            return uuid.UUID(bytes=raw)
        _fast = module.UUID
    return _fast(raw)  # type: ignore[no-any-return]


def uuid_of_int(value: int) -> uuid.UUID:
    """The UUID whose 128-bit value is ``value`` (0 <= value < 2**128): the wheel
    rebuilds one per task it fires. A plain one skips the constructor's checks."""
    if _fast is not None or _PGPROTO in sys.modules:
        return uuid_of_bytes(value.to_bytes(16, "big"))
    u: uuid.UUID = _new(uuid.UUID)
    _set(u, "int", value)
    _set(u, "is_safe", _UNKNOWN)
    return u


_lock = threading.Lock()
_last_ms = 0
_counter = 0
_POOL_BYTES = 4096
_pool = b""
_pos = 0


def _forget_pool() -> None:
    global _pool, _pos
    _pool, _pos = b"", 0


os.register_at_fork(after_in_child=_forget_pool)


def uuid7(now_ms: int | None = None) -> uuid.UUID:
    """A new UUIDv7; ids made by one process sort in creation order."""
    global _last_ms, _counter, _pool, _pos
    with _lock:
        ms = time.time_ns() // 1_000_000 if now_ms is None else now_ms
        if ms <= _last_ms:
            _counter += 1
            if _counter > 0xFFF:  # counter overflow: borrow the next millisecond
                _last_ms += 1
                _counter = 0
            ms = _last_ms
        else:
            _last_ms = ms
            _counter = 0
        counter = _counter
        if _pos >= len(_pool):
            _pool, _pos = os.urandom(_POOL_BYTES), 0
        rand = int.from_bytes(_pool[_pos : _pos + 8], "big") & ((1 << 62) - 1)
        _pos += 8
    value = (ms & ((1 << 48) - 1)) << 80
    value |= 0x7 << 76
    value |= counter << 64
    value |= 0b10 << 62
    value |= rand
    return uuid_of_bytes(value.to_bytes(16, "big"))


def uuid7_ms(task_id: uuid.UUID) -> int:
    """The millisecond timestamp embedded in a UUIDv7."""
    return task_id.int >> 80
