"""Celery-style task functions: ``@app.task`` registers a handler and gives it
``.delay()``/``.submit()``; the same registry is what ``app.worker()`` runs.

::

    app = App("localhost:50051", api_key=KEY)    # or App.from_env()

    @app.task(type="email", retry=RetryPolicy(max_attempts=5, non_retryable=[ValueError]))
    def send_email(to: str, subject: str = "hi") -> dict:
        ...
        return {"sent": True}

    handle = send_email.delay(to="a@example.com")   # a SyncTaskHandle
    handle.result(timeout=30)                       # {"sent": True}

    await app.worker(slots=10).run()                # in the worker process

The payload of a task is its call's keyword arguments (positional ones are bound to
their parameter names), so it must be JSON. A function that takes a parameter named
``ctx`` gets the :class:`~scheduler.worker.TaskContext` there (checkpoints, attempt,
cancellation). It may be sync (run in the worker's thread pool) or async.

Results: a dict return value is stored as it is; any other value (a number, a list,
``None``) as ``{"result": value}``, and so is a dict whose only key is ``result``, so
that a task function's handle gives back exactly what the function returned
(``add.delay(2, 3).result()`` is 5). Other readers see the stored JSON object.
"""

from __future__ import annotations

import asyncio
import builtins
import dataclasses
import functools
import inspect
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Generic, ParamSpec, TypeVar

from scheduler.client._client import Client
from scheduler.client._handle import TaskHandle
from scheduler.client._sync import SyncClient, SyncTaskHandle, when_after
from scheduler.client._tls import TLSConfig
from scheduler.client._types import JSON, TaskSpec
from scheduler.jitter import JitterMode
from scheduler.types import Pool, RetryPolicy

if TYPE_CHECKING:
    from scheduler.worker import Batch, ClusterWorker, TaskContext, Worker

P = ParamSpec("P")
R = TypeVar("R")


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class TaskOptions:
    """A task function's defaults for every submission (each may be overridden)."""

    type: str
    retry: RetryPolicy | None = None
    pool: Pool = Pool.STANDARD
    max_retries: int | None = None
    timeout_s: float = 0.0
    strict_timing: bool = False
    jitter_mode: JitterMode | None = None
    batch_size: int = 0
    """Above 0: a batch task function (``@app.task(batch_size=N)``): the worker calls
    it with up to N tasks' contexts at once (docs/flow-control.md)."""
    batch_max_wait_s: float = 0.05
    """How long the first task of a batch waits for the others."""
    concurrency_key: str | None = None
    """Every submission's concurrency key (docs/flow-control.md): at most the type's
    limit of its tasks run at once, cluster-wide."""
    concurrency_key_from: str | None = None
    """The argument whose value (as text) is each submission's concurrency key, e.g.
    ``"customer_id"``; a call may still pass ``concurrency_key=`` to ``submit``."""


class TaskFunction(Generic[P, R]):
    """A registered handler. Calling it runs the function here and now; ``delay`` and
    ``submit`` schedule it on a worker."""

    def __init__(self, app: App, fn: Callable[P, R], options: TaskOptions) -> None:
        self.app = app
        self.fn = fn
        self.options = options
        signature = inspect.signature(fn)
        self._wants_ctx = "ctx" in signature.parameters
        self._signature = signature.replace(
            parameters=[p for p in signature.parameters.values() if p.name != "ctx"]
        )
        """The call's signature without ``ctx`` (the worker passes it, not the caller)."""
        functools.update_wrapper(self, fn)

    @property
    def type(self) -> str:
        """The task type workers register and submissions name."""
        return self.options.type

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<TaskFunction {self.type} {self.fn.__module__}.{self.fn.__qualname__}>"

    # -- submitting ------------------------------------------------------------------

    def payload(self, *args: Any, **kwargs: Any) -> JSON:
        """The payload of a call: its arguments by parameter name (TypeError if they
        do not fit the function's signature). A batch function's payload is its
        keyword arguments as they are (the function takes the batch's contexts)."""
        if self.options.batch_size:
            if args:
                raise TypeError(f"{self.type}: a batch task takes keyword arguments only")
            return dict(kwargs)
        bound = self._signature.bind(*args, **kwargs)
        out: JSON = {}
        for name, value in bound.arguments.items():
            kind = self._signature.parameters[name].kind
            if kind is inspect.Parameter.VAR_KEYWORD:
                out.update(value)
            elif kind is inspect.Parameter.VAR_POSITIONAL:
                if value:
                    raise TypeError(f"{self.type}: *{name} cannot travel in a payload")
            else:
                out[name] = value
        return out

    def spec(
        self,
        args: Sequence[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
        *,
        delay: float | timedelta | None = None,
        scheduled_at: datetime | None = None,
        idempotency_key: str | None = None,
        **overrides: Any,
    ) -> TaskSpec:
        """The :class:`TaskSpec` of one submission (``overrides``: any TaskOptions
        field, e.g. ``pool``, ``retry``, ``max_retries``)."""
        if delay is not None and scheduled_at is not None:
            raise ValueError("give delay or scheduled_at, not both")
        opts = dataclasses.replace(self.options, **overrides) if overrides else self.options
        payload = self.payload(*args, **(kwargs or {}))
        key = opts.concurrency_key
        if key is None and opts.concurrency_key_from is not None:
            if opts.concurrency_key_from not in payload:
                raise TypeError(
                    f"{self.type}: no argument {opts.concurrency_key_from!r} for the "
                    "concurrency key"
                )
            key = str(payload[opts.concurrency_key_from])
        return TaskSpec(
            type=opts.type,
            payload=payload,
            scheduled_at=when_after(delay) if delay is not None else scheduled_at,
            idempotency_key=idempotency_key,
            pool=opts.pool,
            strict_timing=opts.strict_timing,
            jitter_mode=opts.jitter_mode,
            max_retries=opts.max_retries,
            timeout_s=opts.timeout_s,
            retry_policy=opts.retry,
            concurrency_key=key,
        )

    def delay(self, *args: P.args, **kwargs: P.kwargs) -> FunctionHandle:
        """Submit a call to run now (blocking); a handle whose ``result()`` waits and
        gives back what the function returned."""
        return self.submit(args, kwargs)

    def submit(
        self,
        args: Sequence[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
        **options: Any,
    ) -> FunctionHandle:
        """Submit with options (blocking), like Celery's ``apply_async``: ``delay``
        (seconds or timedelta), ``scheduled_at``, ``idempotency_key``, ``pool``,
        ``retry``, ``max_retries``, ``timeout_s``, ``strict_timing``, ``jitter_mode``,
        ``concurrency_key``."""
        client = self.app.sync_client()
        (handle,) = client.submit_many([self.spec(args, kwargs, **options)])
        return FunctionHandle(client, handle.task)

    async def adelay(self, *args: P.args, **kwargs: P.kwargs) -> AsyncFunctionHandle:
        """:meth:`delay` for async code: an awaitable handle."""
        return await self.asubmit(args, kwargs)

    async def asubmit(
        self,
        args: Sequence[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
        **options: Any,
    ) -> AsyncFunctionHandle:
        """:meth:`submit` for async code."""
        client = await self.app.client()
        (task,) = await client.submit_many([self.spec(args, kwargs, **options)])
        return AsyncFunctionHandle(client, task)

    # -- running ---------------------------------------------------------------------

    def handler(self) -> Callable[[TaskContext], Any] | Batch:
        """The worker handler: calls the function with the payload as keyword
        arguments (and ``ctx`` when it takes one); for a batch function, a
        :class:`~scheduler.worker.Batch` that calls it with the list of contexts and
        stores each value it returns as a task function's result."""
        fn: Callable[..., Any] = self.fn
        if self.options.batch_size:
            return _batch_handler(fn, self.options)
        wants_ctx = self._wants_ctx
        if inspect.iscoroutinefunction(fn):

            async def run_async(ctx: TaskContext) -> Any:
                kw = dict(ctx.payload)
                if wants_ctx:
                    kw["ctx"] = ctx
                return wrap_result(await fn(**kw))

            return run_async

        def run(ctx: TaskContext) -> Any:
            kw = dict(ctx.payload)
            if wants_ctx:
                kw["ctx"] = ctx
            return wrap_result(fn(**kw))

        return run

    def non_retryable(self) -> tuple[builtins.type[BaseException], ...]:
        """The exception classes that dead-letter at once (from the retry policy)."""
        return self.options.retry.exception_types() if self.options.retry else ()


def _batch_handler(fn: Callable[..., Any], options: TaskOptions) -> Batch:
    from scheduler.worker import Batch

    def wrap_all(outcomes: Any) -> Any:
        if outcomes is None or isinstance(outcomes, str | bytes | Mapping):
            return outcomes  # the worker says what is wrong with it
        if not isinstance(outcomes, Sequence):
            return outcomes
        return [o if isinstance(o, BaseException) else wrap_result(o) for o in outcomes]

    if inspect.iscoroutinefunction(fn):

        async def run_async(ctxs: list[TaskContext]) -> Any:
            return wrap_all(await fn(ctxs))

        return Batch(run_async, size=options.batch_size, max_wait_s=options.batch_max_wait_s)

    def run(ctxs: list[TaskContext]) -> Any:
        return wrap_all(fn(ctxs))

    return Batch(run, size=options.batch_size, max_wait_s=options.batch_max_wait_s)


def wrap_result(value: Any) -> JSON:
    """A task function's return value as the stored result (a JSON object): a dict as
    it is, anything else, or a dict whose only key is ``result``, under ``result``."""
    if isinstance(value, Mapping) and set(value) != {"result"}:
        return dict(value)
    return {"result": value}


def unwrap_result(result: JSON) -> Any:
    """What :func:`wrap_result` was given, from the stored result."""
    return result["result"] if set(result) == {"result"} else result


class FunctionHandle(SyncTaskHandle):
    """A task function's submitted call (blocking): ``result()`` is the value the
    function returned (5, not ``{"result": 5}``)."""

    def result(self, timeout: float | None = None) -> Any:
        """The function's return value; TaskFailed, TaskCancelled or TimeoutError."""
        return unwrap_result(super().result(timeout))


class AsyncFunctionHandle(TaskHandle):
    """:class:`FunctionHandle` for async code."""

    async def result(self, timeout: float | None = None) -> Any:  # noqa: ASYNC109
        """The function's return value; TaskFailed, TaskCancelled or TimeoutError."""
        return unwrap_result(await super().result(timeout))


ENV_TARGET = "TICKWHEEL_TARGET"
ENV_API_KEY = "TICKWHEEL_API_KEY"


class App:
    """A registry of task functions bound to one server and API key.

    ``App(target, api_key)``, or ``App.from_env()`` to take them from the same
    environment variables as the ``tickwheel`` command; ``@app.task(...)`` registers;
    ``app.worker()`` builds a
    :class:`~scheduler.worker.Worker` that runs every registered function;
    ``app.sync_client()``/``await app.client()`` are the clients submissions use.
    """

    def __init__(
        self,
        target: str,
        api_key: str,
        *,
        tls: TLSConfig | None = None,
        rpc_timeout_s: float = 30.0,
    ) -> None:
        self.target = target
        self.api_key = api_key
        self.tls = tls
        self.rpc_timeout_s = rpc_timeout_s
        self.tasks: dict[str, TaskFunction[Any, Any]] = {}
        self._sync: SyncClient | None = None
        self._async: dict[asyncio.AbstractEventLoop, Client] = {}

    @classmethod
    def from_env(
        cls,
        *,
        tls: TLSConfig | None = None,
        rpc_timeout_s: float = 30.0,
        environ: Mapping[str, str] | None = None,
    ) -> App:
        """An App on ``TICKWHEEL_TARGET`` (default ``localhost:50051``) and
        ``TICKWHEEL_API_KEY``, read now, as the ``tickwheel`` command reads them.

        The explicit door to the environment (``App(...)`` itself never reads it): a
        task module loaded by ``tickwheel worker --app`` needs no key of its own. A
        missing key is an error only when the app first connects (``delay``, a
        client), since the worker connects with the command's key, not the app's."""
        env = os.environ if environ is None else environ
        return cls(
            env.get(ENV_TARGET) or "localhost:50051",
            env.get(ENV_API_KEY, ""),
            tls=tls,
            rpc_timeout_s=rpc_timeout_s,
        )

    def _key(self) -> str:
        if not self.api_key:
            raise ValueError(f"App has no API key: pass App(target, api_key) or set {ENV_API_KEY}")
        return self.api_key

    def task(
        self,
        fn: Callable[P, R] | None = None,
        *,
        type: str | None = None,
        retry: RetryPolicy | None = None,
        pool: Pool = Pool.STANDARD,
        max_retries: int | None = None,
        timeout_s: float = 0.0,
        strict_timing: bool = False,
        jitter_mode: JitterMode | None = None,
        batch_size: int = 0,
        batch_max_wait_s: float = 0.05,
        concurrency_key: str | None = None,
        concurrency_key_from: str | None = None,
    ) -> Any:
        """Register ``fn`` as the handler of ``type`` (default: ``module.function``).

        Usable bare (``@app.task``) or with options (``@app.task(type="email")``).
        With ``batch_size=N`` the function takes a list of up to N
        :class:`~scheduler.worker.TaskContext` of its type and returns one outcome per
        context, in order (a value, or an exception instance that fails that task
        alone); the first task of a batch waits ``batch_max_wait_s`` for the others.
        ``concurrency_key`` (one key for every call) or ``concurrency_key_from`` (the
        name of the argument whose value is the key): at most the type's concurrency
        limit of a key's tasks run at once (``Admin.set_concurrency_limit``).
        """
        if concurrency_key is not None and concurrency_key_from is not None:
            raise ValueError("give concurrency_key or concurrency_key_from, not both")
        if batch_size < 0 or batch_max_wait_s < 0:
            raise ValueError("batch_size and batch_max_wait_s must be >= 0")

        def register(f: Callable[P, R]) -> TaskFunction[P, R]:
            name = type or f"{f.__module__}.{f.__qualname__}"
            if name in self.tasks:
                raise ValueError(f"task type {name!r} is registered already")
            options = TaskOptions(
                type=name,
                retry=retry,
                pool=pool,
                max_retries=max_retries,
                timeout_s=timeout_s,
                strict_timing=strict_timing,
                jitter_mode=jitter_mode,
                batch_size=batch_size,
                batch_max_wait_s=batch_max_wait_s,
                concurrency_key=concurrency_key,
                concurrency_key_from=concurrency_key_from,
            )
            tf = TaskFunction(self, f, options)
            self.tasks[name] = tf
            return tf

        return register(fn) if fn is not None else register

    def handlers(self) -> dict[str, Callable[[TaskContext], Any] | Batch]:
        """Every registered function's worker handler, by task type."""
        return {name: tf.handler() for name, tf in self.tasks.items()}

    def non_retryable(self) -> dict[str, tuple[type[BaseException], ...]]:
        """Per task type, the exceptions that dead-letter at once."""
        return {name: tf.non_retryable() for name, tf in self.tasks.items() if tf.non_retryable()}

    def worker(
        self, *, types: Iterable[str] | None = None, one_node: bool = False, **options: Any
    ) -> Worker | ClusterWorker:
        """A worker for the registered functions (all, or ``types``); ``options`` as
        the Worker's (``slots``, ``pools``, ...).

        By default a :class:`~scheduler.worker.ClusterWorker`: the app's target is a
        seed, and the worker streams to every live node of its cluster (a single node
        alone, as before). ``one_node=True``, or Kafka mode (``kafka=...``), gives a
        :class:`~scheduler.worker.Worker` with one stream to the target only."""
        from scheduler.worker import ClusterWorker, Worker

        chosen = set(types) if types is not None else set(self.tasks)
        unknown = chosen - set(self.tasks)
        if unknown:
            raise ValueError(f"no task function registered for {sorted(unknown)}")
        handlers = {k: v for k, v in self.handlers().items() if k in chosen}
        non_retryable = {k: v for k, v in self.non_retryable().items() if k in chosen}
        options.setdefault("tls", self.tls)
        kind = Worker if one_node or options.get("kafka") is not None else ClusterWorker
        return kind(
            self.target,
            api_key=self._key(),
            handlers=handlers,
            non_retryable=non_retryable,
            **options,
        )

    def sync_client(self) -> SyncClient:
        """The blocking client ``delay``/``submit`` use (connected on first use)."""
        if self._sync is None:
            self._sync = SyncClient(
                self.target, api_key=self._key(), tls=self.tls, rpc_timeout_s=self.rpc_timeout_s
            )
        return self._sync

    async def client(self) -> Client:
        """The async client of the running event loop (connected on first use)."""
        loop = asyncio.get_running_loop()
        client = self._async.get(loop)
        if client is None:
            client = await Client.connect(
                self.target, api_key=self._key(), tls=self.tls, rpc_timeout_s=self.rpc_timeout_s
            )
            self._async[loop] = client
        return client

    async def aclose(self) -> None:
        """Close the async client of this loop and the sync client."""
        client = self._async.pop(asyncio.get_running_loop(), None)
        if client is not None:
            await client.close()
        self.close_sync()

    def close_sync(self) -> None:
        """Close the sync client (from a thread without a running loop, or any)."""
        if self._sync is not None:
            sync, self._sync = self._sync, None
            sync.close()
