"""The worker's acks and completions written as bytes (``worker/_outbox.py``) are the
bytes the generated classes write, and read back as the messages they stand for."""

from __future__ import annotations

import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from scheduler.worker import _outbox as outbox
from scheduler.worker._outbox import Completed


def _ref(token: int, seconds: int, nanos: int) -> pb.TaskRef:
    ref = pb.TaskRef(task_id=str(uuid.uuid4()), fencing_token=token)
    ref.scheduled_at.seconds, ref.scheduled_at.nanos = seconds, nanos
    return ref


refs = st.builds(
    _ref, st.integers(-(2**63), 2**63 - 1), st.integers(0, 2**40), st.integers(0, 999_999_999)
)


@settings(max_examples=300, deadline=None)
@given(st.lists(refs, max_size=6), st.integers(0, 2**64 - 1))
def test_an_ack_is_the_generated_bytes(tasks: list[pb.TaskRef], request_id: int) -> None:
    written = outbox.ack([r.SerializeToString() for r in tasks])
    written.request_id = request_id
    expected = pb.WorkerMessage(request_id=request_id, ack=pb.Ack(tasks=tasks))
    assert written.SerializeToString() == expected.SerializeToString()
    assert outbox.serialize(written) == expected.SerializeToString()
    assert written.message() == expected
    assert written.WhichOneof("kind") == "ack"


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(refs, st.sampled_from([b"", b"{}", b'{"n": [1, 2.5]}'])), max_size=6),
    st.integers(1, 2**64 - 1),
)
def test_completions_are_the_generated_bytes(
    items: list[tuple[pb.TaskRef, bytes]], request_id: int
) -> None:
    done = [Completed(r.task_id, r.SerializeToString(), result) for r, result in items]
    for c, (r, result) in zip(done, items, strict=True):
        assert c.task_id == r.task_id
        assert c.message() == pb.Completion(task=r, result_json=result)
    written = outbox.completions([c.item for c in done])
    written.request_id = request_id
    expected = pb.WorkerMessage(
        request_id=request_id,
        completions=pb.Completions(
            items=[pb.Completion(task=r, result_json=result) for r, result in items]
        ),
    )
    assert written.SerializeToString() == expected.SerializeToString()
    assert written.WhichOneof("kind") == "completions"


def test_a_generated_message_serialises_as_itself() -> None:
    msg = pb.WorkerMessage(request_id=3, credit=pb.Credit(slots=2))
    assert outbox.serialize(msg) == msg.SerializeToString()
