"""The upstream policy of a workflow is applied INSIDE the store call that dead-letters
or cancels a parent (PostgreSQL and SQLite, no engine): right after that one call
returns, the descendants are already cancelled (policy cancel) or the children already
count the parent as resolved (policy continue); and if applying the policy fails, the
parent's move is rolled back with it (one transaction)."""

from __future__ import annotations

import dataclasses
import inspect
import uuid
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

import pytest

from scheduler.ids import uuid7
from scheduler.states import TaskState
from scheduler.store import Store
from scheduler.store.postgres import upstream as postgres_upstream
from scheduler.store.sqlite import SqliteStore
from scheduler.store.sqlite import upstream as sqlite_upstream
from scheduler.types import (
    UPSTREAM_FAILED,
    Completion,
    DispatchRequest,
    Failure,
    FencedWrite,
    Outcome,
    Release,
    TaskKey,
    Tenant,
    UpstreamPolicy,
    Workflow,
)
from tests.support.stores import NOW, force_status, new_task

S = TaskState
LEASE = NOW + timedelta(seconds=30)
HORIZON = NOW + timedelta(minutes=60)

Act = Callable[[], Awaitable[None]]


@dataclasses.dataclass(frozen=True)
class Dag:
    """A -> B -> C, plus X (same workflow, no edges); A has no retries left."""

    a: TaskKey
    b: TaskKey
    c: TaskKey
    x: TaskKey


async def make_dag(store: Store, tenant: Tenant, policy: UpstreamPolicy) -> Dag:
    """Insert the workflow through the store; A and X end PRELOADED (claimed)."""
    wf, created = await store.create_workflow(
        Workflow(
            id=uuid7(),
            tenant_id=tenant.id,
            name="dag",
            idempotency_key=f"dag-{uuid.uuid4()}",
            on_upstream_failure=policy,
            node_count=4,
            created_at=NOW,
        )
    )
    assert created
    a = new_task(tenant, workflow_id=wf.id, max_retries=0)
    b = new_task(tenant, workflow_id=wf.id, depends_on=(a.id,))
    c = new_task(tenant, workflow_id=wf.id, depends_on=(b.id,))
    x = new_task(tenant, workflow_id=wf.id)
    res = await store.insert_tasks([a, b, c, x], NOW)
    assert [r.task.unresolved_dependencies for r in res] == [0, 1, 1, 0]
    claimed = await store.claim_preload(None, HORIZON, 10, NOW)
    assert {p.key.id for p in claimed} == {a.id, x.id}
    return Dag(*(r.task.key for r in res))


async def run(store: Store, key: TaskKey) -> int:
    """A PRELOADED task -> DISPATCHED -> RUNNING; its token."""
    [asg] = await store.mark_dispatched(
        [DispatchRequest(key=key, worker_id="w1", lease_expires_at=LEASE)], NOW
    )
    assert asg is not None
    assert await store.ack([FencedWrite(key=key, token=asg.fencing_token)], LEASE, NOW) == [
        Outcome.OK
    ]
    return asg.fencing_token


async def request_cancel(store: Store, key: TaskKey) -> None:
    res = await store.cancel(None, key.id, NOW)
    assert (res.task.status, res.task.cancel_requested) == (S.RUNNING, True)


# Each path prepares A, then returns the ONE store call that moves it.
async def via_fail(store: Store, a: TaskKey) -> Act:
    token = await run(store, a)

    async def act() -> None:
        [r] = await store.fail([Failure(key=a, token=token, error="boom")], NOW)
        assert (r.outcome, r.new_state) == (Outcome.OK, S.DEAD_LETTER)

    return act


async def via_reclaim_dead(store: Store, a: TaskKey) -> Act:
    await run(store, a)

    async def act() -> None:
        r = await store.reclaim_expired(None, LEASE + timedelta(seconds=1), 100)
        assert r.dead_lettered == (a,)

    return act


async def via_reclaim_cancelled(store: Store, a: TaskKey) -> Act:
    await run(store, a)
    await request_cancel(store, a)

    async def act() -> None:
        r = await store.reclaim_expired(None, LEASE + timedelta(seconds=1), 100)
        assert r.cancelled == (a,)

    return act


async def via_cancel_scheduled(store: Store, a: TaskKey) -> Act:
    await force_status(store, a, S.SCHEDULED)

    async def act() -> None:
        res = await store.cancel(None, a.id, NOW)
        assert (res.task.status, res.notify_worker) == (S.CANCELLED, None)

    return act


async def via_cancel_preloaded(store: Store, a: TaskKey) -> Act:
    async def act() -> None:
        res = await store.cancel(None, a.id, NOW)
        assert (res.task.status, res.notify_worker) == (S.CANCELLED, None)

    return act


async def via_confirm_cancel(store: Store, a: TaskKey) -> Act:
    token = await run(store, a)
    await request_cancel(store, a)

    async def act() -> None:
        assert await store.confirm_cancel([FencedWrite(key=a, token=token)], NOW) == [Outcome.OK]

    return act


async def via_release_with_cancel_pending(store: Store, a: TaskKey) -> Act:
    token = await run(store, a)
    await request_cancel(store, a)

    async def act() -> None:
        assert await store.release([Release(key=a, token=token)], NOW) == [Outcome.OK]

    return act


async def via_transition_dead_letter(store: Store, a: TaskKey) -> Act:
    await force_status(store, a, S.RETRYING)

    async def act() -> None:
        assert (await store.transition(a, S.DEAD_LETTER, NOW)).status is S.DEAD_LETTER

    return act


async def via_transition_cancelled(store: Store, a: TaskKey) -> Act:
    await force_status(store, a, S.RETRYING)

    async def act() -> None:
        assert (await store.transition(a, S.CANCELLED, NOW)).status is S.CANCELLED

    return act


PATHS: dict[str, tuple[Callable[[Store, TaskKey], Awaitable[Act]], TaskState]] = {
    "fail": (via_fail, S.DEAD_LETTER),
    "reclaim_dead_letter": (via_reclaim_dead, S.DEAD_LETTER),
    "reclaim_cancel_pending": (via_reclaim_cancelled, S.CANCELLED),
    "cancel_scheduled": (via_cancel_scheduled, S.CANCELLED),
    "cancel_preloaded": (via_cancel_preloaded, S.CANCELLED),
    "confirm_cancel": (via_confirm_cancel, S.CANCELLED),
    "release_cancel_pending": (via_release_with_cancel_pending, S.CANCELLED),
    "transition_dead_letter": (via_transition_dead_letter, S.DEAD_LETTER),
    "transition_cancelled": (via_transition_cancelled, S.CANCELLED),
}


async def assert_untouched(store: Store, dag: Dag) -> None:
    """B and C still wait, with their counters and no audit row."""
    b = await store.get_task(None, dag.b.id)
    c = await store.get_task(None, dag.c.id)
    assert (b.status, b.unresolved_dependencies) == (S.SCHEDULED, 1)
    assert (c.status, c.unresolved_dependencies) == (S.SCHEDULED, 1)
    assert await store.transitions_of(dag.b.id) == []
    assert await store.transitions_of(dag.c.id) == []


@pytest.mark.parametrize("path", list(PATHS))
async def test_cancel_policy_is_applied_by_the_failing_call(
    store: Store, tenant: Tenant, path: str
) -> None:
    prepare, final = PATHS[path]
    dag = await make_dag(store, tenant, UpstreamPolicy.CANCEL)
    act = await prepare(store, dag.a)
    await assert_untouched(store, dag)  # a pending cancel alone changes nothing below
    await act()
    assert (await store.get_task(None, dag.a.id)).status is final
    for key in (dag.b, dag.c):
        t = await store.get_task(None, key.id)
        assert (t.status, t.last_error) == (S.CANCELLED, UPSTREAM_FAILED), key
        trail = [(x.from_state, x.to_state) for x in await store.transitions_of(key.id)]
        assert trail == [(S.SCHEDULED, S.CANCELLED)]
    assert (await store.get_task(None, dag.x.id)).status is S.PRELOADED
    assert await store.claim_preload(None, HORIZON, 10, NOW) == []


@pytest.mark.parametrize("path", list(PATHS))
async def test_continue_policy_resolves_children_in_the_failing_call(
    store: Store, tenant: Tenant, path: str
) -> None:
    prepare, final = PATHS[path]
    dag = await make_dag(store, tenant, UpstreamPolicy.CONTINUE)
    act = await prepare(store, dag.a)
    await assert_untouched(store, dag)
    await act()
    assert (await store.get_task(None, dag.a.id)).status is final
    b = await store.get_task(None, dag.b.id)
    c = await store.get_task(None, dag.c.id)
    # B counts A as resolved but stays SCHEDULED (no audit row); C still waits for B.
    assert (b.status, b.unresolved_dependencies) == (S.SCHEDULED, 0)
    assert (c.status, c.unresolved_dependencies) == (S.SCHEDULED, 1)
    assert await store.transitions_of(dag.b.id) == []
    [claimed] = await store.claim_preload(None, HORIZON, 10, NOW)
    assert claimed.key == dag.b
    assert (await store.get_task(None, dag.c.id)).status is S.SCHEDULED


async def test_continue_policy_workflow_then_runs_to_the_end(store: Store, tenant: Tenant) -> None:
    dag = await make_dag(store, tenant, UpstreamPolicy.CONTINUE)
    act = await via_fail(store, dag.a)
    await act()
    [b] = await store.claim_preload(None, HORIZON, 10, NOW)
    token = await run(store, b.key)
    [done] = await store.complete([Completion(key=b.key, token=token)], NOW)
    # Completion keeps its behaviour: a child at zero comes back PRELOADED at once.
    assert [p.key for p in done.ready_children] == [dag.c]
    assert (await store.get_task(None, dag.c.id)).status is S.PRELOADED


class Boom(Exception):
    """Raised after the policy ran, to prove it shares the parent's transaction."""


def break_policy(store: Store, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Make the upstream policy run, then raise; returns a list counting its calls."""
    owner: Any = sqlite_upstream if isinstance(store, SqliteStore) else postgres_upstream
    name = "apply_upstream"
    real = getattr(owner, name)
    calls: list[int] = []
    wrapper: Any
    if inspect.iscoroutinefunction(real):

        async def wrapper(*args: Any) -> None:
            calls.append(1)
            await real(*args)
            raise Boom

    else:

        def wrapper(*args: Any) -> None:
            calls.append(1)
            real(*args)
            raise Boom

    monkeypatch.setattr(owner, name, wrapper)
    return calls


@pytest.mark.parametrize("path", list(PATHS))
async def test_a_failing_policy_rolls_the_parent_back(
    store: Store, tenant: Tenant, path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    prepare, _ = PATHS[path]
    dag = await make_dag(store, tenant, UpstreamPolicy.CANCEL)
    act = await prepare(store, dag.a)
    before = await store.get_task(None, dag.a.id)
    trail = await store.transitions_of(dag.a.id)
    calls = break_policy(store, monkeypatch)
    with pytest.raises(Boom):
        await act()
    assert calls == [1]
    assert await store.get_task(None, dag.a.id) == before
    assert await store.transitions_of(dag.a.id) == trail
    await assert_untouched(store, dag)


async def test_no_policy_work_unless_a_workflow_task_failed(
    store: Store, tenant: Tenant, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hot path gains no query: plain tasks, retries and plain releases skip it."""
    calls = break_policy(store, monkeypatch)
    [plain] = await store.insert_tasks([new_task(tenant, max_retries=0)], NOW)
    await force_status(store, plain.task.key, S.PRELOADED)
    token = await run(store, plain.task.key)
    [r] = await store.fail([Failure(key=plain.task.key, token=token, error="x")], NOW)
    assert r.new_state is S.DEAD_LETTER
    dag = await make_dag(store, tenant, UpstreamPolicy.CANCEL)
    await force_status(store, dag.a, S.PRELOADED, max_retries=1)
    token = await run(store, dag.a)
    [r] = await store.fail([Failure(key=dag.a, token=token, error="x")], NOW)
    assert r.new_state is S.RETRYING
    token = await run(store, dag.x)
    assert await store.release([Release(key=dag.x, token=token)], NOW) == [Outcome.OK]
    assert calls == []
    await assert_untouched(store, dag)
