"""Store configuration: one frozen dataclass, units in the field names."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class StoreConfig:
    """Options shared by every store implementation (some apply to PostgreSQL only)."""

    payload_limit_bytes: int = 1024 * 1024
    """Largest accepted JSON payload (UTF-8 bytes of its serialisation); also applies to
    results and checkpoints."""
    partition_days_ahead: int = 7
    """PostgreSQL: day partitions created ahead of today by :meth:`maintain`."""
    retention_days: int | None = None
    """PostgreSQL: partitions whose day ended more than this many days ago and that hold
    only terminal tasks are detached by :meth:`maintain` (None keeps everything)."""
    preload_sweep_interval_s: float = 10.0
    """PostgreSQL: how often ``claim_preload`` also sweeps every partition (overdue tasks
    of earlier days, retries whose backoff crossed midnight); in between it touches only
    the partitions of the look-ahead window."""
    pool_min_size: int = 1
    pool_max_size: int = 4
    """PostgreSQL connection pool bounds."""
    warm_up: bool = False
    """PostgreSQL: at open, fill the pool to ``pool_max_size`` connections and prepare
    the hot path's statements (dispatch, worker writes, submit) on each, so the first
    tasks after a start do not pay each new connection's first use of the task tables
    (about 10 ms a statement per backend; the first ack-first tasks after ``serve``
    started ran 100-130 ms late). ``serve`` and ``dev`` turn it on."""
    command_timeout_s: float = 30.0
    """PostgreSQL per-statement timeout."""
    call_timeout_s: float = 60.0
    """PostgreSQL: the deadline of one whole store call (waiting for a pooled
    connection, connecting, every statement, the commit); past it the call fails with
    ``StoreUnavailable``. No call waits for ever on a server that accepts connections
    and never answers."""
    connect_timeout_s: float = 5.0
    """PostgreSQL: how long opening one connection may take (asyncpg's default is 60 s)."""
    idle_in_transaction_timeout_s: float = 5.0
    """PostgreSQL: the server ends a session of ours that sits this long inside a
    transaction without sending anything, and its row locks go with it. Our calls never
    pause inside a transaction; a process that was frozen (SIGSTOP, a GC pause), cut
    off or killed between two statements does, and its locks must not hold back the
    node that took its shards (issue 42; docs/cluster.md "What a paused node holds")."""
    lock_timeout_s: float = 10.0
    """PostgreSQL: a statement of ours waits at most this long for a row lock, then fails
    (and is tried again): no lock anyone else holds stops a loop for longer."""

    def session_settings(self) -> dict[str, str]:
        """The PostgreSQL settings every pooled session starts with that bound what a
        lost or frozen peer can hold: the idle-in-transaction and lock timeouts above,
        and TCP keep-alives (idle 5 s, every 2 s, 3 probes) so the server notices a
        client whose host went away."""
        return {
            "idle_in_transaction_session_timeout": str(
                int(self.idle_in_transaction_timeout_s * 1000)
            ),
            "lock_timeout": str(int(self.lock_timeout_s * 1000)),
            "tcp_keepalives_idle": "5",
            "tcp_keepalives_interval": "2",
            "tcp_keepalives_count": "3",
        }

    actor: str = "scheduler"
    """Written as ``actor`` on audit rows for moves the scheduler makes (worker writes
    record the worker id)."""
    row_level_security: bool = True
    """PostgreSQL: run every call in a transaction scoped to its tenant
    (``SET LOCAL tickwheel.tenant``; the scheduler's own paths: ``'*'``), so the
    row-level security policies of migration 0007 hide other tenants' rows even from a
    query that forgets ``tenant_id``. Off: the connections see every row (isolation
    rests on the queries alone). Cost: docs/benchmarks.md; rules: docs/security.md."""

    def __post_init__(self) -> None:
        if self.payload_limit_bytes <= 0:
            raise ValueError("payload_limit_bytes must be positive")
        if self.partition_days_ahead < 0:
            raise ValueError("partition_days_ahead must be >= 0")
        if self.retention_days is not None and self.retention_days < 1:
            raise ValueError("retention_days must be >= 1 or None")
        if self.preload_sweep_interval_s < 0:
            raise ValueError("preload_sweep_interval_s must be >= 0")
        if not 1 <= self.pool_min_size <= self.pool_max_size:
            raise ValueError("need 1 <= pool_min_size <= pool_max_size")
        if self.command_timeout_s <= 0:
            raise ValueError("command_timeout_s must be positive")
        if self.call_timeout_s <= 0 or self.connect_timeout_s <= 0:
            raise ValueError("call_timeout_s and connect_timeout_s must be positive")
        if self.idle_in_transaction_timeout_s < 0.001 or self.lock_timeout_s < 0.001:
            raise ValueError("idle_in_transaction_timeout_s and lock_timeout_s must be >= 1 ms")
