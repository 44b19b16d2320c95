"""Raw byte garbage at the gRPC layer (issue 15): random bytes and mutated valid
messages sent with identity serializers to every method of the three services, the
worker stream's Connect included (as its first message and after a valid hello).

Properties: never INTERNAL or UNKNOWN (bytes that decode to no request message answer
INVALID_ARGUMENT), the server keeps serving, and tenant B's rows stay as they were.
"""

from __future__ import annotations

import queue
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from tests.fuzz._served import (
    BAD_CODES,
    FUZZ,
    SERVICES,
    Served,
    serve,
    templates,
    unary_methods,
)
from tests.support.servers import PostgresServer

pytestmark = pytest.mark.postgres


@pytest.fixture(scope="module")
def served(
    postgres_server: PostgresServer, pg_template: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    """One served Tickwheel for the whole module."""
    yield from serve(postgres_server, pg_template, tmp_path_factory)


RAW = settings(FUZZ, max_examples=max(50, FUZZ.max_examples // 5))
"""A fifth of the message budget per method (100 in `make test`): garbage mostly fails
to decode at the first bytes, and the message fuzzer covers what decodes."""


def _identity(data: bytes) -> bytes:
    return data


def _mutations(valid: bytes) -> st.SearchStrategy[bytes]:
    """``valid`` with a byte flipped, cut short, or with garbage spliced in."""
    n = max(len(valid), 1)
    flips = st.tuples(st.integers(0, n - 1), st.integers(1, 255)).map(
        lambda f: (
            valid[: f[0]] + bytes([valid[f[0]] ^ f[1]]) + valid[f[0] + 1 :] if valid else b"\x00"
        )
    )
    cuts = st.integers(0, n).map(lambda i: valid[:i])
    splices = st.tuples(st.integers(0, n), st.binary(min_size=1, max_size=8)).map(
        lambda s: valid[: s[0]] + s[1] + valid[s[0] :]
    )
    return st.one_of(flips, cuts, splices)


def _garbage(valid: bytes) -> st.SearchStrategy[bytes]:
    return st.one_of(st.binary(max_size=64), _mutations(valid))


@pytest.mark.parametrize(("service", "method"), unary_methods(), ids=lambda v: v)
def test_raw_bytes_to_every_unary_method(served: Served, service: str, method: str) -> None:
    valid = templates(served).get(method)
    call = served.channel.unary_unary(
        f"/tickwheel.v1.{service}/{method}",
        request_serializer=_identity,
        response_deserializer=_identity,
    )
    before = served.b_rows()

    @RAW
    @given(data=_garbage(valid.SerializeToString() if valid is not None else b""))
    def fuzz(data: bytes) -> None:
        code, details = grpc.StatusCode.OK, ""
        try:
            call(data, metadata=served.metadata(), timeout=30)
        except grpc.RpcError as exc:
            code, details = exc.code(), exc.details()  # type: ignore[attr-defined]
        assert code not in BAD_CODES, f"{method}({data!r}) -> {code}: {details}"
        assert code is not grpc.StatusCode.DEADLINE_EXCEEDED, f"{method}({data!r}) hung"

    fuzz()
    assert served.serving()
    assert served.b_rows() == before


HELLO = pb.WorkerMessage(hello=pb.Hello(worker_id="fuzz-raw", task_types=["fz"], slots=1))


def _stream(served: Served, messages: list[bytes]) -> grpc.StatusCode:
    """Send ``messages`` on one Connect stream, half-close, read to the end."""
    requests: queue.Queue[bytes | None] = queue.Queue()
    for m in messages:
        requests.put(m)
    requests.put(None)

    def source() -> Iterator[bytes]:
        while (item := requests.get()) is not None:
            yield item

    call: Any = served.channel.stream_stream(
        "/tickwheel.v1.WorkerService/Connect",
        request_serializer=_identity,
        response_deserializer=pb.ServerMessage.FromString,
    )(source(), metadata=served.metadata(), timeout=30)
    try:
        for _ in call:
            pass
    except grpc.RpcError as exc:
        return exc.code()  # type: ignore[attr-defined, no-any-return]
    return grpc.StatusCode.OK


def test_raw_bytes_on_the_worker_stream(served: Served) -> None:
    hello = HELLO.SerializeToString()
    valid = pb.WorkerMessage(
        request_id=1,
        heartbeat=pb.Heartbeat(tasks=[pb.TaskRef(task_id=served.a.task_ids[0], fencing_token=1)]),
    ).SerializeToString()
    before = served.b_rows()

    @RAW
    @given(first=st.booleans(), data=st.lists(_garbage(valid), min_size=1, max_size=3))
    def fuzz(first: bool, data: list[bytes]) -> None:
        code = _stream(served, data if first else [hello, *data])
        assert code not in BAD_CODES, f"Connect({data!r}) -> {code}"
        assert code is not grpc.StatusCode.DEADLINE_EXCEEDED, f"Connect({data!r}) hung"

    fuzz()
    assert served.serving()
    assert served.b_rows() == before


def test_every_method_is_fuzzed() -> None:
    """Every method of the three services is in this file (Connect above)."""
    names = {m for _s, m in unary_methods()} | {"Connect"}
    for service in SERVICES:
        assert {m.name for m in pb.DESCRIPTOR.services_by_name[service].methods} <= names
