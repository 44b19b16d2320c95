"""The worker SDK's facade: :class:`Worker` composes the parts of a running worker.

Owns only the worker's lifecycle (``run`` once, then ``done``) and the wiring of the
parts, each in its own module:

- ``_stream.py``: the Connect stream, hello, request ids and their futures, batched
  completions, reconnect with exponential backoff (full jitter);
- ``_slots.py``: the held-task table, free slots and the credit granted back;
- ``_runner.py``: one handler task per assignment (ack first, or start on delivery),
  timeouts, fenced outcomes, heartbeats of the held tasks (at once on a reconnect);
- ``_drain.py``: the two-phase graceful drain and its :class:`DrainReport`;
- ``_batch.py``: batch handlers (a :class:`Batch` type's tasks joined into one call);
- ``_kafka.py``: Kafka mode's consumer-group feed.

Tasks already running keep going across reconnects: their leases and tokens do not
belong to the stream.

May call: those parts. Called by: applications, the CLI (``tickwheel worker``,
``tickwheel dev``) and tests, through ``scheduler.worker``.
"""

from __future__ import annotations

import asyncio
import os
import socket
import uuid
from collections.abc import Awaitable, Iterable, Mapping, Sequence
from typing import Any

from opentelemetry.trace import TracerProvider

from scheduler.client._channel import region_targets
from scheduler.client._tls import TLSConfig
from scheduler.logs import bind_fields, task_extra, unbind
from scheduler.regions import RegionDirectory
from scheduler.types import Pool
from scheduler.worker._backoff import ReconnectConfig
from scheduler.worker._batch import Batch, BatchGate
from scheduler.worker._drain import Drain, DrainReport
from scheduler.worker._invoke import Handler
from scheduler.worker._kafka import KafkaFeed, KafkaSource
from scheduler.worker._runner import HandlerRunner
from scheduler.worker._shared_credit import SharedCredit
from scheduler.worker._slots import Slots
from scheduler.worker._stats import WorkerStats
from scheduler.worker._stream import Stream


def _default_worker_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


class Worker:
    """Runs task handlers for one tenant.

    >>> worker = Worker("localhost:50051", api_key=key, handlers={"email": send_email})
    >>> await worker.run()          # until shutdown() is called

    Each attempt runs in a CONSUMER span of ``tracer_provider`` (default: the global
    OpenTelemetry provider; a no-op without the SDK), linked to the submission.

    ``start_on_delivery=True`` starts each handler the moment its assignment arrives
    and sends no ack: the server commits the dispatch as RUNNING, which saves a store
    write and two stream messages per task (the fast choice for short tasks). The
    price: a push counts as an attempt even if it never arrived (the stream broke with
    it in flight), and such a task is retried only when its lease expires. With the
    default, each task is acknowledged before its handler runs, and a push the worker
    never acknowledged goes back at once without using an attempt.

    With ``kafka=KafkaSource(...)`` the worker takes its tasks from the pools' Kafka
    topics through a consumer group instead of the stream (``docs/kafka.md``); it
    must then use a SYSTEM-tier tenant's API key.

    With ``regions=RegionDirectory(...)`` the worker connects to the endpoints of the
    region its API key names, in directory order, and to the next one when one is
    unreachable; a stream sent elsewhere (``WRONG_REGION``) follows the endpoints it is
    given (docs/regions.md).

    A handler may be a :class:`~scheduler.worker.Batch`: its type's tasks reach it up
    to ``size`` at once, each with its own token, outcome and retries
    (docs/flow-control.md, "Batch handlers").
    """

    def __init__(
        self,
        target: str | None = None,
        *,
        api_key: str,
        handlers: Mapping[str, Handler | Batch],
        slots: int = 10,
        worker_id: str | None = None,
        tls: TLSConfig | None = None,
        pools: Iterable[Pool] = (),
        heartbeat_interval_s: float | None = None,
        request_timeout_s: float = 30.0,
        reconnect: ReconnectConfig | None = None,
        tracer_provider: TracerProvider | None = None,
        kafka: KafkaSource | None = None,
        start_on_delivery: bool = False,
        non_retryable: Mapping[str, Iterable[type[BaseException] | str]] | None = None,
        regions: RegionDirectory | None = None,
    ) -> None:
        if not handlers:
            raise ValueError("Worker needs at least one handler")
        if start_on_delivery and kafka is not None:
            raise ValueError("start_on_delivery applies to the stream, not to Kafka mode")
        if slots < 1:
            raise ValueError("Worker slots must be >= 1")
        if heartbeat_interval_s is not None and heartbeat_interval_s <= 0:
            raise ValueError("heartbeat_interval_s must be positive")
        self.worker_id = worker_id or _default_worker_id()
        pools = tuple(pools)
        if kafka is not None:
            # Kafka mode: records come from the consumer group; the stream (slots=0)
            # carries only the fenced writes. The API key must be a SYSTEM tenant's.
            pools = pools or tuple(sorted(kafka.pools, key=lambda p: p.value))
        self._started = False
        self._done = asyncio.Event()
        self.batches = {t: BatchGate(h, slots) for t, h in handlers.items() if isinstance(h, Batch)}
        """The gate of each batch handler's type (``_batch.py``)."""
        single: dict[str, Handler] = {
            t: self.batches[t].run if isinstance(h, Batch) else h for t, h in handlers.items()
        }
        # With a region directory: the endpoints of the key's region, in order (its DR
        # nodes after its primary ones), so the worker moves over on a promote.
        targets = region_targets(target, api_key, regions) if regions is not None else target
        if not targets:
            raise ValueError("Worker needs a target (or regions)")
        self._stream = Stream(
            targets,
            api_key=api_key,
            tls=tls,
            worker_id=self.worker_id,
            task_types=single,
            pools=pools,
            start_on_delivery=start_on_delivery,
            heartbeat_interval_s=heartbeat_interval_s,
            request_timeout_s=request_timeout_s,
            reconnect=reconnect or ReconnectConfig(),
        )
        self._kafka: KafkaFeed | None = None
        if kafka is not None:
            self._kafka = KafkaFeed(
                kafka,
                worker_id=self.worker_id,
                free_slots=self._free_slots,
                ready=self._stream.connected.wait,
                deliver=self._on_records,
            )
        self._slots = Slots(
            slots,
            send=self._stream.send,
            stopping=self._stopping,
            wakeup=self._kafka.slot_freed if self._kafka is not None else None,
        )
        self._drain = Drain(
            worker_id=self.worker_id,
            stream=self._stream,
            slots=self._slots,
            kafka=self._kafka,
            started=self._has_started,
            done=self._done,
            abandon=self._abandon,
        )
        self._runner = HandlerRunner(
            single,
            stream=self._stream,
            slots=self._slots,
            drain=self._drain,
            kafka_mode=kafka is not None,
            start_on_delivery=start_on_delivery,
            tracer_provider=tracer_provider,
            non_retryable=non_retryable or {},
        )
        self._stream.attach(self._runner)

    def _share_slots(self, shared: SharedCredit, name: str, *, backlog: bool = True) -> None:
        """Take credit from ``shared``, split with other streams by demand (a
        ``ClusterWorker`` member named ``name``): called before :meth:`run`. With
        ``backlog`` the stream asks its node for backlogs; without, it is offered an
        even share (all the free slots when it is the only stream)."""
        self._slots.credit = shared.handle(name, self._stream.send, reports=backlog)
        self._stream.want_backlog = backlog

    def _share_stats(self, stats: WorkerStats) -> None:
        """Count into ``stats`` (a ``ClusterWorker``'s, one for all its members)."""
        self._runner.stats = stats

    def _unshare_slots(self) -> None:
        """This member drains: its unused credit goes back to the other streams."""
        if self._slots.credit is not None:
            self._slots.credit.retire()

    # The parts are made before one another; these late-bound hooks wire them up.

    def _free_slots(self) -> int:
        return self._slots.free()

    def _on_records(self, records: Sequence[Any]) -> Awaitable[None]:
        return self._runner.on_records(records)

    def _stopping(self) -> bool:
        return self._drain.stopping

    def _has_started(self) -> bool:
        return self._started

    def _abandon(self) -> None:
        self._runner.close_executor(cancel_futures=False)

    # -- lifecycle -------------------------------------------------------------------

    @property
    def kafka_joined(self) -> asyncio.Event | None:
        """Kafka mode: set once the consumer holds partitions; None otherwise."""
        return self._kafka.joined if self._kafka is not None else None

    @property
    def stats(self) -> WorkerStats:
        """Attempts by type and outcome, handler durations (the worker's ``/metrics``)."""
        return self._runner.stats

    @property
    def slots(self) -> int:
        """The slots this worker offers (its capacity)."""
        return self._slots.capacity

    @property
    def reconnects(self) -> int:
        """Times the stream broke and the worker connected again (or tried to)."""
        return self._stream.reconnects

    @property
    def running_tasks(self) -> int:
        """Tasks held right now."""
        return len(self._slots.held)

    async def run(self) -> None:
        """Connect and run handlers until :meth:`shutdown`; raises on fatal errors
        (bad API key, rejected hello). Transient failures reconnect with backoff."""
        if self._started:
            raise RuntimeError("Worker.run() may be called only once")
        self._started = True
        if self._drain.stopping:
            self._done.set()
            return
        self._runner.bind(asyncio.get_running_loop())
        # The stream, heartbeat and handler tasks started below inherit the binding.
        fields = bind_fields(task_extra(worker_id=self.worker_id))
        self._stream.open()
        if self._kafka is not None:
            self._kafka.start()
        try:
            await self._stream.run()
        finally:
            self._drain.stop_taking()
            if self._kafka is not None:
                await self._kafka.stop()
            await self._runner.stop_all()
            for gate in self.batches.values():
                await gate.close()
            await self._stream.close()
            self._runner.close_executor(cancel_futures=True)
            self._done.set()
            unbind(fields)

    @property
    def busy_handler_threads(self) -> int:
        """Sync handlers still executing in threads (after a forced release they run
        on unseen until they return; a process may exit without waiting for them)."""
        return self._runner.threads_busy

    @property
    def draining(self) -> bool:
        """Whether :meth:`shutdown` has begun."""
        return self._drain.stopping

    async def shutdown(self, grace_s: float = 30.0) -> DrainReport:
        """Drain: stop taking work at once, give running handlers ``grace_s`` to finish
        or to checkpoint and raise :class:`Interrupted`, then release whatever is left
        (with its last checkpoint) and close the stream.

        Safe to call twice and before :meth:`run`; a later call with a shorter grace
        moves the deadline forward (``tickwheel worker`` does this on a second SIGTERM).
        Every call returns the same :class:`DrainReport`.
        """
        return await self._drain.shutdown(grace_s)
