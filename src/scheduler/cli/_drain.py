"""The drain of ``tickwheel worker``: run a worker, then drain it in two phases on SIGTERM.

First SIGTERM (or SIGINT): the worker stops taking work at once and gives running
handlers the grace period to finish or to checkpoint and raise ``Interrupted``.
A second signal releases whatever is still running at once. The exit code is 0 when
every task was completed, failed, cancelled or released explicitly, 1 when some
outcome could not be committed (its lease will expire and the task is retried).

Calls the worker SDK; called by the ``worker`` command (``_worker``).
"""

from __future__ import annotations

import asyncio
import signal

from scheduler.cli._output import note
from scheduler.worker import ClusterWorker, DrainReport, Worker

_SIGNALS = (signal.SIGINT, signal.SIGTERM)


async def run_until_drained(worker: Worker | ClusterWorker, grace_s: float) -> DrainReport:
    """Run ``worker`` until a signal, then drain it; the drain's report."""
    loop = asyncio.get_running_loop()
    signals: asyncio.Queue[int] = asyncio.Queue()
    for sig in _SIGNALS:
        loop.add_signal_handler(sig, signals.put_nowait, sig)
    run = asyncio.create_task(worker.run(), name="tickwheel-cli-worker")
    first = asyncio.create_task(signals.get(), name="tickwheel-cli-signal")
    second: asyncio.Task[int] | None = None
    try:
        await asyncio.wait({run, first}, return_when=asyncio.FIRST_COMPLETED)
        if run.done():  # ended without a signal: a fatal error (re-raised here)
            await run
            return await worker.shutdown(grace_s=0)
        note(
            f"draining: taking no more work; {worker.running_tasks} task(s) running, "
            f"{grace_s:g} s grace (signal again to release them now)"
        )
        drain = asyncio.create_task(worker.shutdown(grace_s), name="tickwheel-cli-drain")
        second = asyncio.create_task(signals.get(), name="tickwheel-cli-signal-2")
        await asyncio.wait({drain, second}, return_when=asyncio.FIRST_COMPLETED)
        if not drain.done():
            note("second signal: releasing the running tasks now")
            await worker.shutdown(grace_s=0)
        report = await drain
        await run
        return report
    finally:
        for task in (first, second):
            if task is not None:
                task.cancel()
        for sig in _SIGNALS:
            loop.remove_signal_handler(sig)


def summary(report: DrainReport) -> str:
    """One line for the operator."""
    return (
        f"drained: {report.completed} completed, {report.failed} failed, "
        f"{report.cancelled} cancelled, {report.released} released with a checkpoint, "
        f"{report.released_at_deadline} released at the deadline, "
        f"{report.uncommitted} left to lease expiry"
    )
