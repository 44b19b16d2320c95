"""Stream fuzzer (issue #15): random sequences of worker-stream messages built from a
valid run and mutated (reordered, duplicated, dropped, other sessions' and tenants'
ids and tokens, stale tokens, random field values), interleaved with stream closes and
reconnects under the same worker_id.

Checked after every example, from the store's audit trail and task rows:
- no stream ends with, and no Result carries, INTERNAL or UNKNOWN; the server serves;
- every transition in the audit trail is legal (states.TRANSITIONS);
- a new fencing token appears only on a dispatch transition (ownership changes only by
  dispatch);
- every accepted write came from a stream of the tenant and the worker id the task was
  dispatched to under that very token (never a stale token, another worker or tenant).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from scheduler._proto.tickwheel.v1 import tickwheel_pb2_grpc as pbg
from scheduler.client import TaskSpec
from scheduler.states import TaskState, is_legal
from tests.integration.transport.conftest import Stack, running_stack

settings.register_profile(
    "default",
    max_examples=int(os.environ.get("STREAM_FUZZ_EXAMPLES", "500")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
settings.register_profile(
    "fuzz",
    max_examples=5000,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "default")
FORBIDDEN = {grpc.StatusCode.INTERNAL.value[0], grpc.StatusCode.UNKNOWN.value[0]}
DISPATCH = {(TaskState.PRELOADED, TaskState.DISPATCHED), (TaskState.PRELOADED, TaskState.RUNNING)}
KINDS = (
    "ack",
    "heartbeat",
    "completion",
    "failure",
    "release",
    "checkpoint",
    "cancel_confirmed",
    "completions",
    "credit",
    "drain",
    "empty",
)


class Line:
    """One raw stream: its assignments (recorded as given) and answers by request id."""

    def __init__(self, call: Any, tenant: str, worker_id: str) -> None:
        self.call = call
        self.tenant = tenant
        self.worker_id = worker_id
        self.given: list[pb.Assignment] = []
        self.results: dict[int, pb.Result] = {}
        self.error: grpc.aio.AioRpcError | None = None
        self.ended = asyncio.Event()
        self._news = asyncio.Event()
        self.pump = asyncio.create_task(self._pump())

    async def _pump(self) -> None:
        try:
            while True:
                msg = await self.call.read()
                if msg is grpc.aio.EOF:  # type: ignore[attr-defined]
                    return
                kind = msg.WhichOneof("kind")
                if kind == "assignments":
                    self.given.extend(msg.assignments.tasks)
                elif kind == "result":
                    self.results[msg.result.request_id] = msg.result
                self._news.set()
        except grpc.aio.AioRpcError as exc:
            self.error = exc
        finally:
            self.ended.set()
            self._news.set()

    async def wait(self, until: Any, within_s: float = 10.0) -> bool:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(within_s):
                while not until():
                    if self.ended.is_set():
                        return False
                    self._news.clear()
                    await self._news.wait()
                return True
        return False

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            await self.call.done_writing()
        await asyncio.wait([self.pump], timeout=5)
        self.call.cancel()
        self.pump.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.pump


async def _open(channel: Any, key: str, tenant: str, worker_id: str) -> Line:
    stub: Any = pbg.WorkerServiceStub(channel)  # type: ignore[no-untyped-call]
    call = stub.Connect(metadata=(("x-api-key", key),))
    await call.write(
        pb.WorkerMessage(hello=pb.Hello(worker_id=worker_id, task_types=["fz"], slots=3))
    )
    welcome = await call.read()
    assert welcome.WhichOneof("kind") == "welcome", welcome
    return Line(call, tenant, worker_id)


def _ref(a: pb.Assignment) -> pb.TaskRef:
    return pb.TaskRef(task_id=a.task_id, fencing_token=a.fencing_token, scheduled_at=a.scheduled_at)


action = st.one_of(
    st.tuples(
        st.just("send"),
        st.integers(0, 3),  # stream: 0/1 worker "w" (1 = its reconnect), 2 worker "x", 3 tenant B
        st.sampled_from(KINDS),
        st.integers(0, 7),  # which known ref (modulo), any stream's
        st.sampled_from([0, 0, 0, -1, 1, 5]),  # token mutation
        st.sampled_from(["keep", "keep", "keep", "no_stamp", "bad_id", "random_id", "zero"]),
        st.integers(0, 3),  # refs in one message
        st.integers(0, 3),  # credit slots
    ),
    st.tuples(st.just("close"), st.integers(0, 3)),
    st.tuples(st.just("hello"), st.integers(0, 3)),
)


def _mutate(ref: pb.TaskRef, delta: int, how: str) -> pb.TaskRef:
    out = pb.TaskRef()
    out.CopyFrom(ref)
    out.fencing_token = ref.fencing_token + delta
    if how == "no_stamp":
        out.ClearField("scheduled_at")
    elif how == "bad_id":
        out.task_id = "{" + ref.task_id + "}"
    elif how == "random_id":
        out.task_id = str(uuid.uuid4())
    elif how == "zero":
        out.fencing_token = 0
    return out


def _message(kind: str, refs: list[pb.TaskRef], slots: int) -> pb.WorkerMessage:
    first = refs[0] if refs else pb.TaskRef()
    if kind == "ack":
        return pb.WorkerMessage(ack=pb.Ack(tasks=refs))
    if kind == "heartbeat":
        return pb.WorkerMessage(heartbeat=pb.Heartbeat(tasks=refs))
    if kind == "completion":
        return pb.WorkerMessage(completion=pb.Completion(task=first))
    if kind == "completions":
        return pb.WorkerMessage(
            completions=pb.Completions(items=[pb.Completion(task=r) for r in refs])
        )
    if kind == "failure":
        return pb.WorkerMessage(failure=pb.Failure(task=first, error="fz", retryable=True))
    if kind == "release":
        return pb.WorkerMessage(release=pb.Release(task=first))
    if kind == "checkpoint":
        return pb.WorkerMessage(checkpoint=pb.Checkpoint(task=first))
    if kind == "cancel_confirmed":
        return pb.WorkerMessage(cancel_confirmed=pb.CancelConfirmed(task=first))
    if kind == "credit":
        return pb.WorkerMessage(credit=pb.Credit(slots=slots))
    if kind == "drain":
        return pb.WorkerMessage(drain=pb.Drain())
    return pb.WorkerMessage()


def _canon(task_id: str) -> str:
    """A task id as the server spells it back (any UUID spelling it accepts)."""
    try:
        return str(uuid.UUID(task_id))
    except ValueError:
        return task_id


GIVEN: dict[tuple[str, int], set[str]] = {}
EXAMPLES = itertools.count()


class Ledger:
    """What the fuzzer saw: who was given which (task, token), what was accepted."""

    def __init__(self) -> None:
        self.accepted: list[tuple[str, str, str, int]] = []  # tenant, worker, task, token
        self.bad_codes: list[str] = []
        self.tasks: set[str] = set()
        self.ids = iter(range(1, 1 << 62))
        self.given: dict[tuple[str, int], set[str]] = {}


@pytest.fixture
async def fuzz_stack(tmp_path: Path) -> AsyncIterator[Stack]:
    async with running_stack("sqlite:///" + str(tmp_path / "fz.db")) as s:
        yield s


async def _example(stack: Stack, channel: Any, plan: list[Any], led: Ledger) -> None:
    client = await stack.client()
    try:
        made = await client.submit_many([TaskSpec(type="fz", payload={}, strict_timing=True)] * 2)
    finally:
        await client.close()
    led.tasks.update(str(t.id) for t in made)
    # Worker ids of this example only: an earlier example's RUNNING tasks, adopted by a
    # reconnect of the same id, would fill the slots and this example would get nothing.
    n = next(EXAMPLES)
    w, x = f"w{n}", f"x{n}"
    keys = {0: (stack.key_a, stack.tenant_a, w), 2: (stack.key_a, stack.tenant_a, x)}
    keys[1] = keys[0]
    keys[3] = (stack.key_b, stack.tenant_b, w)  # tenant B, the same worker id
    lines: dict[int, Line] = {0: await _open(channel, *keys[0])}
    everything: list[Line] = [lines[0]]
    # Some assignments to work with (older examples' released tasks are due first, so
    # not necessarily this example's own two).
    await lines[0].wait(lambda: len(lines[0].given) >= len(made), 0.5)

    async def line(i: int) -> Line:
        if i not in lines or lines[i].ended.is_set():
            lines[i] = await _open(channel, *keys[i])
            everything.append(lines[i])
        return lines[i]

    for step in plan:
        if step[0] == "close":
            if step[1] in lines:
                await lines.pop(step[1]).close()
            continue
        target = await line(step[1])
        if step[0] == "hello":
            hello = pb.Hello(worker_id=target.worker_id, task_types=["fz"], slots=1)
            await target.call.write(pb.WorkerMessage(hello=hello))
            await target.wait(lambda t=target: t.ended.is_set(), 10)
            code = target.error.code() if target.error else None
            if code is not grpc.StatusCode.INVALID_ARGUMENT:
                led.bad_codes.append(f"second hello ended with {code}")
            lines.pop(step[1], None)
            continue
        _, _, kind, pick, delta, how, n, slots = step
        known = [a for ln in everything for a in ln.given]
        refs = []
        for j in range(n if kind in ("ack", "heartbeat", "completions") else 1):
            if known:
                refs.append(_mutate(_ref(known[(pick + j) % len(known)]), delta, how))
        msg = _message(kind, refs, slots)
        msg.request_id = next(led.ids)
        gone = (grpc.aio.AioRpcError, grpc.aio.UsageError, asyncio.InvalidStateError)
        with contextlib.suppress(*gone):
            await target.call.write(msg)
        rid = msg.request_id
        got = await target.wait(lambda t=target, r=rid: r in t.results, 10)
        if not got:
            code = target.error.code() if target.error else None
            if code is not None and code.value[0] in FORBIDDEN:
                led.bad_codes.append(f"{kind}: stream ended with {code}")
            elif not target.ended.is_set():
                led.bad_codes.append(f"{kind}: no Result within 10 s")
            else:
                led.bad_codes.append(f"{kind}: stream ended ({code}) for a per-item problem")
            continue
        result = target.results.pop(rid)
        if result.code in FORBIDDEN:
            led.bad_codes.append(f"{kind}: Result code {result.code} {result.message}")
        ids = [_canon(r.task_id) for r in refs]
        for r in result.results:
            if r.ok:
                token = next(x.fencing_token for x in refs if _canon(x.task_id) == r.task_id)
                if kind in (
                    "ack",
                    "heartbeat",
                    "completion",
                    "completions",
                    "failure",
                    "release",
                    "checkpoint",
                    "cancel_confirmed",
                ):
                    led.accepted.append((target.tenant, target.worker_id, r.task_id, token))
        assert all(r.task_id in ids for r in result.results)
    for ln in list(lines.values()):
        await ln.close()
    for ln in everything:  # who was given which (task, token): the pushes themselves
        for a in ln.given:
            led.given.setdefault((a.task_id, a.fencing_token), set()).add(ln.worker_id)


async def _check(stack: Stack, led: Ledger, given: dict[tuple[str, int], set[str]]) -> list[str]:
    problems = list(led.bad_codes)
    store = stack.engine.store
    for tenant, worker, task, token in led.accepted:
        if tenant != stack.tenant_a:
            problems.append(f"tenant B's write accepted for {task}")
        elif worker not in given.get((task, token), set()):
            problems.append(f"write by {worker} accepted for {task} token {token}")
    for task in led.tasks:
        trail = await store.transitions_of(uuid.UUID(task))
        for prev, cur in itertools.pairwise(trail):
            if not is_legal(cur.from_state, cur.to_state):
                problems.append(f"{task}: illegal {cur.from_state} -> {cur.to_state}")
            if prev.to_state is not cur.from_state:
                problems.append(f"{task}: trail gap {prev.to_state} / {cur.from_state}")
            if cur.fencing_token != prev.fencing_token and (
                (cur.from_state, cur.to_state) not in DISPATCH
            ):
                problems.append(
                    f"{task}: token {prev.fencing_token}->{cur.fencing_token} by "
                    f"{cur.from_state}->{cur.to_state}"
                )
    return problems


@settings(settings.get_profile(PROFILE))
@given(plan=st.lists(action, min_size=1, max_size=8))
async def test_stream_fuzz(fuzz_stack: Stack, plan: list[Any]) -> None:
    stack = fuzz_stack
    led = Ledger()
    async with grpc.aio.insecure_channel(stack.target) as channel:
        given_to: dict[tuple[str, int], set[str]] = {}
        await _example(stack, channel, plan, led)
    led.tasks.update(a[2] for a in led.accepted)
    # Across examples a task may have been pushed to an earlier example's stream of the
    # same worker id (reconnect adoption): keep the pushes of every example.
    GIVEN.update({k: GIVEN.get(k, set()) | v for k, v in led.given.items()})
    given_to = GIVEN
    problems = await _check(stack, led, given_to)
    assert problems == [], problems
    # The server keeps serving.
    client = await stack.client()
    try:
        assert (await client.get(next(iter(led.tasks)))).id
    finally:
        await client.close()
