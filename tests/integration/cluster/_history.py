"""Ownership history: what each node accepted, and a checker for overlaps.

Two records, both checked:

- every ``on_gain`` with its claim revision (the etcd create revision of the ownership
  key): one revision of one shard must name exactly one node;
- a sampler that reads every node's ``owned()`` (what the engine would trust) every few
  milliseconds: at no sample may two nodes own one shard, and per shard the intervals
  during which each node owned it must not overlap.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import itertools
import time
from collections.abc import Iterable, Mapping

from scheduler.cluster import Membership


class RecordingListener:
    """A :class:`ShardListener` that keeps what it was told (and can be slowed down)."""

    def __init__(self, node_id: str, history: History) -> None:
        self.node_id = node_id
        self._history = history
        self.current: set[int] = set()
        self.gains = 0
        self.losses = 0

    async def on_gain(self, shards: Mapping[int, int]) -> None:
        self.gains += 1
        self.current |= set(shards)
        self._history.claims.extend((s, rev, self.node_id) for s, rev in shards.items())

    async def on_loss(self, shards: frozenset[int]) -> None:
        self.losses += 1
        self.current -= shards


class History:
    """Claims and sampled ownership intervals of a group of nodes."""

    def __init__(self) -> None:
        self.claims: list[tuple[int, int, str]] = []
        # shard -> list of [node, first_seen, last_seen]
        self.intervals: dict[int, list[list[object]]] = collections.defaultdict(list)
        self.conflicts: list[tuple[float, int, list[str]]] = []
        self.samples = 0
        self._task: asyncio.Task[None] | None = None

    def sample(self, members: Iterable[Membership]) -> None:
        now = time.monotonic()
        seen: dict[int, list[str]] = collections.defaultdict(list)
        for m in members:
            for s in m.owned():
                seen[s].append(m.node_id)
        self.samples += 1
        for s, nodes in seen.items():
            if len(nodes) > 1:
                self.conflicts.append((now, s, nodes))
            runs = self.intervals[s]
            if runs and runs[-1][0] == nodes[0] and runs[-1][3] == self.samples - 1:
                runs[-1][2] = now
                runs[-1][3] = self.samples
            else:
                runs.append([nodes[0], now, now, self.samples])

    def watch(self, members: Iterable[Membership], every_s: float = 0.005) -> None:
        async def loop() -> None:
            while True:
                self.sample(members)
                await asyncio.sleep(every_s)

        self._task = asyncio.create_task(loop(), name="test-ownership-sampler")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def check(self) -> None:
        assert not self.conflicts, f"two owners at once: {self.conflicts[:5]}"
        by_rev: dict[tuple[int, int], set[str]] = collections.defaultdict(set)
        for shard, rev, node in self.claims:
            by_rev[(shard, rev)].add(node)
        multi = {k: v for k, v in by_rev.items() if len(v) > 1}
        assert not multi, f"one claim revision accepted by several nodes: {multi}"
        for shard, runs in self.intervals.items():
            for a, b in itertools.pairwise(runs):
                if a[0] != b[0]:
                    assert float(a[2]) < float(b[1]), f"shard {shard}: {a} overlaps {b}"  # type: ignore[arg-type]
