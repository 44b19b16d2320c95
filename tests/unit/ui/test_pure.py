"""The dashboard's pure parts: the DAG layout and the call metadata (the sessions map:
test_sessions.py; the boundary: test_boundary.py)."""

from __future__ import annotations

import uuid

import pytest

from scheduler.ui._api import Credentials, call_metadata, parse_tenant
from scheduler.ui._dag import NODE_H, NODE_W, layout


def test_layout_puts_each_node_at_its_longest_path_depth_left_to_right() -> None:
    nodes = [(n, "SCHEDULED", f"t-{n}") for n in ("a", "b", "c", "d")]
    # a -> b -> d and a -> d: d sits right of b (depth 2), not beside it.
    out = layout(nodes, [("a", "b"), ("b", "d"), ("a", "d"), ("a", "c")])
    by_id = {n.id: n for n in out.nodes}
    assert [by_id[n].layer for n in "abcd"] == [0, 1, 1, 2]
    assert by_id["b"].x == by_id["c"].x > by_id["a"].x
    assert by_id["d"].x > by_id["b"].x
    assert {(e.parent, e.child) for e in out.edges} == {
        ("a", "b"),
        ("b", "d"),
        ("a", "d"),
        ("a", "c"),
    }
    for e in out.edges:  # from the parent's right side to the child's left side
        assert (e.x1, e.y1) == (by_id[e.parent].x + NODE_W, by_id[e.parent].y + NODE_H // 2)
        assert (e.x2, e.y2) == (by_id[e.child].x, by_id[e.child].y + NODE_H // 2)
    ys = sorted((n.y, n.y + out.node_h) for n in out.nodes if n.layer == 1)
    assert ys[0][1] < ys[1][0]  # no overlap in a column
    assert all(n.x >= 0 and n.x + out.node_w <= out.width for n in out.nodes)
    assert all(n.y >= 0 and n.y + out.node_h <= out.height for n in out.nodes)


def test_a_12_wide_fan_out_is_2_columns_and_12_rows() -> None:
    kids = [f"k{i:02}" for i in range(12)]
    nodes = [(n, "SCHEDULED", f"t-{n}") for n in ("root", *kids)]
    out = layout(nodes, [("root", k) for k in kids])
    by_id = {n.id: n for n in out.nodes}
    assert {by_id[k].x for k in kids} == {by_id["root"].x + NODE_W + 64}
    assert len({by_id[k].y for k in kids}) == 12
    assert out.width < out.height  # taller than wide: it fits a page's width
    # The root sits at the middle of its children.
    assert min(by_id[k].y for k in kids) < by_id["root"].y < max(by_id[k].y for k in kids)


def test_layout_of_one_node_and_of_none() -> None:
    assert len(layout([("x", "COMPLETED", "t")], []).nodes) == 1
    empty = layout([], [])
    assert empty.nodes == []
    assert empty.edges == []


def test_call_metadata_per_credentials_and_tenant() -> None:
    tenant = str(uuid.uuid4())
    key, admin, both = Credentials("k"), Credentials(None, "t"), Credentials("k", "t")
    assert call_metadata(key, None) == (("x-api-key", "k"),)
    assert call_metadata(key, tenant) == (("x-api-key", "k"),)  # a key never acts for another
    assert call_metadata(admin, None) == (("x-admin-token", "t"),)
    assert call_metadata(admin, tenant) == (("x-admin-token", "t"), ("x-tenant-id", tenant))
    assert call_metadata(both, None) == (("x-api-key", "k"),)
    assert call_metadata(both, "all") == (("x-admin-token", "t"),)
    assert parse_tenant("") is None
    assert parse_tenant("all") == "all"
    assert parse_tenant(tenant.upper()) == tenant
    with pytest.raises(ValueError, match="badly formed"):
        parse_tenant("robert'); drop")
