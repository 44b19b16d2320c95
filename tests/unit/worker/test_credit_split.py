"""Credit split by demand (scheduler.worker._credit_split): pure logic, no server."""

from __future__ import annotations

import random

import pytest

from scheduler.worker._credit_split import CreditSplit


def test_one_stream_gets_every_free_slot() -> None:
    split = CreditSplit(10)
    assert split.open("a") == {"a": 10}
    split.pushed("a", 4)
    assert split.granted("a") == 6
    assert split.finished(4) == {"a": 4}
    assert split.granted("a") == 10


def test_without_backlogs_slots_spread_evenly_and_never_exceed_free() -> None:
    split = CreditSplit(10)
    split.open("a")
    split.open("b")
    split.open("c")
    # Opened one after another: the first took all ten; the others get the minimum
    # only once slots come free (credit is never revoked).
    assert split.total_granted() == 10
    split.pushed("a", 10)
    grants = split.finished(10)
    assert sum(grants.values()) == 10
    assert split.total_granted() == split.free() == 10
    assert sorted(split.granted(s) for s in "abc") == [3, 3, 4]


def test_every_stream_keeps_at_least_one_credit() -> None:
    split = CreditSplit(3)
    split.open("a")
    split.open("b")
    split.open("c")
    split.pushed("a", 3)
    split.backlog("a", 1000)
    split.finished(3)
    assert [split.granted(s) for s in "abc"] == [1, 1, 1]


def test_freed_slots_go_to_the_largest_backlog() -> None:
    split = CreditSplit(10)
    for name in "abc":
        split.open(name)
    split.pushed("a", 10)
    split.backlog("b", 50)
    split.backlog("c", 2)
    split.finished(10)
    # Each keeps its one credit; every other slot goes to b, whose uncovered backlog
    # (50 minus its credit) stays the largest.
    assert split.granted("a") == 1
    assert split.granted("c") == 1
    assert split.granted("b") == 8
    assert split.total_granted() == 10


def test_a_closed_stream_gives_its_credit_back() -> None:
    split = CreditSplit(6)
    split.open("a")
    split.open("b")
    split.pushed("a", 6)
    split.finished(6)
    assert split.granted("a") + split.granted("b") == 6
    held_by_b = split.granted("b")
    grants = split.close("b")
    assert grants == {"a": held_by_b}
    assert split.granted("a") == 6
    assert "b" not in split.streams()


def test_a_frozen_node_holds_only_what_it_was_granted() -> None:
    split = CreditSplit(10)
    split.open("frozen")
    split.open("live")
    split.pushed("frozen", 10)
    split.finished(10)
    frozen_credit = split.granted("frozen")
    # "live" keeps pushing and finishing; "frozen" never pushes again.
    for _ in range(100):
        credit = split.granted("live")
        split.pushed("live", credit)
        split.backlog("live", 100)
        split.finished(credit)
        assert split.granted("frozen") == frozen_credit
    assert split.granted("live") == 10 - frozen_credit


def test_fewer_slots_than_streams_never_overcommits() -> None:
    split = CreditSplit(2)
    for name in "abcd":
        split.open(name)
    assert split.total_granted() == 2
    assert split.open("e") == {}


@pytest.mark.parametrize("seed", range(20))
def test_random_histories_keep_the_invariants(seed: int) -> None:
    rng = random.Random(seed)
    split = CreditSplit(rng.randint(1, 40))
    names = [f"n{i}" for i in range(5)]
    held = 0
    for _ in range(500):
        op = rng.random()
        name = rng.choice(names)
        if op < 0.15:
            split.open(name)
        elif op < 0.2:
            split.close(name)
        elif op < 0.5 and split.granted(name):
            n = rng.randint(1, split.granted(name))
            split.pushed(name, n)
            held += n
        elif op < 0.8 and held:
            n = rng.randint(1, held)
            split.finished(n)
            held -= n
        else:
            split.backlog(name, rng.randint(0, 100))
        assert split.total_granted() <= split.free()
        assert split.free() == split.capacity - held
        streams = split.streams()
        # Every spare slot is given out (so a stream is left without credit only
        # while every free slot is granted elsewhere).
        assert split.total_granted() == split.free() or not streams


def test_nodes_that_report_backlogs_get_one_credit_until_they_report_work() -> None:
    split = CreditSplit(10)
    for name in "abc":
        split.open(name, reports=True)
    # Idle: one credit each, seven held in reserve (not stuck on an idle node).
    assert [split.granted(s) for s in "abc"] == [1, 1, 1]
    assert split.total_granted() == 3
    # b reports work: the reserve goes to it at once, never beyond its backlog.
    assert split.backlog("b", 5) == {"b": 4}
    assert split.backlog("b", 40) == {"b": 3}
    assert split.granted("b") == 8
    # Its pushes and their slots freed come back to it while it has work waiting.
    split.pushed("b", 8)
    assert split.finished(8) == {"b": 8}
    # An older server (reports=False) is topped up to what nobody else asks for.
    split.open("d")
    split.backlog("b", 0)
    split.pushed("b", 8)
    assert split.finished(8) == {"b": 1, "d": 7}
    assert [split.granted(s) for s in "abcd"] == [1, 1, 1, 7]
    assert split.total_granted() == split.free() == 10
