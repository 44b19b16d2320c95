"""The lateness benchmark's submitting client, in a process of its own (``test_slice.py``).

Submits ``--rate`` tasks/s of type ``late`` for ``--seconds`` over gRPC, as any client
would, in ``SubmitTasks`` calls of at most 1,000: task ``j`` is due ``1 + j / rate`` s
after the stream began (``--bursts``: all of one call's tasks due 1 s after it is
made). Each payload names ``--phase``. Prints one JSON line when done: the tasks sent,
the slowest call in ms, and this process's CPU seconds.

Run: ``python benchmarks/steady_client.py --target HOST:PORT --key SECRET --rate 5000
--seconds 10 --phase 5000``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from datetime import UTC, datetime, timedelta

from scheduler.client import Client, TaskSpec


async def stream(args: argparse.Namespace) -> dict[str, float]:
    async with await Client.connect(args.target, api_key=args.key) as client:
        loop = asyncio.get_running_loop()
        started = loop.time()
        first_due = datetime.now(UTC) + timedelta(seconds=1)
        payload = {"phase": args.phase}
        sent = 0
        slowest = 0.0
        total = int(args.rate * args.seconds)
        while sent < total:
            k = min(1000, min(total, int((loop.time() - started) * args.rate) + 1) - sent)
            if k > 0:
                burst = datetime.now(UTC) + timedelta(seconds=1) if args.bursts else None
                specs = [
                    TaskSpec(
                        type="late",
                        payload=payload,
                        scheduled_at=burst or first_due + timedelta(seconds=j / args.rate),
                        strict_timing=True,
                    )
                    for j in range(sent, sent + k)
                ]
                t0 = loop.time()
                await client.submit_many(specs)
                slowest = max(slowest, (loop.time() - t0) * 1000.0)
                sent += k
            if k < 1000:
                await asyncio.sleep(0.01)
    return {"sent": sent, "slowest_submit_ms": slowest, "cpu_s": time.process_time()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--rate", type=int, required=True)
    parser.add_argument("--seconds", type=float, required=True)
    parser.add_argument("--phase", required=True)
    parser.add_argument("--bursts", action="store_true")
    print(json.dumps(asyncio.run(stream(parser.parse_args()))), flush=True)


if __name__ == "__main__":
    main()
