"""UUIDv7 task ids: layout, order, and random bits that a fork does not share."""

from __future__ import annotations

import os
import time

from scheduler.ids import uuid7, uuid7_ms


def test_layout_and_order_across_many_random_pool_refills() -> None:
    ids = [uuid7() for _ in range(5_000)]  # about ten refills of the random pool
    assert len(set(ids)) == len(ids)
    assert ids == sorted(ids)  # one process: creation order
    for u in ids:
        assert u.version == 7
        assert u.variant == "specified in RFC 4122"
    assert abs(uuid7_ms(ids[-1]) - time.time_ns() // 1_000_000) < 60_000
    # 62 random bits per id: no two share them.
    assert len({u.int & ((1 << 62) - 1) for u in ids}) == len(ids)


def test_a_forked_child_does_not_reuse_the_parents_random_bits() -> None:
    uuid7()  # the pool is filled now
    at = time.time_ns() // 1_000_000 + 10_000  # the same instant and counter in both
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        try:
            os.write(write, uuid7(at).bytes)
        finally:
            os._exit(0)
    os.close(write)
    try:
        child = os.read(read, 16)
    finally:
        os.close(read)
        os.waitpid(pid, 0)
    mine = uuid7(at)
    assert len(child) == 16
    assert child[:8] == mine.bytes[:8]  # same millisecond, same counter
    assert child != mine.bytes  # but not the same random bits


def test_ids_are_asyncpgs_uuid_once_asyncpg_is_loaded() -> None:
    """Before asyncpg is loaded the ids are plain ``uuid.UUID``s (the engine loads no
    database client); once it is, they are its C UUID type, which equals, hashes and
    orders as the plain UUID of the same value (scheduler/ids.py)."""
    import subprocess
    import sys

    code = (
        "import uuid, scheduler.ids as ids\n"
        "a, wheel_a = ids.uuid7(), ids.uuid_of_int(12345)\n"
        "import asyncpg\n"
        "b, wheel_b = ids.uuid7(), ids.uuid_of_int(12345)\n"
        "plain = uuid.UUID(str(b))\n"
        "print(type(a) is uuid.UUID, type(wheel_a) is uuid.UUID,\n"
        "      type(b) is not uuid.UUID, isinstance(b, uuid.UUID), type(wheel_b) is type(b),\n"
        "      plain == b, b == plain, hash(plain) == hash(b), {plain: 1}.get(b) == 1,\n"
        "      a < b, str(b) == str(plain), wheel_b == wheel_a, wheel_a.int == 12345)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True"] * 13, out.stdout
