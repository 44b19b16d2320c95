"""Admission: the checks every new task passes and the only builder of new tasks.

Owns the task limits and the rule that decides a new task's first state: PRELOADED
(straight into this node's wheel) when it is due inside the look-ahead *and* its shard
is this node's, else SCHEDULED for its owner's pre-loader. Calls nothing that does I/O:
it reads the configuration, the clock it is given and the shard state. Called by the
submit path of the engine facade, workflows, schedules and the canary, so no caller
can bypass the rule.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from scheduler._errors import InvalidArgument, ResourceExhausted
from scheduler.engine._config import EngineConfig
from scheduler.engine._shard_state import ShardState
from scheduler.engine._types import SubmitSpec
from scheduler.ids import uuid7
from scheduler.jitter import JitterMode, effective_mode, jitter_offset_ms, shard_of
from scheduler.limits import (
    MAX_IDEMPOTENCY_KEY_CHARS,
    MAX_RETRIES,
    MAX_TIMEOUT_S,
    MAX_TIMESTAMP_SECONDS,
    MAX_TYPE_CHARS,
    MIN_TIMESTAMP_SECONDS,
    TIMESTAMP_RANGE_TEXT,
)
from scheduler.states import TaskState
from scheduler.types import NewTask, RawJSON, RetryPolicy, check_flow, debounced_due

_check_json = json.JSONEncoder(allow_nan=False).encode
"""One encoder for every payload check (``json.dumps`` with an option builds a new
encoder per call)."""

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
EARLIEST = _EPOCH + timedelta(seconds=MIN_TIMESTAMP_SECONDS)
"""The earliest ``scheduled_at`` accepted (``scheduler.limits``)."""
LATEST = _EPOCH + timedelta(seconds=MAX_TIMESTAMP_SECONDS)
"""The first ``scheduled_at`` refused (``scheduler.limits``)."""
_LAST_INSTANT = datetime.max.replace(tzinfo=UTC)


def shifted(when: datetime, offset_ms: int) -> datetime:
    """``when`` moved by ``offset_ms``, clamped to the range a datetime holds: jitter
    added to an instant near either end never overflows."""
    try:
        return when + timedelta(milliseconds=offset_ms)
    except OverflowError:
        return _LAST_INSTANT if offset_ms > 0 else datetime.min.replace(tzinfo=UTC)


class Admission:
    """Validates submissions and builds :class:`NewTask` rows for the store."""

    def __init__(self, config: EngineConfig, shards: ShardState) -> None:
        self._config = config
        self._shards = shards

    def horizon(self, now: datetime) -> datetime:
        """The end of the look-ahead from ``now``."""
        return now + timedelta(seconds=self._config.lookahead_s)

    def check_batch(self, specs: Sequence[SubmitSpec]) -> None:
        """A submit call's size."""
        if not specs:
            raise InvalidArgument("tasks", "at least one task is required")
        limit = self._config.max_submit_batch
        if len(specs) > limit:
            # The same answer as the server's (scheduler.limits.MAX_SUBMIT_BATCH).
            raise ResourceExhausted("tasks", f"at most {limit} tasks per call")

    def validate(self, spec: SubmitSpec, prefix: str) -> None:
        """InvalidArgument naming ``prefix``'s field for anything a task may not be."""
        if not isinstance(spec.type, str) or not spec.type:
            raise InvalidArgument(f"{prefix}.type", "is required")
        if len(spec.type) > MAX_TYPE_CHARS:
            raise InvalidArgument(f"{prefix}.type", f"longer than {MAX_TYPE_CHARS} characters")
        if type(spec.payload) is RawJSON:
            pass  # JSON text checked on its way in (scheduler.jsonbytes)
        elif not isinstance(spec.payload, dict):
            raise InvalidArgument(f"{prefix}.payload", "must be a JSON object")
        else:
            try:
                _check_json(spec.payload)
            except (TypeError, ValueError) as exc:
                raise InvalidArgument(f"{prefix}.payload", f"not JSON-serialisable: {exc}") from exc
        if spec.scheduled_at is not None:
            if spec.scheduled_at.tzinfo is None:
                raise InvalidArgument(f"{prefix}.scheduled_at", "must carry a time zone")
            if not EARLIEST <= spec.scheduled_at < LATEST:
                raise InvalidArgument(
                    f"{prefix}.scheduled_at", f"out of range: must be {TIMESTAMP_RANGE_TEXT}"
                )
        if spec.idempotency_key is not None and len(spec.idempotency_key) > (
            MAX_IDEMPOTENCY_KEY_CHARS
        ):
            raise InvalidArgument(
                f"{prefix}.idempotency_key", f"longer than {MAX_IDEMPOTENCY_KEY_CHARS} characters"
            )
        if not 0 <= spec.max_retries <= MAX_RETRIES:
            raise InvalidArgument(f"{prefix}.max_retries", f"must be 0..{MAX_RETRIES}")
        if not 0 <= spec.timeout_s <= MAX_TIMEOUT_S:
            raise InvalidArgument(
                f"{prefix}.timeout_s", f"must be a number of seconds in 0..{MAX_TIMEOUT_S}"
            )
        if spec.flow is not None:
            check_flow(spec.flow, prefix, idempotency_key=bool(spec.idempotency_key))
            if spec.flow.debounce is not None and spec.scheduled_at is not None:
                raise InvalidArgument(
                    f"{prefix}.scheduled_at",
                    "a debounced task is due debounce.period_s after"
                    " its last submission: leave scheduled_at unset",
                )

    def _resolve_retry(self, policy: RetryPolicy | None) -> RetryPolicy | None:
        """A task's retry policy against the server's defaults: a cap without a base
        takes the default base; a base without a cap the default cap (or the base)."""
        if policy is None:
            return None
        base = policy.initial_backoff_s
        cap = policy.max_backoff_s
        if base or cap:
            base = base or self._config.retry_base_s
            cap = max(cap or self._config.retry_max_s, base)
        return RetryPolicy(
            initial_backoff_s=base, max_backoff_s=cap, non_retryable=policy.error_types()
        )

    def new_task(
        self,
        tenant_id: uuid.UUID,
        spec: SubmitSpec,
        now: datetime,
        horizon: datetime | None = None,
        *,
        due_at: datetime | None = None,
        idempotency_key: str | None = None,
        workflow_id: uuid.UUID | None = None,
        depends_on: tuple[uuid.UUID, ...] = (),
        schedule_id: uuid.UUID | None = None,
    ) -> NewTask:
        """The row for ``spec`` (checked with :meth:`validate` first).

        ``horizon``: the end of the look-ahead from ``now`` (computed when None).
        ``due_at``: the effective due time when the caller decided it (a schedule's own
        jitter, a canary's slot); otherwise the jitter rule (``scheduler.jitter``) sets
        it from ``spec``: never before ``scheduled_at`` unless symmetric. A task with
        ``depends_on`` starts SCHEDULED: its parents release it.
        """
        if horizon is None:
            horizon = self.horizon(now)
        task_id = uuid7()
        shard = shard_of(tenant_id, task_id, self._config.shard_count)
        scheduled_at = spec.scheduled_at or now
        mode = effective_mode(spec.jitter_mode, spec.strict_timing, scheduled_at)
        debounce = spec.flow.debounce if spec.flow is not None else None
        if debounce is not None:
            # Due one period after this (first) submission; later ones push it (store).
            mode = JitterMode.NONE
            due_at = debounced_due(now, now, debounce)
        if due_at is None:
            offset = jitter_offset_ms(
                tenant_id, task_id, mode, window_s=self._config.jitter_window_s
            )
            due_at = shifted(scheduled_at, offset) if offset else scheduled_at
        # Straight into this node's wheel when due soon and its shard is ours; in a
        # cluster, another node's shard waits SCHEDULED for its owner's pre-loader.
        preload = not depends_on and due_at <= horizon and self._shards.serves(shard)
        return NewTask(
            id=task_id,
            tenant_id=tenant_id,
            type=spec.type,
            payload=spec.payload,
            scheduled_at=scheduled_at,
            due_at=due_at,
            idempotency_key=idempotency_key or spec.idempotency_key or str(task_id),
            shard_id=shard,
            pool=spec.pool,
            strict_timing=spec.strict_timing,
            jitter_mode=mode,
            max_retries=spec.max_retries,
            timeout_s=spec.timeout_s,
            trace_context=spec.trace_context,
            retry_policy=self._resolve_retry(spec.retry_policy),
            concurrency_key=spec.concurrency_key,
            workflow_id=workflow_id,
            depends_on=depends_on,
            schedule_id=schedule_id,
            initial_state=TaskState.PRELOADED if preload else TaskState.SCHEDULED,
            flow=spec.flow,
            rate_limit_key=spec.rate_limit_key,
        )
