"""Every metric Tickwheel exports: name, type, labels and meaning, in one table.

The collectors take their help text from here; ``docs/observability.md`` lists the same
table and a test keeps the two equal (and proves each one moves).
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True, slots=True)
class Metric:
    """One exported metric family."""

    name: str
    """The exposed name (counters with ``_total``)."""
    kind: str
    """counter, gauge or histogram."""
    labels: tuple[str, ...]
    help: str
    process: str
    """Who exports it: node, worker or watchdog."""


def _m(name: str, kind: str, labels: str, process: str, help_: str) -> Metric:
    return Metric(name, kind, tuple(labels.split()) if labels else (), help_, process)


CATALOG: tuple[Metric, ...] = (
    _m("tickwheel_tasks_submitted_total", "counter", "pool type", "node",
       "Tasks created by this node (submits, workflows, schedules, canaries)."),
    _m("tickwheel_tasks_dispatched_total", "counter", "pool type", "node",
       "Tasks this node committed to a worker (DISPATCHED or RUNNING)."),
    _m("tickwheel_tasks_completed_total", "counter", "pool type", "node",
       "Accepted completions."),
    _m("tickwheel_tasks_failed_total", "counter", "pool type", "node",
       "Failed attempts: accepted failures and running tasks whose lease lapsed."),
    _m("tickwheel_tasks_retried_total", "counter", "pool type", "node",
       "Failed attempts that will be retried (RETRYING)."),
    _m("tickwheel_tasks_dead_lettered_total", "counter", "pool type", "node",
       "Failed attempts that ended in DEAD_LETTER."),
    _m("tickwheel_tasks_cancelled_total", "counter", "pool type", "node",
       "Tasks that became CANCELLED on this node."),
    _m("tickwheel_dispatch_lateness_seconds", "histogram", "", "node",
       "Delivery to the worker minus the due time, per task (1 ms to 2 h buckets)."),
    _m("tickwheel_queue_depth", "gauge", "pool state horizon", "node",
       "Open tasks system-wide by state and by when they are due (due, minute, hour, "
       "later); read from the store every depth interval."),
    _m("tickwheel_oldest_due_age_seconds", "gauge", "pool", "node",
       "Age of the oldest task that is due and not yet dispatched (0: none)."),
    _m("tickwheel_wheel_timers", "gauge", "", "node",
       "Tasks waiting in this node's timing wheel."),
    _m("tickwheel_ready_queue_tasks", "gauge", "pool", "node",
       "Due tasks in this node's ready queues, waiting for a worker slot."),
    _m("tickwheel_ready_queue_wait_seconds", "histogram", "pool", "node",
       "Due time to dispatch commit: the time a due task waited for a slot."),
    _m("tickwheel_ready_queue_held", "gauge", "cause", "node",
       "Due tasks in this node's ready queues that a flow rule holds now (issue 43): "
       "cause rate_limited (a rate limit key out of tokens) or paused (PauseDispatch)."),
    _m("tickwheel_dispatch_held_total", "counter", "cause", "node",
       "Tasks a flow rule held back, per dispatch round (as tickwheel_quota_throttled_total), "
       "by cause (rate_limited, paused)."),
    _m("tickwheel_dispatch_held_seconds", "histogram", "cause", "node",
       "Per dispatched task that a flow rule had held: how long, by cause (from its due "
       "time, or the hold's start if later, to its dispatch commit): lateness by cause."),
    _m("tickwheel_pool_slots_used", "gauge", "pool", "node",
       "Tasks of the pool on workers now (dispatched by this node)."),
    _m("tickwheel_pool_slots_free", "gauge", "pool", "node",
       "Free slots of the connected workers that serve the pool."),
    _m("tickwheel_worker_sessions", "gauge", "", "node",
       "Connected worker streams."),
    _m("tickwheel_stale_writes_total", "counter", "", "node",
       "Worker writes refused by fencing (zombies, lost leases, unknown tasks)."),
    _m("tickwheel_lease_expiries_total", "counter", "outcome", "node",
       "Tasks whose lease lapsed, by what the reaper did (requeued, retrying, "
       "dead_letter, cancelled)."),
    _m("tickwheel_engine_loop_stalled_seconds", "gauge", "loop", "node",
       "Seconds a loop that holds the node's promise (dispatcher, preloader, store "
       "writes) has had work and made no progress; 0 while it does. Past "
       "stall_after_s the node reports NOT_SERVING."),
    _m("tickwheel_engine_loop_stalls_total", "counter", "loop", "node",
       "Times a loop that holds the node's promise crossed stall_after_s without progress "
       "(one per stall, with an error log line naming the loop and its last error)."),
    _m("tickwheel_engine_loop_restarts_total", "counter", "loop", "node",
       "Times a supervised background loop of the engine died on an exception and was "
       "started again (each logged with its traceback)."),
    _m("tickwheel_store_commit_seconds", "histogram", "kind", "node",
       "Latency of the batched store writes by kind (insert, dispatch, ack, heartbeat, "
       "complete, fail, release)."),
    _m("tickwheel_store_batch_size", "histogram", "kind", "node",
       "Rows per batched store write, by kind."),
    _m("tickwheel_shards_owned", "gauge", "", "node",
       "Shards this node serves."),
    _m("tickwheel_shard_epoch_changes_total", "counter", "", "node",
       "Shards this node claimed (each claim raises the shard's epoch)."),
    _m("tickwheel_index_rebuilds_total", "counter", "", "node",
       "Shards whose Redis time index this node rebuilt from the store (a gained shard "
       "whose index was lost, or an owned one found lost: FLUSHALL, a Redis restart)."),
    _m("tickwheel_quota_throttled_total", "counter", "tenant", "node",
       "Tasks a tenant quota held back, per dispatch round (tenant id; the first N "
       "tenants, then other)."),
    _m("tickwheel_canary_lag_seconds", "gauge", "", "node",
       "Dispatch lag of the latest canary task (0 before the first)."),
    _m("tickwheel_replication_lag_seconds", "gauge", "", "node",
       "Largest standby replay_lag seen by the PostgreSQL primary, as last measured (0 "
       "when PostgreSQL shows NULL: caught up and idle, no standby, or SQLite)."),
    _m("tickwheel_replication_lag_bytes", "gauge", "", "node",
       "Bytes of WAL written on the PostgreSQL primary that the slowest standby has not "
       "replayed (0 caught up, without a standby or on SQLite)."),
    _m("tickwheel_replication_standbys", "gauge", "", "node",
       "Standbys streaming from the PostgreSQL primary (0 on SQLite)."),
    _m("tickwheel_worker_tasks_handled_total", "counter", "type outcome", "worker",
       "Attempts this worker ran, by outcome (completed, failed, cancelled, released, "
       "rejected, uncommitted)."),
    _m("tickwheel_worker_handler_seconds", "histogram", "type", "worker",
       "Handler run time per attempt."),
    _m("tickwheel_worker_slots_used", "gauge", "", "worker",
       "Tasks this worker holds now."),
    _m("tickwheel_worker_slots_free", "gauge", "", "worker",
       "Slots of this worker not holding a task."),
    _m("tickwheel_worker_stream_reconnects_total", "counter", "", "worker",
       "Times this worker's stream (one per node it streams to) broke and it connected again."),
    _m("tickwheel_watchdog_alerts_total", "counter", "case", "watchdog",
       "Alerts that started firing, by case."),
    _m("tickwheel_watchdog_alerts_firing", "gauge", "case", "watchdog",
       "Alerts firing now, by case."),
)  # fmt: skip
"""The whole table, in the order of docs/observability.md."""

BY_NAME = {m.name: m for m in CATALOG}


def help_of(name: str) -> str:
    """The help text of ``name``."""
    return BY_NAME[name].help
