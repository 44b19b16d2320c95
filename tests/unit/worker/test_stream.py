"""The stream protocol's parts that need no server: the reconnect schedule (full jitter
under a ceiling that doubles, capped, and starts again once a stream was welcomed) and
the request futures (no stream: Unavailable at once; a broken stream fails what waits;
one timer expires a whole batch)."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from scheduler._errors import Unavailable
from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from scheduler.client._channel import _OPTIONS
from scheduler.worker import ReconnectConfig
from scheduler.worker._answers import Answers
from scheduler.worker._outbox import Completed, serialize
from scheduler.worker._stream import COMPLETION_LINGER_S, Backoff, Conn, Stream


def _ceiling(_low: float, high: float) -> float:
    return high  # the jitter's upper bound: the schedule's ceiling


def test_the_ceiling_doubles_up_to_the_maximum() -> None:
    backoff = Backoff(ReconnectConfig(initial_backoff_s=0.1, max_backoff_s=0.5), _ceiling)
    assert [backoff.next_delay_s() for _ in range(5)] == pytest.approx([0.1, 0.2, 0.4, 0.5, 0.5])


def test_a_welcomed_stream_resets_the_schedule() -> None:
    backoff = Backoff(ReconnectConfig(initial_backoff_s=1.0, max_backoff_s=8.0), _ceiling)
    backoff.next_delay_s()
    backoff.next_delay_s()
    backoff.reset()
    assert backoff.next_delay_s() == 1.0


def test_the_delay_is_drawn_between_zero_and_the_ceiling() -> None:
    drawn: list[tuple[float, float]] = []

    def jitter(low: float, high: float) -> float:
        drawn.append((low, high))
        return low

    backoff = Backoff(ReconnectConfig(initial_backoff_s=0.25, max_backoff_s=1.0), jitter)
    assert backoff.next_delay_s() == 0
    backoff.next_delay_s()
    assert drawn == [(0, 0.25), (0, 0.5)]


def test_by_default_a_worker_never_waits_more_than_two_seconds_to_retry() -> None:
    """Issue 17: a 10 s ceiling left a restarted node without its worker for 3.8-8.9 s.
    The default schedule starts within 0.1 s, doubles to a 2 s cap and stays there
    however long the node was gone, and starts again after a welcomed stream."""
    config = ReconnectConfig()
    backoff = Backoff(config, _ceiling)
    waits = [backoff.next_delay_s() for _ in range(60)]  # a long outage: 60 attempts
    assert waits[0] <= 0.1
    assert max(waits) == pytest.approx(2.0)
    assert sum(waits[:4]) <= 1.5  # four quick tries in the first 1.5 s
    backoff.reset()
    assert backoff.next_delay_s() <= 0.1


def test_the_channel_retries_its_connection_as_promptly_as_the_stream() -> None:
    """gRPC's own reconnect backoff (1 s growing to 120 s by default) would otherwise
    keep a channel in TRANSIENT_FAILURE after the node is back: every stream attempt
    would fail at once until the channel's timer ran out."""
    options = dict(_OPTIONS)
    assert int(options["grpc.initial_reconnect_backoff_ms"]) <= 250
    assert int(options["grpc.max_reconnect_backoff_ms"]) <= ReconnectConfig().max_backoff_s * 1000


def test_the_config_is_checked() -> None:
    with pytest.raises(ValueError, match="initial_backoff_s <= max_backoff_s"):
        ReconnectConfig(initial_backoff_s=2.0, max_backoff_s=1.0)


def _stream(request_timeout_s: float = 1.0) -> Stream:
    return Stream(
        "127.0.0.1:9",
        api_key="k",
        tls=None,
        worker_id="w",
        task_types=["t"],
        pools=(),
        start_on_delivery=False,
        heartbeat_interval_s=None,
        request_timeout_s=request_timeout_s,
        reconnect=ReconnectConfig(),
    )


async def test_without_a_stream_a_request_fails_at_once_and_a_send_is_dropped() -> None:
    stream = _stream()
    stream.send(pb.WorkerMessage(drain=pb.Drain()))  # no stream: nothing to do
    fut = stream.start_request(pb.WorkerMessage(heartbeat=pb.Heartbeat()))
    with pytest.raises(Unavailable, match="not connected"):
        await fut


async def test_a_request_waits_for_a_stream_no_longer_than_its_timeout() -> None:
    with pytest.raises(Unavailable, match="in time"):
        await _stream().request(pb.WorkerMessage(heartbeat=pb.Heartbeat()), timeout_s=0.01)


async def test_a_broken_stream_fails_the_requests_awaiting_a_result() -> None:
    conn = Conn()
    fut: asyncio.Future[list[pb.TaskResult]] = asyncio.get_running_loop().create_future()
    conn.pending[1] = fut
    conn.fail_pending()
    assert conn.pending == {}
    with pytest.raises(Unavailable, match="closed"):
        await fut


async def test_batched_results_are_handed_to_each_task_by_id() -> None:
    loop = asyncio.get_running_loop()
    raw: asyncio.Future[list[pb.TaskResult]] = loop.create_future()
    answers = Answers(loop, 5.0)
    answers.follow(raw)
    a, b, missing = answers.wait("a"), answers.wait("b"), answers.wait("c")
    raw.set_result([pb.TaskResult(task_id="a", ok=True), pb.TaskResult(task_id="b")])
    got_a, got_b = await a, await b
    assert got_a is not None
    assert got_b is not None
    assert (got_a.ok, got_b.ok, await missing) == (True, False, None)
    late = await answers.wait("a")  # a waiter that comes after the answers
    assert late is not None
    assert late.ok


async def test_a_cancelled_waiter_leaves_the_batch_and_the_others_alone() -> None:
    loop = asyncio.get_running_loop()
    raw: asyncio.Future[list[pb.TaskResult]] = loop.create_future()
    answers = Answers(loop, 5.0)
    answers.follow(raw)
    gone, stays = answers.wait("a"), answers.wait("b")
    gone.cancel()
    raw.set_result([pb.TaskResult(task_id="a", ok=True), pb.TaskResult(task_id="b", ok=True)])
    got = await stays
    assert got is not None
    assert got.ok
    assert gone.cancelled()
    assert answers.done


async def test_one_timer_expires_a_batch_nobody_answered() -> None:
    loop = asyncio.get_running_loop()
    raw: asyncio.Future[list[pb.TaskResult]] = loop.create_future()
    answers = Answers(loop, 0.01)
    answers.follow(raw)
    with pytest.raises(Unavailable, match="in time"):
        await answers.wait("a")
    raw.set_result([pb.TaskResult(task_id="a", ok=True)])  # a late answer changes nothing
    with pytest.raises(Unavailable, match="in time"):
        await answers.wait("a")


async def test_a_broken_stream_fails_every_waiter_of_the_batch() -> None:
    loop = asyncio.get_running_loop()
    conn = Conn()
    raw: asyncio.Future[list[pb.TaskResult]] = loop.create_future()
    conn.pending[1] = raw
    answers = Answers(loop, 5.0)
    answers.follow(raw)
    waiters = [answers.wait("a"), answers.wait("b")]
    conn.fail_pending()
    for w in waiters:
        with pytest.raises(Unavailable, match="closed"):
            await w


async def test_answers_by_call_reach_each_task_and_survive_a_failing_one() -> None:
    loop = asyncio.get_running_loop()
    raw: asyncio.Future[list[pb.TaskResult]] = loop.create_future()
    answers = Answers(loop, 5.0)
    answers.follow(raw)
    got: dict[str, object] = {}

    def record(task_id: str, answer: object) -> None:
        got[task_id] = answer

    def broken(_arg: object, _answer: object) -> None:
        raise RuntimeError("a bug in one task's bookkeeping")

    answers.on_answer("a", record, "a")
    answers.on_answer("b", broken, None)
    answers.on_answer("c", record, "c")
    raw.set_result([pb.TaskResult(task_id="a", ok=True)])
    await asyncio.sleep(0)
    assert got == {"a": pb.TaskResult(task_id="a", ok=True), "c": None}  # c: not named
    answers.on_answer("a", record, "late")  # after the answers: called at once
    assert got["late"] == pb.TaskResult(task_id="a", ok=True)


async def test_a_failed_batch_hands_its_failure_to_each_call() -> None:
    loop = asyncio.get_running_loop()
    answers = Answers(loop, 0.01)
    got: list[object] = []
    answers.on_answer("a", lambda _arg, answer: got.append(answer), None)
    await asyncio.sleep(0.05)
    (failure,) = got
    assert isinstance(failure, Unavailable)


def _completion(task_id: str) -> Completed:
    ref = pb.TaskRef(task_id=task_id, fencing_token=1)
    return Completed(task_id, ref.SerializeToString(), b"")


async def _sent(conn: Conn) -> list[pb.WorkerMessage]:
    """What the stream queued for its writer so far (after the loop turns it takes),
    as the server reads it."""
    for _ in range(3):
        await asyncio.sleep(0)
    out = []
    while not conn.queue.empty():
        msg = conn.queue.get_nowait()
        assert msg is not None
        out.append(pb.WorkerMessage.FromString(serialize(msg)))
    return out


async def test_completions_wait_for_the_one_in_flight_and_share_a_message() -> None:
    """Nagle's rule: the first completion goes at once; those that finish while its
    Completions awaits a Result go together when the Result comes, or after
    COMPLETION_LINGER_S at most."""
    stream = _stream()
    conn = Conn()
    stream._conn = conn
    stream.connected.set()
    first = asyncio.ensure_future(stream.commit(_completion("a"), uuid.uuid4()))
    (m1,) = await _sent(conn)
    assert [i.task.task_id for i in m1.completions.items] == ["a"]
    later = [asyncio.ensure_future(stream.commit(_completion(t), uuid.uuid4())) for t in ("b", "c")]
    assert await _sent(conn) == []  # waiting for m1's Result
    conn.pending.pop(m1.request_id).set_result([pb.TaskResult(task_id="a", ok=True)])
    (m2,) = await _sent(conn)
    assert [i.task.task_id for i in m2.completions.items] == ["b", "c"]
    assert (await first).ok  # type: ignore[union-attr]
    # m2 is never answered: the next completion goes after the linger, alone.
    started = asyncio.get_running_loop().time()
    last = asyncio.ensure_future(stream.commit(_completion("d"), uuid.uuid4()))
    assert await _sent(conn) == []
    await asyncio.sleep(COMPLETION_LINGER_S * 2)
    (m3,) = await _sent(conn)
    assert [i.task.task_id for i in m3.completions.items] == ["d"]
    assert asyncio.get_running_loop().time() - started >= COMPLETION_LINGER_S
    conn.pending.pop(m2.request_id).set_result(
        [pb.TaskResult(task_id="b", ok=True), pb.TaskResult(task_id="c", ok=True)]
    )
    conn.pending.pop(m3.request_id).set_result([pb.TaskResult(task_id="d", ok=True)])
    assert all(r.ok for r in await asyncio.gather(*later, last))  # type: ignore[union-attr]


class _SlowCall:
    """A stream call whose writes wait for ``gate``; records each message written."""

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.written: list[pb.WorkerMessage] = []

    async def write(self, msg: object) -> None:
        self.written.append(pb.WorkerMessage.FromString(serialize(msg)))  # type: ignore[arg-type]
        await self.gate.wait()


def _ref_bytes(task_id: str) -> bytes:
    return pb.TaskRef(task_id=task_id, fencing_token=1).SerializeToString()


async def test_acks_waiting_behind_a_write_share_one_message_and_one_result() -> None:
    """Pushes that arrive while the writer is busy are acked together: the ack still
    waiting in the queue takes the new tasks; one written is not added to."""
    stream = _stream()
    conn = Conn()
    stream._conn = conn
    call = _SlowCall()
    writer = asyncio.create_task(stream._write_loop(call, conn))
    first = stream.ack([_ref_bytes("a")])
    await asyncio.sleep(0)  # the writer takes it and waits in its write
    second = stream.ack([_ref_bytes("b")])
    third = stream.ack([_ref_bytes("c"), _ref_bytes("d")])
    assert third is second
    assert second is not first
    waiters = {t: (first if t == "a" else second).wait(t) for t in "abcd"}
    call.gate.set()
    for _ in range(3):
        await asyncio.sleep(0)
    assert [[r.task_id for r in m.ack.tasks] for m in call.written] == [["a"], ["b", "c", "d"]]
    m1, m2 = call.written
    conn.pending.pop(m1.request_id).set_result([pb.TaskResult(task_id="a", ok=True)])
    conn.pending.pop(m2.request_id).set_result(
        [pb.TaskResult(task_id=t, ok=t != "c") for t in "bcd"]
    )
    answers = {t: await w for t, w in waiters.items()}
    assert {t: a.ok for t, a in answers.items() if a is not None} == {
        "a": True,
        "b": True,
        "c": False,
        "d": True,
    }
    # Written already: the next ack is a message of its own.
    assert stream.ack([_ref_bytes("e")]) is not second
    writer.cancel()


async def test_an_ack_never_joins_one_queued_on_a_broken_stream() -> None:
    stream = _stream()
    old = Conn()
    stream._conn = old
    first = stream.ack([_ref_bytes("a")])
    stream._conn = Conn()  # the stream broke and another was welcomed
    assert stream.ack([_ref_bytes("b")]) is not first
