"""The member bookkeeping of ClusterWorker (scheduler.worker._members): pure logic."""

from __future__ import annotations

from scheduler.worker._members import diff_members, split_slots


def test_slots_split_evenly_with_at_least_one_each() -> None:
    assert split_slots(10, ["b", "a", "c"]) == {"a": 4, "b": 3, "c": 3}
    assert split_slots(2, ["a", "b", "c"]) == {"a": 1, "b": 1, "c": 1}
    assert split_slots(5, []) == {}
    assert split_slots(7, ["only"]) == {"only": 7}


def test_new_nodes_start_and_departed_nodes_stop() -> None:
    running = {"n1": "h:1", "n2": "h:2"}
    change = diff_members(running, {"n1": "h:1", "n3": "h:3"})
    assert change.start == {"n3": "h:3"}
    assert change.stop == frozenset({"n2"})


def test_a_node_whose_address_changed_is_restarted() -> None:
    change = diff_members({"n1": "h:1"}, {"n1": "h:9"})
    assert change.start == {"n1": "h:9"}
    assert change.stop == frozenset({"n1"})


def test_no_change_means_nothing_to_do() -> None:
    change = diff_members({"n1": "h:1"}, {"n1": "h:1"})
    assert change.start == {}
    assert change.stop == frozenset()
