"""The workflow protocol (``protocol/workflows.py``): workflow records and views."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest

from scheduler._errors import (
    NotFound,
)
from scheduler.states import TaskState
from scheduler.store import Store
from scheduler.types import (
    Tenant,
    UpstreamPolicy,
    Workflow,
)
from tests.support.stores import (
    NOW,
    new_task,
    new_tenant,
)

S = TaskState
HORIZON = NOW + timedelta(minutes=60)


def _workflow(tenant: Tenant, key: str = "wf-1", **kw: object) -> Workflow:
    fields: dict[str, object] = {
        "id": uuid.uuid4(),
        "tenant_id": tenant.id,
        "name": "nightly",
        "idempotency_key": key,
        "on_upstream_failure": UpstreamPolicy.CANCEL,
        "node_count": 2,
        "created_at": NOW,
    }
    fields.update(kw)
    return Workflow(**fields)  # type: ignore[arg-type]


async def test_a_workflow_is_created_once_per_key(store: Store, tenant: Tenant) -> None:
    wf = _workflow(tenant)
    made, created = await store.create_workflow(wf)
    assert created
    assert made == wf
    again, created = await store.create_workflow(_workflow(tenant, name="other"))
    assert not created
    assert again == wf
    other = await store.create_tenant(new_tenant("other"))
    theirs, created = await store.create_workflow(_workflow(other))
    assert created  # another tenant may use the same key
    assert theirs.tenant_id == other.id


async def test_get_workflow_has_its_tasks_and_edges(store: Store, tenant: Tenant) -> None:
    wf, _ = await store.create_workflow(_workflow(tenant))
    a = new_task(tenant, workflow_id=wf.id)
    b = new_task(tenant, workflow_id=wf.id, depends_on=(a.id,))
    await store.insert_tasks([a, b], NOW)
    view = await store.get_workflow(tenant.id, wf.id)
    assert view.workflow == wf
    assert {t.id for t in view.tasks} == {a.id, b.id}
    assert view.edges == ((a.id, b.id),)
    assert (await store.get_workflow(None, wf.id)).workflow == wf
    with pytest.raises(NotFound):
        await store.get_workflow(uuid.uuid4(), wf.id)
    with pytest.raises(NotFound):
        await store.get_workflow(tenant.id, uuid.uuid4())


async def test_list_workflows_newest_first(store: Store, tenant: Tenant) -> None:
    made = [
        (await store.create_workflow(_workflow(tenant, f"k{i}", created_at=NOW + timedelta(i))))[0]
        for i in range(3)
    ]
    assert await store.list_workflows(tenant.id, 10) == made[::-1]
    assert await store.list_workflows(tenant.id, 2) == made[:0:-1]
    other = await store.create_tenant(new_tenant("other"))
    assert await store.list_workflows(other.id, 10) == []
