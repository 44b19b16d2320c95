"""The task table (``TaskTable``): both implementations, and the C one against the
pure-Python one on random operations."""

from __future__ import annotations

import random
import uuid
from array import array

import pytest

import _wheel
from _wheel._table_py import TaskTable as PyTaskTable

from .conftest import IMPLEMENTATIONS, load_class


def load(name: str) -> type[PyTaskTable]:
    """The ``TaskTable`` class of implementation ``name``."""
    return load_class(name, PyTaskTable, "_wheel._table_c")


@pytest.fixture(params=IMPLEMENTATIONS)
def table_cls(request: pytest.FixtureRequest) -> type[PyTaskTable]:
    """The ``TaskTable`` class, once per implementation."""
    return load(request.param)


def test_extension_loaded_in_a_normal_build() -> None:
    if _wheel.NO_EXTENSIONS:
        pytest.skip("TICKWHEEL_NO_EXTENSIONS is set")
    assert type(_wheel.TaskTable()).__module__ == "_wheel._table_c"


def test_rows_by_handle_and_by_id(table_cls: type[PyTaskTable]) -> None:
    t = table_cls()
    a, b = uuid.uuid4().int, (1 << 128) - 1
    ha = t.add(a, -5, 1_700_000_000_000_000, 3, 255)
    hb = t.add(b, 0, 0, 0, 0)
    assert (ha, hb) == (0, 1)
    assert len(t) == 2
    assert a in t
    assert b in t
    assert 7 not in t
    assert "x" not in t
    assert t.find(a) == ha
    assert t.find(7) == -1
    assert t.find(-1) == -1
    assert t.get(ha) == (a, -5, 1_700_000_000_000_000, 3, 255)
    assert t.due_us(hb) == 0
    assert t.add(a, 1, 2, 3, 4) == -1  # already here: nothing changes
    assert t.get(ha) == (a, -5, 1_700_000_000_000_000, 3, 255)
    assert t.pop(ha) == (a, -5, 1_700_000_000_000_000, 3, 255)
    assert a not in t
    assert len(t) == 1
    with pytest.raises(KeyError):
        t.get(ha)
    with pytest.raises(KeyError):
        t.pop(99)
    assert t.discard(ha) is False
    # A freed handle is reused.
    assert t.add(a, 1, 2, 3, 4) == ha
    assert t.pop_many([hb, 12345, ha]) == [(b, 0, 0, 0, 0), (a, 1, 2, 3, 4)]
    assert len(t) == 0
    t.add(5, 1, 1, 1, 1)
    t.clear()
    assert len(t) == 0
    assert 5 not in t
    assert t.add(6, 1, 1, 1, 1) == 0


@pytest.mark.parametrize(
    ("row", "error"),
    [
        ((-1, 0, 0, 0, 0), ValueError),
        ((1 << 128, 0, 0, 0, 0), ValueError),
        ((1, 1 << 63, 0, 0, 0), ValueError),
        ((1, 0, 0, -1, 0), ValueError),
        ((1, 0, 0, 0, 1 << 31), ValueError),
        ((1.0, 0, 0, 0, 0), TypeError),
        ((1, 0, 0, True, 0), TypeError),
        ((1, "0", 0, 0, 0), TypeError),
    ],
)
def test_bad_rows_are_refused(
    table_cls: type[PyTaskTable], row: tuple[object, ...], error: type[Exception]
) -> None:
    t = table_cls()
    with pytest.raises(error, match=r"must|outside"):
        t.add(*row)  # type: ignore[arg-type]
    assert len(t) == 0


def test_in_shards(table_cls: type[PyTaskTable]) -> None:
    t = table_cls()
    handles = [t.add(i + 1, i, i, 0, i % 4) for i in range(20)]
    t.discard(handles[2])
    assert sorted(t.in_shards({2, 3})) == sorted(
        h for i, h in enumerate(handles) if i % 4 in (2, 3) and i != 2
    )


def test_c_matches_python_on_random_operations() -> None:
    c, py = load("c")(), PyTaskTable()
    rng = random.Random(20)
    live: list[int] = []
    ids: list[int] = []
    for step in range(60_000):
        op = rng.random()
        if op < 0.55 or not live:
            # Ids that share their low or high half collide in the C index's hash.
            task_id = rng.choice(
                [
                    rng.getrandbits(128),
                    rng.getrandbits(64),
                    rng.getrandbits(64) << 64,
                    rng.choice(ids) if ids else 1,
                ]
            )
            row = (task_id, step, rng.getrandbits(40), rng.randrange(50), rng.randrange(256))
            h = c.add(*row)
            assert h == py.add(*row)
            if h >= 0:
                live.append(h)
                ids.append(task_id)
        elif op < 0.8:
            h = live.pop(rng.randrange(len(live)))
            assert c.pop(h) == py.pop(h)
        elif op < 0.9:
            probe = rng.choice(ids)
            assert c.find(probe) == py.find(probe)
        else:
            some = [*rng.sample(live, min(len(live), 5)), 10**6]
            assert c.pop_many(some) == py.pop_many(some)
            live = [h for h in live if h not in some]
        assert len(c) == len(py)
    for h in live:
        assert c.get(h) == py.get(h)
    for task_id in ids:
        assert c.find(task_id) == py.find(task_id)


def test_add_many_skips_known_ids_and_shards_not_allowed(table_cls: type[PyTaskTable]) -> None:
    t = table_cls()
    ids = [uuid.uuid4() for _ in range(5)]
    known = t.add(ids[1].int, 0, 0, 0, 1)
    handles, dues = t.add_many(
        b"".join(u.bytes for u in ids),
        array("q", [10, 11, 12, 13, 14]),
        array("q", [-7, 1_999, 2_000, 3_000_999, 4_000]),
        2,
        array("q", [1, 1, 9, 3, 1]),
        bytes([0, 1, 0, 1]),  # shards 1 and 3 only
    )
    assert list(dues) == [0, 3_000, 4]
    assert [t.get(h) for h in handles] == [
        (ids[0].int, 10, -7, 2, 1),
        (ids[3].int, 13, 3_000_999, 2, 3),
        (ids[4].int, 14, 4_000, 2, 1),
    ]
    assert t.find(ids[1].int) == known
    assert ids[2].int not in t
    everything, _ = t.add_many(
        b"".join(u.bytes for u in ids), *(array("q", [0] * 5),) * 2, 0, array("q", [9] * 5)
    )
    assert len(everything) == 1
    assert len(t) == 5
    with pytest.raises(ValueError, match="16 bytes per row"):
        t.add_many(b"x" * 15, array("q", [0]), array("q", [0]), 0, array("q", [0]))
