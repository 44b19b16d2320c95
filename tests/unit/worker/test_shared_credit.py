"""One slot pool over a cluster worker's streams (scheduler.worker._shared_credit):
what each stream is sent as Credit, from hello to retirement (no server)."""

from __future__ import annotations

from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from scheduler.worker._shared_credit import SharedCredit


class Sent:
    """A stream's ``send``: the Credit it was sent."""

    def __init__(self) -> None:
        self.credit: list[int] = []

    def __call__(self, msg: pb.WorkerMessage) -> None:
        assert msg.WhichOneof("kind") == "credit"
        self.credit.append(msg.credit.slots)


def test_slots_follow_the_backlog_and_a_retired_stream_touches_no_new_one() -> None:
    shared = SharedCredit(10)
    sent = {n: Sent() for n in ("a", "b", "old-b")}
    a = shared.handle("a", sent["a"])
    b = shared.handle("b", sent["b"])
    # Hello before welcome: one credit each, announced in the Hello itself.
    assert a.hello() == 1
    assert b.hello() == 1
    a.welcome(1, reports=True)
    b.welcome(1, reports=True)
    assert sent["a"].credit == sent["b"].credit == []
    # b's node reports work: the reserve goes to b, as Credit on b's stream.
    b.backlog(30)
    assert sent["b"].credit == [8]
    assert shared.split.granted("b") == 9
    b.pushed(9)
    b.finished(4)  # four handlers ended: their slots go back to b's backlog
    assert sent["b"].credit == [8, 4]
    # b's stream breaks: its unused credit comes back, and a reconnect starts anew.
    b.closed()
    assert shared.split.granted("b") == 0
    assert b.hello() == 1
    b.welcome(1, reports=False)  # an older server now: an even top-up
    assert sent["b"].credit == [8, 4, 3]  # 5 slots busy: 5 free, 1 kept by a
    assert shared.split.total_granted() <= shared.split.free()
    # A member restarted under b's name: the old one's end and pushes leave it alone.
    old = b
    new_b = shared.handle("b", sent["old-b"])
    old.retire()
    assert new_b.hello() >= 0
    old.closed()
    old.pushed(1)
    old.backlog(100)
    assert old.hello() == 0
    new_b.welcome(new_b.hello(), reports=True)
    assert shared.split.total_granted() <= shared.split.free()
    assert shared.split.granted("b") >= 1


def test_a_stream_that_asks_no_backlog_is_offered_every_free_slot_in_its_hello() -> None:
    """A single node's stream (issue 42) asks for no backlog: like a plain Worker it
    announces all its slots at once, and gives them back to the pool when it retires
    (the worker found a cluster and streams to each member instead)."""
    shared = SharedCredit(10)
    sent = {n: Sent() for n in ("seed", "n1")}
    alone = shared.handle("seed", sent["seed"], reports=False)
    assert alone.hello() == 10
    alone.welcome(10, reports=False)
    assert sent["seed"].credit == []
    alone.pushed(3)  # three tasks held while the worker moves to one stream per node
    alone.retire()
    n1 = shared.handle("n1", sent["n1"])
    assert n1.hello() == 1
    n1.welcome(1, reports=True)
    n1.backlog(50)
    assert shared.split.granted("n1") == 7  # the seed's tasks still hold their slots
    alone.finished(3)
    assert shared.split.granted("n1") == 10
