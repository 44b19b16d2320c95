"""Config validation and the service contract of both memberships (no etcd needed)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

import pytest

from scheduler.cluster import ClusterConfig, LocalMembership, Membership, ShardMembership


def _config(**kw: object) -> ClusterConfig:
    base: dict[str, object] = {"etcd_endpoints": ("127.0.0.1:1",), "node_id": "n1"}
    base.update(kw)
    return ClusterConfig(**base)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"etcd_endpoints": ()}, "etcd_endpoints"),
        ({"etcd_endpoints": ("nohost",)}, "host:port"),
        ({"node_id": ""}, "node_id"),
        ({"node_id": "a/b"}, "node_id"),
        ({"prefix": "x"}, "prefix"),
        ({"prefix": "/x/"}, "prefix"),
        ({"lease_ttl_s": 1.0}, "lease_ttl_s"),
        ({"lease_ttl_s": 2.5}, "lease_ttl_s"),
        ({"safety_margin_s": 5.0}, "safety_margin_s"),
        ({"safety_margin_s": 0.0}, "safety_margin_s"),
        ({"shard_count": 0}, "shard_count"),
        ({"rebalance_interval_s": 0.0}, "rebalance_interval_s"),
        ({"etcd_timeout_s": 0.0}, "etcd_timeout_s"),
        ({"keepalive_interval_s": 4.0}, "keepalive_interval_s"),
    ],
)
def test_config_rejects(kw: dict[str, object], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        _config(**kw)


def test_config_defaults() -> None:
    c = _config()
    assert (c.prefix, c.lease_ttl_s, c.safety_margin_s, c.shard_count) == (
        "/tickwheel",
        5.0,
        1.0,
        256,
    )
    assert c.keepalive_every_s == pytest.approx(5 / 3)
    assert c.trust_window_s == 4.0
    with pytest.raises(AttributeError):
        c.node_id = "x"  # type: ignore[misc]


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, frozenset[int]]] = []
        self.member: ShardMembership | None = None

    async def on_gain(self, shards: Mapping[int, int]) -> None:
        # on_gain runs BEFORE the shards are visible.
        assert self.member is not None
        assert not (set(shards) & self.member.owned())
        self.events.append(("gain", frozenset(shards)))

    async def on_loss(self, shards: frozenset[int]) -> None:
        assert self.member is not None
        assert not (shards & self.member.owned())
        self.events.append(("loss", shards))


async def test_local_membership_owns_everything_between_start_and_stop() -> None:
    rec = Recorder()
    m = LocalMembership(8)
    rec.member = m
    m.set_listener(rec)
    await m.stop()  # never started: fine, and final
    m2 = LocalMembership(8, listener=rec)
    rec.member = m2
    assert m2.owned() == frozenset()
    await m2.start()
    await m2.start()
    assert m2.owned() == frozenset(range(8))
    assert m2.owns(3)
    assert not m2.owns(8)
    await m2.stop()
    await m2.stop()
    assert m2.owned() == frozenset()
    assert rec.events == [("gain", frozenset(range(8))), ("loss", frozenset(range(8)))]


async def test_etcd_membership_stop_before_start_and_twice() -> None:
    m = Membership(_config())
    await m.stop()
    await m.stop()
    await m.start()  # stopped for good: no tasks
    assert m.owned() == frozenset()
    assert m.trusted_for_s() == 0.0


async def test_etcd_membership_concurrent_start_stop_with_etcd_down() -> None:
    """The River stress: start and stop many services at once, etcd unreachable."""
    members = [Membership(_config(node_id=f"n{i}", etcd_timeout_s=0.05)) for i in range(8)]
    await asyncio.gather(*(m.start() for m in members))
    await asyncio.sleep(0)
    await asyncio.gather(*(m.stop() for m in members), *(m.stop() for m in members))
    assert all(m.owned() == frozenset() for m in members)
