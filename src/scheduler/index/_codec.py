"""How a :class:`~scheduler.store.Preloaded` is written into the index and read back.

Member = task id (32 hex digits), so re-adding a task moves it instead of duplicating it.
Its details sit beside it as ``id_hex|scheduled_at_us|due_at_us|tenant_hex|pool|type``
(the id again, so a takeover reads values only: half the strings to parse; type last: it
may contain ``|``). Times are whole microseconds since the epoch, exactly what
PostgreSQL stores, so the rebuilt :class:`~scheduler.store.TaskKey` names the same row
(and partition). The score is ``floor(due_at_us / 1000)``: the due time in ms. A task
with a rate limit key (issue 43) has ``pool~key_hex`` in the pool's place (hex: a key
may contain ``|`` too).
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from scheduler.types import Pool, Preloaded, TaskKey

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def to_us(ts: datetime) -> int:
    """Whole microseconds since the epoch (exact; timezone-aware input)."""
    delta = ts - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def from_us(us: int) -> datetime:
    """The UTC datetime of :func:`to_us`."""
    return _EPOCH + timedelta(microseconds=us)


def member(p: Preloaded) -> str:
    """The sorted-set member of a task."""
    return p.key.id.hex


def score_ms(p: Preloaded) -> int:
    """The sorted-set score: due time in whole milliseconds since the epoch."""
    return to_us(p.due_at) // 1000


def encode(p: Preloaded) -> str:
    """The details stored beside the member."""
    return (
        f"{p.key.id.hex}|{to_us(p.key.scheduled_at)}|{to_us(p.due_at)}|{p.tenant_id.hex}|"
        f"{p.pool}{'~' + p.rate_key.encode().hex() if p.rate_key else ''}|{p.type}"
    )


class Decoder:
    """Rebuilds :class:`Preloaded` values; caches tenants, pools and types (few distinct)."""

    def __init__(self, shard: int) -> None:
        self.shard = shard
        self._tenants: dict[str, uuid.UUID] = {}
        self._pools: dict[str, Pool] = {}
        self._types: dict[str, str] = {}

    @staticmethod
    def split(value: str | bytes) -> list[str]:
        """The six fields of a stored value."""
        text = value.decode() if isinstance(value, bytes) else value
        return text.split("|", 5)

    def build(self, fields: list[str]) -> Preloaded:
        """The :class:`Preloaded` of split fields."""
        id_hex, sched, due, tenant, pool, type_ = fields
        rate_key = ""
        if "~" in pool:
            pool, key_hex = pool.split("~", 1)
            rate_key = bytes.fromhex(key_hex).decode()
        tenant_id = self._tenants.get(tenant)
        if tenant_id is None:
            tenant_id = self._tenants[tenant] = uuid.UUID(hex=tenant)
        pool_ = self._pools.get(pool)
        if pool_ is None:
            pool_ = self._pools[pool] = Pool(pool)
        return Preloaded(
            key=TaskKey(
                uuid.UUID(int=int(id_hex, 16)), _EPOCH + timedelta(microseconds=int(sched))
            ),
            due_at=_EPOCH + timedelta(microseconds=int(due)),
            tenant_id=tenant_id,
            shard_id=self.shard,
            pool=pool_,
            type=self._types.setdefault(type_, type_),
            rate_key=rate_key,
        )

    def many(self, values: list[str] | list[bytes] | list[str | bytes]) -> list[Preloaded]:
        """Decode stored values, earliest due first (ties by task id)."""
        rows = [self.split(v) for v in values]
        rows.sort(key=lambda f: (int(f[2]) // 1000, f[0]))
        return [self.build(f) for f in rows]
