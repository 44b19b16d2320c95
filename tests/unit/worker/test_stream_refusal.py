"""A Result that refuses a whole message (issue #15, case 6) is logged at WARNING and
answers the waiting request with no per-task result; the stream goes on."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from scheduler.worker import ReconnectConfig
from scheduler.worker._stream import Conn, Stream


def _stream() -> Stream:
    return Stream(
        "127.0.0.1:9",
        api_key="k",
        tls=None,
        worker_id="w",
        task_types=["t"],
        pools=(),
        start_on_delivery=False,
        heartbeat_interval_s=None,
        request_timeout_s=1.0,
        reconnect=ReconnectConfig(),
    )


class _Listener:
    def __getattr__(self, name: str) -> Any:  # any callback: must not be called
        raise AssertionError(f"listener.{name} called")


async def test_a_refusal_is_logged_and_answers_the_request(
    caplog: pytest.LogCaptureFixture,
) -> None:
    stream = _stream()
    conn = Conn()
    stream._conn = conn
    fut = stream.start_request(pb.WorkerMessage(ack=pb.Ack()))
    refusal = pb.ServerMessage(
        result=pb.Result(
            request_id=1,
            code=3,
            field="ack.tasks[0].scheduled_at",
            message="ack.tasks[0].scheduled_at: required",
        )
    )
    with caplog.at_level(logging.WARNING, logger="tickwheel.worker"):
        stream._on_message(refusal.SerializeToString(), conn, _Listener())  # type: ignore[arg-type]
    assert fut.result() == []
    assert "ack.tasks[0].scheduled_at: required" in caplog.text
    assert "refused request 1" in caplog.text
