"""The worker stream's messages on the server, native against generated (issue 20, "a
native codec on the hot path"), same run, CPU µs per task in this process.

- ``ack``: an ``Ack`` of 100 refs, bytes to the engine's ``FencedWrite`` items: the
  generated class and ``_convert`` (the general path) against ``_stream_c``'s reader
  (``test_stream_reads_fenced_writes``);
- ``completions``: a ``Completions`` of 100 items with ``result_json``, to
  ``Completion`` items (both check each result with orjson);
- ``result``: the per-task ``Result`` of 100 outcomes, to bytes;
- ``assignments``: a batch of 100 assignments (JSON as bytes), to the bytes pushed.

Run: ``.venv/bin/pytest benchmarks/test_stream_wire.py --benchmark-only -p no:cacheprovider -s``
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from tests.support.records import assignment

from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from scheduler.client import _convert as cconv
from scheduler.engine import AssignmentBatch
from scheduler.server import _convert as conv
from scheduler.server import _stream_wire
from scheduler.server._stream_wire import Writes, decode_worker_message, encode_result
from scheduler.server._worker import event_to_proto
from scheduler.server._worker_messages import _parse
from scheduler.types import Outcome, RawJSON

BATCH = 100
ROUNDS = 200  # batches per timed round
NOW = datetime(2030, 1, 1, tzinfo=UTC)
TABLE: dict[str, dict[str, float]] = {}


@pytest.fixture(scope="module", autouse=True)
def wire_table(request: pytest.FixtureRequest) -> Iterator[None]:
    assert _stream_wire.STREAM_DECODER == "c", _stream_wire.STREAM_DECODER_ERROR
    yield
    tr = request.config.pluginmanager.get_plugin("terminalreporter")
    if tr is None or not TABLE:
        return
    tr.write_line("")
    tr.write_line("worker stream on the server (CPU µs per task; ratio generated/native)")
    for name, f in TABLE.items():
        cells = ", ".join(f"{k}={v:,.2f}" for k, v in f.items())
        tr.write_line(f"  {name:<12} {cells}")


def _cpu_us(fn: Callable[[], Any], rounds: int = 7) -> float:
    """The best of ``rounds`` CPU times of ``ROUNDS`` calls of ``fn`` (one batch
    each), in µs per task."""
    best = float("inf")
    for _ in range(rounds):
        t = time.process_time()
        for _ in range(ROUNDS):
            fn()
        best = min(best, time.process_time() - t)
    return best / (ROUNDS * BATCH) * 1e6


def _pair(
    benchmark: Any, name: str, generated: Callable[[], Any], native: Callable[[], Any]
) -> None:
    g, n = _cpu_us(generated), _cpu_us(native)
    g, n = min(g, _cpu_us(generated)), min(n, _cpu_us(native))  # interleaved twice
    TABLE[name] = {"generated_us": g, "native_us": n, "ratio": g / n}
    benchmark.extra_info.update(TABLE[name])


def _refs() -> list[pb.TaskRef]:
    ts = cconv.to_timestamp(NOW)
    return [
        pb.TaskRef(task_id=str(uuid.uuid4()), fencing_token=k + 1, scheduled_at=ts)
        for k in range(BATCH)
    ]


def _read_message(kind: str) -> bytes:
    """A worker message of ``kind`` about BATCH tasks, as the SDK sends it."""
    if kind == "ack":
        return pb.WorkerMessage(request_id=7, ack=pb.Ack(tasks=_refs())).SerializeToString()
    items = [pb.Completion(task=r, result_json=b'{"sent": true, "ms": 12.5}') for r in _refs()]
    msg = pb.WorkerMessage(request_id=7, completions=pb.Completions(items=items))
    return msg.SerializeToString()


@pytest.mark.parametrize("kind", ["ack", "completions"])
def test_stream_reads_fenced_writes(benchmark: Any, kind: str) -> None:
    data = _read_message(kind)

    def generated() -> list[Any]:
        return _parse(pb.WorkerMessage.FromString(data), kind)

    def native() -> Any:
        return decode_worker_message(data)

    read = native()
    assert isinstance(read, Writes)
    assert read.items == generated()
    benchmark.pedantic(native, rounds=1, iterations=1)
    _pair(benchmark, kind, generated, native)


def test_stream_writes_a_result(benchmark: Any) -> None:
    ids = [uuid.uuid4() for _ in range(BATCH)]
    texts = [str(i).encode() for i in ids]
    outcomes = [Outcome.OK] * (BATCH - 1) + [Outcome.STALE]
    reasons = {Outcome.OK: "", Outcome.STALE: "stale_fencing_token"}

    def generated() -> bytes:
        results = [
            pb.TaskResult(task_id=str(i), ok=o is Outcome.OK, reason=reasons[o])
            for i, o in zip(ids, outcomes, strict=True)
        ]
        return pb.ServerMessage(result=pb.Result(request_id=7, results=results)).SerializeToString()

    assert generated() == encode_result(7, texts, outcomes)
    benchmark.pedantic(lambda: encode_result(7, texts, outcomes), rounds=1, iterations=1)
    _pair(benchmark, "result", generated, lambda: encode_result(7, texts, outcomes))


def test_stream_writes_assignments(benchmark: Any) -> None:
    batch = tuple(
        assignment(type="email", payload=RawJSON(f'{{"user_id": {i}, "template": "welcome"}}'))
        for i in range(BATCH)
    )
    event = AssignmentBatch(batch)

    def generated() -> bytes:
        tasks = [conv.assignment_to_proto(a, json_bytes=True) for a in batch]
        return pb.ServerMessage(assignments=pb.Assignments(tasks=tasks)).SerializeToString()

    def native() -> Any:
        return event_to_proto(event, "w", json_bytes=True)

    assert generated() == native()
    benchmark.pedantic(native, rounds=1, iterations=1)
    _pair(benchmark, "assignments", generated, native)
