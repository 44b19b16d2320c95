"""The stampede (issue 41): N tasks nominally at one instant, end to end.

A script, not a test (no timing assertion). It starts PostgreSQL (the test harness), a
fresh database migrated by the tree under test, ``tickwheel serve`` and one ``tickwheel
worker`` (2,000 slots, ack-first, ``benchmarks/start_recorder.py``'s handler, which
records in memory when it started against the task's jittered due time) from that tree,
and submits N tasks with that tree's client (a child process) for an instant T:

- ``minute``: T is a whole minute and the tasks take the default jitter rule (a round
  instant is spread late-only over 0-120 s), so the due curve is flat at N/121 a second;
- ``instant``: the tasks are strict (no jitter), all due at T: a burst;
- ``stream``: ``--rate`` x ``--duration-s`` strict tasks, due evenly from T at the rate
  (the flat stream the jitter makes of a minute, without its 121 s): a steady stream
  whose CPU a task set beside the burst's is the issue's "within 1.5x".

T is the next whole minute (``instant``: second) after the submission is expected to
end (+ ``--lead-s``). It
then waits until every task started or T + ``--window-s`` passed and reports: the
submission rate; starts a second against the due curve (the mean over the due window
and the lowest second); lateness of the handler's start against the jittered due time
(p50/p99/p99.9/max, ms; in the minute and stream modes also the p99 of each 10 s of
due time); tasks not started by the end; tasks started twice; CPU per
started task of serve, the worker and PostgreSQL (every backend), from T - 1 s to the
end; PostgreSQL's tuples fetched and read per started task on the task partitions
(pg_stat_user_tables: idx_tup_fetch + seq_tup_read, same span); after the submission,
its WAL, checkpoints, the buffers backends wrote out themselves and the blocks read from
outside shared_buffers and found in them, a task; serve's RSS before the
submission, at T - 1 s (every task a timer in the wheel) and at its peak (the backlog
waiting in the ready queues included), and the growth per task of each; from serve's
``/metrics``, the batched store writes a thousand tasks and their mean rows by kind
(dispatch, ack, complete...) and how many took over 50 and 100 ms, and the context
switches a task of serve and the worker (their wake-ups); and the machine's CPU in the
window, busy and stolen by the hypervisor (a run with much steal measures its
neighbours as much as Tickwheel).

``--plans`` instead runs the plan probe (benchmarks/plan_probe.py) at each size of
``--sizes``: tuples touched per task of every hot statement with a batch of 1,000
(``--batch``), on tasks sharing one scheduled_at or spread over a day (``--spreads``),
with no statistics, statistics taken while the minute was SCHEDULED (the stampede's
stale ones) and fresh ones, each under the custom and the generic plan (the server runs
with autovacuum off); ``--plans-sql`` probes another revision's queries.sql beside
this tree's, on the same seed.

``--tree`` runs another checkout (its extension built; ``git worktree add --detach
/tmp/wt-before main && (cd /tmp/wt-before && python setup.py -q build_ext --inplace)``)::

    .venv/bin/python -m benchmarks.test_stampede --tasks 100000 --modes minute,instant
    .venv/bin/python -m benchmarks.test_stampede --tree /tmp/wt-before --tasks 100000
    .venv/bin/python -m benchmarks.test_stampede --modes stream,instant --rate 8333 --duration-s 30
    .venv/bin/python -m benchmarks.test_stampede --plans --sizes 10000,100000,1000000

``--pg-waits`` samples ``pg_stat_activity`` through the window (``benchmarks/pg_waits.py``):
the share of it each statement spent on the CPU, waiting (by wait event) or idle in its
transaction, and what autovacuum and the checkpointer did.

``--serve-arg`` passes an argument to ``tickwheel serve`` (repeatable) and ``--pg-setting``
a setting to the harness's PostgreSQL, for runs that measure a non-default beside the
default (``--serve-arg=--push-ahead-ms=250``, ``--pg-setting autovacuum=off``): their
figures say what a setting would do, not what a user gets.

``--shuffle`` submits a run's tasks in a random order (their due times unchanged): the
ids (time-ordered) and the rows then lie in no relation to the due order, as a minute's
jitter leaves them, while a stream submitted in order has both in due order. Beside a
stream in order, it measures what the order alone costs.

``test_stampede_small`` runs a 5,000-task instant under pytest-benchmark (``make bench``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import psutil

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks import plan_probe  # noqa: E402
from benchmarks.compare_trees import _cpu, _env, _postgres_procs, _tenant_key  # noqa: E402
from benchmarks.pg_waits import PgWaits  # noqa: E402
from tests.support.processes import TICKWHEEL, ProcessGroup  # noqa: E402
from tests.support.servers import PostgresServer, free_port, start_server  # noqa: E402

HANDLER = "benchmarks.start_recorder:started"
"""Records start times in memory, written out in batches (not a file write a task)."""

_SUBMIT = """
import asyncio, random, sys, time
from datetime import datetime, UTC
from scheduler.client import Client, TaskSpec

async def main(target, key, n, at, strict, spread, shuffle):
    at = float(at)
    step = float(spread) / n
    order = list(range(n))
    if shuffle:
        random.Random(41).shuffle(order)
    started = time.perf_counter()
    async with await Client.connect(target, api_key=key) as c:
        for start in range(0, n, 10_000):
            await c.submit_many(
                TaskSpec(
                    type="late",
                    payload={"i": i},
                    scheduled_at=datetime.fromtimestamp(at + i * step, UTC),
                    strict_timing=strict,
                )
                for i in order[start : start + 10_000]
            )
    print(n / (time.perf_counter() - started), flush=True)

asyncio.run(main(*sys.argv[1:3], int(sys.argv[3]), sys.argv[4], sys.argv[5] == "1", sys.argv[6],
                 sys.argv[7] == "1"))
"""
"""The submitter: the tree's own client; prints its submission rate (tasks/s). Task i
is due at ``at + i * spread / n`` (spread 0: every task at ``at``), submitted in the
order of i, or in a random order with ``--shuffle``."""


def submit_command(
    target: str, key: str, n: int, at: float, *, strict: bool, spread: float, shuffle: bool
) -> list[str]:
    """The command line that runs :data:`_SUBMIT` (its arguments are positional)."""
    flags = ("1" if strict else "0", str(spread), "1" if shuffle else "0")
    return [sys.executable, "-c", _SUBMIT, target, key, str(n), str(at), *flags]


TUPLES = """
SELECT coalesce(sum(coalesce(idx_tup_fetch, 0) + coalesce(seq_tup_read, 0)), 0)::bigint
FROM pg_stat_user_tables WHERE relname LIKE 'tasks_p%'
"""


BY_INDEX = """
SELECT 'index ' || regexp_replace(indexrelname, '^tasks_p[0-9]+_', '') AS what,
       sum(idx_tup_read)::bigint AS n
FROM pg_stat_user_indexes WHERE relname LIKE 'tasks_p%' GROUP BY 1
UNION ALL
SELECT 'seq scan', coalesce(sum(seq_tup_read), 0)::bigint
FROM pg_stat_user_tables WHERE relname LIKE 'tasks_p%'
"""
"""Index entries read (idx_tup_read) per index of the task partitions, and rows read by
sequential scans: where the tuples fetched come from."""


def _by_index(server: PostgresServer, database: str) -> Counter[str]:
    out = server.psql(BY_INDEX, database=database)
    return Counter({k: int(v) for k, v in (line.split("|") for line in out.splitlines() if line)})


SLOW_COMMIT_S = ("0.05", "0.1", "0.5")
"""Bounds of serve's commit-time histogram (``tickwheel_store_commit_seconds``) whose
excess the benchmark reports: commits of each kind slower than 50, 100 and 500 ms, the
stalls a dispatch lead must cover."""


LATE_PUSH_S = ("0.005", "0.01", "0.025", "0.05")
"""Bounds of serve's push-lateness histogram (``tickwheel_dispatch_lateness_seconds``:
a push against its instant, the due time less the push ahead) whose excess the
benchmark reports: what of a start's lateness was serve's before the worker had it."""


def _scrape(port: int) -> Counter[str]:
    """serve's batched store writes so far by kind: ``calls kind`` and ``rows kind``,
    and ``within LE kind``, those that committed within ``LE`` s (:data:`SLOW_COMMIT_S`);
    its pushes, ``pushed``, and ``pushed within LE`` (:data:`LATE_PUSH_S`)."""
    import urllib.request

    out: Counter[str] = Counter()
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        for line in r.read().decode().splitlines():
            if line.startswith("tickwheel_dispatch_lateness_seconds_"):
                name, value = line.rsplit(" ", 1)
                if name.startswith("tickwheel_dispatch_lateness_seconds_count"):
                    out["pushed"] += int(float(value))
                elif 'le="' in name and (le := name.split('le="', 1)[1].split('"')[0]) in (
                    LATE_PUSH_S
                ):
                    out[f"pushed within {le}"] += int(float(value))
                continue
            if not line.startswith(
                ("tickwheel_store_commit_seconds_bucket", "tickwheel_store_batch_size_")
            ):
                continue
            name, value = line.rsplit(" ", 1)
            kind = name.split('kind="', 1)[1].split('"', 1)[0]
            if name.startswith("tickwheel_store_commit_seconds_bucket"):
                le = name.split('le="', 1)[1].split('"', 1)[0]
                if le in SLOW_COMMIT_S:
                    out[f"within {le} {kind}"] += int(float(value))
            elif name.startswith("tickwheel_store_batch_size_count"):
                out[f"calls {kind}"] += int(float(value))
            elif name.startswith("tickwheel_store_batch_size_sum"):
                out[f"rows {kind}"] += int(float(value))
    return out


def _switches(*procs: psutil.Process) -> list[int]:
    """Context switches (voluntary + involuntary) of each process: its wake-ups."""
    return [sum(p.num_ctx_switches()) for p in procs]


def _quantile(xs: list[float], q: float) -> float:
    return xs[min(len(xs) - 1, max(0, math.ceil(q * len(xs)) - 1))] if xs else float("nan")


class _Rss(threading.Thread):
    """The peak RSS of one process, sampled every 0.2 s until stopped."""

    def __init__(self, pid: int) -> None:
        super().__init__(name="rss", daemon=True)
        self.proc = psutil.Process(pid)
        self.peak = self.proc.memory_info().rss
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(0.2):
            try:
                self.peak = max(self.peak, self.proc.memory_info().rss)
            except psutil.Error:
                return


class _CpuTracker(threading.Thread):
    """CPU seconds of serve, the worker and every PostgreSQL process, sampled every
    0.2 s by pid, so a backend or an autovacuum worker that exits between two marks
    keeps the CPU it spent (a plain sum over the live processes at each mark loses it).
    ``mark()`` returns the running totals (serve, worker, PostgreSQL) and PostgreSQL's
    autovacuum workers' part of it (``postgres: autovacuum worker`` processes)."""

    def __init__(self, serve: psutil.Process, worker: psutil.Process, server: PostgresServer):
        super().__init__(name="cpu", daemon=True)
        self.serve, self.worker, self.server = serve, worker, server
        self.seen: dict[tuple[int, float], float] = {}
        self.vacuum: set[tuple[int, float]] = set()
        self.base: dict[tuple[int, float], float] = {}
        self.lock = threading.Lock()
        self.done = threading.Event()
        self._sample()
        # What the PostgreSQL processes alive now spent before: not this run's.
        self.base = dict(self.seen)

    def _sample(self) -> None:
        procs = _postgres_procs(self.server)
        got: dict[tuple[int, float], float] = {}
        for p in procs:
            try:
                key = (p.pid, p.create_time())
                t = p.cpu_times()
                if key not in self.seen and "autovacuum worker" in " ".join(p.cmdline()):
                    self.vacuum.add(key)
            except psutil.Error:
                continue
            got[key] = t.user + t.system
        with self.lock:
            self.seen.update(got)

    def run(self) -> None:
        while not self.done.wait(0.2):
            self._sample()

    def mark(self) -> tuple[float, float, float, float]:
        self._sample()
        with self.lock:
            pg = sum(v - self.base.get(k, 0.0) for k, v in self.seen.items())
            vac = sum(self.seen[k] - self.base.get(k, 0.0) for k in self.vacuum)
        return (_cpu([self.serve]), _cpu([self.worker]), pg, vac)


def _host(before: Any, after: Any) -> dict[str, float]:
    """The host's CPU between two ``psutil.cpu_times()``: busy and stolen, in % of the
    machine's CPU time (steal: time this virtual machine was ready to run and the
    hypervisor ran another; a run with much of it measures the neighbours)."""
    spent = {f: getattr(after, f) - getattr(before, f) for f in after._fields}
    total = sum(spent.values()) - spent.get("guest", 0.0) - spent.get("guest_nice", 0.0)
    idle = spent["idle"] + spent.get("iowait", 0.0)
    steal = spent.get("steal", 0.0)
    return {
        "window: host busy %": 100.0 * (total - idle - steal) / max(total, 1e-9),
        "window: host steal %": 100.0 * steal / max(total, 1e-9),
    }


def _wal(server: PostgresServer) -> int:
    """The server's WAL position, in bytes (every database's writes)."""
    return int(server.psql("SELECT pg_current_wal_lsn() - '0/0'::pg_lsn").strip())


BUFFERS = """SELECT checkpoints_timed + checkpoints_req, buffers_backend,
    (SELECT sum(blks_read) FROM pg_stat_database), (SELECT sum(blks_hit) FROM pg_stat_database)
    FROM pg_stat_bgwriter"""
"""The server's checkpoints (timed and requested: each makes the next change of every
page write a full-page image to the WAL), the buffers the backends wrote out themselves
(to make room), and the blocks every database read from outside shared_buffers or
found in them."""


def _buffers(server: PostgresServer) -> tuple[int, ...]:
    """:data:`BUFFERS`: checkpoints, backend writes, blocks read, blocks hit."""
    return tuple(int(x) for x in server.psql(BUFFERS).strip().split("|"))


def _started(records: Path) -> int:
    """How many tasks the worker's recorder has seen start (``start_recorder``)."""
    try:
        return int(records.with_name(records.name + ".count").read_text() or 0)
    except (OSError, ValueError):
        return 0


def _dump(records: Path, timeout_s: float = 120.0) -> None:
    """Ask the worker's recorder to write its start records (after the CPU window)."""
    records.with_name(records.name + ".dump").touch()
    done = records.with_name(records.name + ".done")
    deadline = time.time() + timeout_s
    while not done.exists() and time.time() < deadline:
        time.sleep(0.2)


def _records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def one_run(
    server: PostgresServer, tree: Path, n: int, mode: str, base: Path, args: argparse.Namespace
) -> dict[str, float]:
    """One stampede on a fresh database; the figures of the module's docstring."""
    name = f"st_{uuid.uuid4().hex[:10]}"
    server.ensure_app_role()
    server.psql(f"CREATE DATABASE {name} OWNER {server.app_user}")
    dsn = server.app_dsn(name)
    group = ProcessGroup(base / name)
    records = base / name / "records.jsonl"
    try:
        subprocess.run(
            [TICKWHEEL, "migrate", "--postgres-dsn", dsn],
            env={**os.environ, **_env(tree)},
            check=True,
            capture_output=True,
        )
        metrics = free_port()
        serve = group.serve(
            dsn,
            lease_ttl_s=30.0,
            # /metrics for the store writes, without its queue-depth reader (a count
            # over the task table every 10 s, a sequential scan at this size).
            extra_args=(
                "--canary-interval-s",
                "0",
                "--metrics-port",
                str(metrics),
                "--metrics-depth-interval-s",
                "0",
                *args.serve_arg,
            ),
            env=_env(tree),
        )
        key = asyncio.run(_tenant_key(serve.target))
        worker = group.worker(
            serve.target,
            key,
            {"late": HANDLER},
            name="st-w",
            slots=args.slots,
            env={**_env(tree), "TW_RECORD_FILE": str(records)},
        )
        sp, wp = psutil.Process(serve.pid), psutil.Process(worker.pid)
        rss = _Rss(serve.pid)
        rss.start()
        cpu = _CpuTracker(sp, wp, server)
        cpu.start()
        if args.pg_stats:
            server.psql("CREATE EXTENSION IF NOT EXISTS pg_stat_statements", database=name)
            server.psql("SELECT pg_stat_statements_reset()", database=name)
        rss_before = rss.peak
        waits = PgWaits(server.dsn(), name) if args.pg_waits else None
        if waits is not None:
            waits.start()
        # T: a whole minute after the submission's expected end (at --submit-rate) + the
        # lead, so the submission's INSERTs do not land in the due window.
        ready = time.time() + n / args.submit_rate + args.lead_s
        at = math.ceil(ready / 60) * 60 if mode == "minute" else math.ceil(ready)
        strict = mode != "minute"
        spread = n / args.rate if mode == "stream" else 0.0
        cpu_sub0 = cpu.mark()
        sub = subprocess.run(
            submit_command(
                serve.target, key, n, at, strict=strict, spread=spread, shuffle=args.shuffle
            ),
            env={**os.environ, **_env(tree)},
            check=True,
            capture_output=True,
            text=True,
        )
        submit_rate = float(sub.stdout.split()[-1])
        cpu_sub1 = cpu.mark()
        wal_sub1, buf0 = _wal(server), _buffers(server)
        late_submit = time.time() - at
        time.sleep(max(0.0, at - 1 - time.time()))
        rss_timers = rss.proc.memory_info().rss  # every task a timer in the wheel
        cpu0, host0 = cpu.mark(), psutil.cpu_times()
        if waits is not None:
            waits.start_window()
        spy = _py_spy(args, base / name, sp.pid, wp.pid, max(1, int(at + 60 - time.time())))
        tup0 = int(server.psql(TUPLES, database=name).strip())
        idx0 = _by_index(server, name)
        writes0, sw0 = _scrape(metrics), _switches(sp, wp)
        end = at + (args.window_s if mode == "minute" else spread + args.window_s / 2)
        while time.time() < end:
            if _started(records) >= n:
                break
            time.sleep(0.25)
        cpu1, host1 = cpu.mark(), psutil.cpu_times()
        if waits is not None:
            waits.end_window()
        wal1, buf1 = _wal(server), _buffers(server)
        writes1, sw1 = _scrape(metrics), _switches(sp, wp)
        cpu.done.set()
        for proc in spy:
            proc.wait()
        _dump(records)
        if args.pg_stats:
            _print_statements(server, name, max(1, _started(records)))
        tup1 = int(server.psql(TUPLES, database=name).strip())
        idx1 = _by_index(server, name)
        rss.done.set()
        rows = [r for r in _records(records) if r["event"] == "late"]
        counts = Counter(r["task_id"] for r in rows)
        started = len(counts)
        late = sorted(r["start_ms"] for r in rows)
        # The worker's receipt of the push against the due time: what the start's
        # lateness owes to the commit and delivery, the rest being the ack's round trip.
        got = sorted(r["late_ms"] for r in rows)
        # Starts a second against the due curve (the due time is start - lateness).
        starts = Counter(int(r["at"] - at) for r in rows)
        dues = Counter(int(_due_after(r, at)) for r in rows)
        due_secs = [s for s in dues if dues[s] > 0]
        span = range(min(due_secs), max(due_secs) + 1) if due_secs else range(0)
        per = max(started, 1)
        writes = writes1 - writes0
        return {
            "tasks": n,
            "submit_per_s": submit_rate,
            "submit_ended_before_T_s": -late_submit,
            "due_per_s": n / max(len(span), 1),
            # Over the due span of the tasks that started, or T ... the last start if
            # that is longer; with tasks left over (a backlog at the end), over T ...
            # the end: the started tasks' due span alone would make a drain look as
            # fast as the due curve.
            "starts_per_s_mean": started / max(len(span), max(r["at"] for r in rows) - at, 1)
            if mode != "instant" and started == n
            else started / max((max(r["at"] for r in rows) - at) if rows else 1, 1e-3),
            "starts_per_s_min": min((starts.get(s, 0) for s in span), default=0),
            "last_start_after_T_s": max((r["at"] for r in rows), default=at) - at,
            "late_p50_ms": _quantile(late, 0.5),
            "late_p99_ms": _quantile(late, 0.99),
            "late_p999_ms": _quantile(late, 0.999),
            "late_max_ms": late[-1] if late else float("nan"),
            "received_late_p50_ms": _quantile(got, 0.5),
            "received_late_p99_ms": _quantile(got, 0.99),
            "not_started": n - started,
            "started_twice": sum(1 for c in counts.values() if c > 1),
            "serve_us_per_task": (cpu1[0] - cpu0[0]) / per * 1e6,
            "worker_us_per_task": (cpu1[1] - cpu0[1]) / per * 1e6,
            "postgres_us_per_task": (cpu1[2] - cpu0[2]) / per * 1e6,
            # The same split by phase: the submission (the client's INSERTs and serve's
            # submit path) and everything after it to the end (pre-load, dispatch, ack,
            # completion, autovacuum of the inserted rows, idle loops), a task submitted.
            "submit: serve us/task": (cpu_sub1[0] - cpu_sub0[0]) / n * 1e6,
            "submit: postgres us/task": (cpu_sub1[2] - cpu_sub0[2]) / n * 1e6,
            "after submit: serve us/task": (cpu1[0] - cpu_sub1[0]) / per * 1e6,
            "after submit: worker us/task": (cpu1[1] - cpu_sub1[1]) / per * 1e6,
            "after submit: postgres us/task": (cpu1[2] - cpu_sub1[2]) / per * 1e6,
            "after submit: postgres autovacuum us/task": (cpu1[3] - cpu_sub1[3]) / per * 1e6,
            "after submit: total us/task": (sum(cpu1[:3]) - sum(cpu_sub1[:3])) / per * 1e6,
            "window: postgres autovacuum us/task": (cpu1[3] - cpu0[3]) / per * 1e6,
            "window: total us/task": (sum(cpu1[:3]) - sum(cpu0[:3])) / per * 1e6,
            # The machine's own state in the window: CPU time the hypervisor gave to
            # other guests (steal) and the share of this machine's CPU in use.
            **_host(host0, host1),
            "after submit: postgres WAL B/task": (wal1 - wal_sub1) / per,
            "after submit: postgres checkpoints": buf1[0] - buf0[0],
            "after submit: postgres backend writes/task": (buf1[1] - buf0[1]) / per,
            "after submit: postgres blocks read/task": (buf1[2] - buf0[2]) / per,
            "after submit: postgres blocks hit/task": (buf1[3] - buf0[3]) / per,
            "pg_tuples_per_task": (tup1 - tup0) / per,
            "serve_rss_before_mib": rss_before / 2**20,
            "serve_rss_peak_mib": rss.peak / 2**20,
            "serve_rss_bytes_per_task": (rss.peak - rss_before) / n,
            "serve_rss_at_T_mib": rss_timers / 2**20,
            "serve_rss_timer_bytes_per_task": (rss_timers - rss_before) / n,
            "serve switches/task": (sw1[0] - sw0[0]) / per,
            "worker switches/task": (sw1[1] - sw0[1]) / per,
            **{
                f"store {k.split()[1]}: calls/1000 tasks": writes[k] * 1000 / per
                for k in sorted(writes)
                if k.startswith("calls")
            },
            **{
                f"store {k.split()[1]}: mean rows a call": writes[k]
                / max(writes[f"calls{k[4:]}"], 1)
                for k in sorted(writes)
                if k.startswith("rows")
            },
            **{
                f"store {kind}: commits over {float(le) * 1000:g} ms": writes[f"calls {kind}"]
                - writes[k]
                for k in sorted(writes)
                if k.startswith("within")
                for _, le, kind in [k.split()]
            },
            **{
                f"serve pushes over {float(le) * 1000:g} ms late, %": 100.0
                * (writes["pushed"] - writes[f"pushed within {le}"])
                / max(writes["pushed"], 1)
                for le in LATE_PUSH_S
            },
            **{
                f"read per task: {k}": (idx1[k] - idx0[k]) / per
                for k in sorted(idx1)
                if idx1[k] - idx0[k] >= per / 10
            },
            **_late_by_due(rows, at, mode),
            **(waits.figures() if waits is not None else {}),
        }
    finally:
        group.stop_all()
        if "cpu" in locals():
            cpu.done.set()
        server.psql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def _due_after(r: dict[str, Any], at: float) -> float:
    """Seconds from T (``at``) to a recorded start's due time (its start less its
    lateness)."""
    return float(r["at"] - r["start_ms"] / 1000.0 - at)


LATE_BUCKET_S = 10
"""The minute's lateness p99 by when its tasks were due, in buckets of this many
seconds: whether the tail is the whole window's or one stretch's (a checkpoint, an
autovacuum, the submission still running)."""


def _late_by_due(rows: list[dict[str, Any]], at: float, mode: str) -> dict[str, float]:
    """Lateness p99 (ms) of the tasks due in each :data:`LATE_BUCKET_S` of the window
    (minute and stream modes; a burst is due at one instant)."""
    if mode == "instant":
        return {}
    buckets: dict[int, list[float]] = {}
    for r in rows:
        buckets.setdefault(int(_due_after(r, at) // LATE_BUCKET_S), []).append(r["start_ms"])
    return {
        f"late p99 ms, due T+{b * LATE_BUCKET_S}-{(b + 1) * LATE_BUCKET_S} s": _quantile(
            sorted(v), 0.99
        )
        for b, v in sorted(buckets.items())
    }


STATEMENTS = """
SELECT round((total_exec_time * 1000 / {n})::numeric, 1) AS us_task,
       round((total_plan_time * 1000 / {n})::numeric, 1) AS plan_us_task,
       round((calls::numeric / {n}), 4) AS calls_task,
       round((rows::numeric / greatest(calls, 1)), 1) AS rows_call,
       round((wal_bytes / {n})::numeric, 0) AS wal_b_task,
       left(regexp_replace(query, '\\s+', ' ', 'g'), 90) AS query
FROM pg_stat_statements ORDER BY total_exec_time + total_plan_time DESC LIMIT 25
"""
"""``--pg-stats``: PostgreSQL's statements by execution time a started task."""


def _print_statements(server: PostgresServer, database: str, n: int) -> None:
    print(
        f"pg_stat_statements, {n:,} started (exec us a task, plan us a task, calls a task,"
        " rows a call, WAL B a task):"
    )
    print(server.psql(STATEMENTS.format(n=n), database=database), flush=True)


def _py_spy(args: argparse.Namespace, out: Path, *pids_and_s: int) -> list[Any]:
    """``--profile``: py-spy record serve and the worker for 60 s from T - 1 s."""
    if not args.profile:
        return []
    *pids, seconds = pids_and_s
    spy = Path(sys.executable).with_name("py-spy")
    return [
        subprocess.Popen(
            [
                str(spy),
                "record",
                "-p",
                str(pid),
                "-d",
                str(seconds),
                "-r",
                "50",
                "-f",
                "raw",
                "-o",
                str(Path(args.profile) / f"{label}-{out.name}.txt"),
                "--nonblocking",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for label, pid in zip(("serve", "worker"), pids, strict=True)
    ]


class _StatsPostgres(PostgresServer):
    """The harness's PostgreSQL with pg_stat_statements loaded (``--pg-stats``)."""

    def command(self) -> list[str]:
        return [
            *super().command(),
            "-c",
            "shared_preload_libraries=pg_stat_statements",
            "-c",
            "track_io_timing=on",
            "-c",
            "pg_stat_statements.track_planning=on",
        ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--tree", type=Path, default=REPO, help="the checkout to run")
    parser.add_argument("--tasks", type=int, default=100_000)
    parser.add_argument("--modes", default="minute,instant", help="minute, instant, stream")
    parser.add_argument("--rate", type=float, default=8_333, help="stream: tasks due a second")
    parser.add_argument("--duration-s", type=float, default=30.0, help="stream: its length")
    parser.add_argument("--slots", type=int, default=2_000, help="the worker's slots")
    parser.add_argument("--lead-s", type=float, default=15.0, help="T after submission ends")
    parser.add_argument(
        "--submit-rate", type=float, default=8_000, help="expected submission rate (for T)"
    )
    parser.add_argument("--window-s", type=float, default=180.0, help="wait after T (minute)")
    parser.add_argument(
        "--shuffle",
        action="store_true",
        help="submit in a random order: ids and rows not in due order, as a minute's jitter",
    )
    parser.add_argument("--plans", action="store_true", help="run the plan probe instead")
    parser.add_argument("--pg-stats", action="store_true", help="print pg_stat_statements")
    parser.add_argument(
        "--pg-waits",
        action="store_true",
        help="sample pg_stat_activity every 5 ms: what each statement waited on (pg_waits.py)",
    )
    parser.add_argument("--profile", default="", help="py-spy serve, worker into this dir")
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--batch", type=int, default=1_000, help="plan probe batch")
    parser.add_argument("--spreads", default="one,day", help="plan probe layouts: one, day")
    parser.add_argument(
        "--plans-phases",
        default="none,stale,fresh",
        help="plan probe: statistics phases (stale costs two updates of half the tasks)",
    )
    parser.add_argument(
        "--plans-sql",
        type=Path,
        default=None,
        help="plan probe: a queries.sql to probe beside this tree's (same seed and schema), e.g."
        " git show main:src/scheduler/store/sql/postgres/queries.sql > /tmp/before.sql",
    )
    parser.add_argument(
        "--serve-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="an argument for tickwheel serve (repeatable), e.g. --serve-arg=--push-ahead-ms=50",
    )
    parser.add_argument(
        "--pg-setting",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a PostgreSQL setting for the harness's server (repeatable), e.g. max_wal_size=8GB",
    )
    args = parser.parse_args()
    # Stopped with SIGTERM (a background job ignores SIGINT): still stop every process.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if args.plans and not any(x.startswith("autovacuum=") for x in args.pg_setting):
        # The probe's phases take their statistics themselves (none, stale, fresh).
        args.pg_setting.append("autovacuum=off")
    kind = _StatsPostgres if args.pg_stats else PostgresServer
    if args.pg_setting:
        extra = [arg for setting in args.pg_setting for arg in ("-c", setting)]

        class _Tuned(kind):  # type: ignore[valid-type,misc]
            def command(self) -> list[str]:
                return [*super().command(), *extra]

        kind = _Tuned
    server = start_server(kind)
    base = Path(tempfile.mkdtemp(prefix="tickwheel-stampede-"))
    if args.profile:
        Path(args.profile).mkdir(parents=True, exist_ok=True)
    try:
        if args.plans:
            sizes = [int(x) for x in args.sizes.split(",")]
            plan_probe.plans(
                server,
                sizes,
                args.batch,
                args.spreads.split(","),
                args.plans_sql,
                tuple(args.plans_phases.split(",")),
            )
            return
        for mode in args.modes.split(","):
            n = int(args.rate * args.duration_s) if mode == "stream" else args.tasks
            figures = one_run(server, args.tree.resolve(), n, mode, base, args)
            print(f"{mode} ({args.tree}):")
            for k, v in figures.items():
                print(f"  {k:42s} {v:12.2f}", flush=True)
    finally:
        server.cleanup()


def test_stampede_small(benchmark: Any, tmp_path: Path) -> None:
    """A 5,000-task instant end to end (pytest-benchmark, one round: it takes a minute)."""
    server = start_server(PostgresServer)
    try:
        ns = argparse.Namespace(
            slots=2_000,
            lead_s=5.0,
            window_s=120.0,
            pg_stats=False,
            pg_waits=False,
            shuffle=False,
            serve_arg=[],
            profile="",
            submit_rate=8_000,
            rate=8_333,
        )
        figures = benchmark.pedantic(
            one_run, args=(server, REPO, 5_000, "instant", tmp_path, ns), rounds=1
        )
        benchmark.extra_info.update(figures)
    finally:
        server.cleanup()


if __name__ == "__main__":
    main()
