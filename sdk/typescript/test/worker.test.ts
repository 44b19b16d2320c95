// The worker's lifecycle against a real `tickwheel dev` with short leases.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { ApplicationError, Client, Interrupted, StaleFencingToken, Worker, silentLogger, type Handler, type WorkerOptions } from "../src/index.js";
import { eventually, startDev, type DevServer } from "./support.js";

const LEASE_TTL_S = 2;

describe("worker", () => {
  let dev: DevServer;
  let client: Client;
  const workers: Worker[] = [];
  before(async () => {
    dev = await startDev(["--lease-ttl-s", String(LEASE_TTL_S), "--heartbeat-interval-s", "0.5", "--preload-interval-s", "0.2", "--retry-base-s", "0.1"]);
    client = new Client({ target: dev.target, apiKey: dev.apiKey });
  });
  after(async () => {
    for (const w of workers) w.kill();
    await dev?.stop();
  });

  function start(handlers: Record<string, Handler>, opts: Partial<WorkerOptions> = {}): { worker: Worker; run: Promise<void> } {
    const worker = new Worker({ target: dev.target, apiKey: dev.apiKey, logger: silentLogger, slots: 4, ...opts });
    for (const [type, h] of Object.entries(handlers)) worker.register(type, h);
    workers.push(worker);
    const run = worker.run();
    return { worker, run };
  }

  test("ack-first: a task runs once and completes with its result", async () => {
    const seen: string[] = [];
    const { worker, run } = start({ "ack.echo": async (p, ctx) => (seen.push(ctx.taskId), { echo: p, attempt: ctx.attempt }) });
    const t = await client.submit("ack.echo", { n: 7 });
    assert.deepEqual(await client.result(t.id, 60), { echo: { n: 7 }, attempt: 1 });
    assert.deepEqual(seen, [t.id]);
    const report = await worker.shutdown(5);
    await run;
    assert.equal(report.completed, 1);
  });

  test("a task pushed ahead of its due time is held: no handler starts before it", async () => {
    const seen: Array<[number, number]> = [];
    const { worker, run } = start({ "due.at": async (_p, ctx) => void seen.push([Date.now(), ctx.dueAt!.getTime()]) }, { slots: 40 });
    const first = Date.now() + 1500;
    const tasks = await client.submitMany(Array.from({ length: 30 }, (_, i) => ({ type: "due.at", scheduledAt: new Date(first + i * 7), strictTiming: true })));
    for (const t of tasks) await client.result(t.id, 60);
    assert.equal(seen.length, 30);
    for (const [startedMs, dueMs] of seen) assert.ok(startedMs >= dueMs, `started ${dueMs - startedMs} ms before due`);
    await worker.shutdown(5);
    await run;
  });

  test("start-on-delivery: many tasks complete, a non-object result is wrapped", async () => {
    const { worker, run } = start({ "sod.n": async (p) => (p as { i: number }).i * 2 }, { startOnDelivery: true, slots: 8 });
    const tasks = await client.submitMany(Array.from({ length: 40 }, (_, i) => ({ type: "sod.n", payload: { i } })));
    for (const [i, t] of tasks.entries()) assert.deepEqual(await client.result(t.id, 60), { result: i * 2 });
    const report = await worker.shutdown(5);
    await run;
    assert.equal(report.completed, 40);
  });

  test("a failed attempt retries by the task's policy; a non-retryable error dead-letters; redrive runs it again", async () => {
    let calls = 0;
    const { worker, run } = start({
      "flaky": async (_p, ctx) => {
        calls += 1;
        if (ctx.attempt === 1) throw new TypeError("first attempt fails");
        return { attempt: ctx.attempt };
      },
      "fatal": async (p) => {
        if ((p as { fail?: boolean }).fail) throw new ApplicationError("card declined", true);
        return { ok: true };
      },
    });
    const t = await client.submit("flaky", {}, { retryPolicy: { initialBackoffS: 0.1, maxBackoffS: 0.2 } });
    assert.deepEqual(await client.result(t.id, 60), { attempt: 2 });
    const done = await client.get(t.id);
    assert.equal(done.retryCount, 1);
    assert.equal(calls, 2);
    const history = await client.history(t.id);
    assert.ok(history.transitions.some((x) => x.reason.includes("first attempt fails") || x.toState === 5));

    const d = await client.submit("fatal", { fail: true }, { maxRetries: 5 });
    const dead = await eventually(async () => {
      const x = await client.get(d.id);
      return x.state === "DEAD_LETTER" ? x : undefined;
    }, "the task dead-letters");
    assert.equal(dead.retryCount, 1);
    assert.match(dead.lastError, /card declined/);
    // The task's own policy names the error type the worker reports (err.name).
    const listed = await client.submit("flaky", {}, { retryPolicy: { maxAttempts: 5, nonRetryableErrorTypes: ["TypeError"] } });
    const deadToo = await eventually(async () => {
      const x = await client.get(listed.id);
      return x.state === "DEAD_LETTER" ? x : undefined;
    }, "a listed error type dead-letters");
    assert.equal(deadToo.retryCount, 1);
    await worker.shutdown(5);
    await run;
    const again = await client.redrive(d.id);
    assert.equal(again.state, "SCHEDULED");
  });

  test("checkpoints, and a client cancel reaches the handler through its AbortSignal", async () => {
    let started!: () => void;
    const running = new Promise<void>((r) => (started = r));
    const { worker, run } = start({
      "long": async (_p, ctx) => {
        await ctx.checkpoint({ step: 1 });
        started();
        await new Promise((_, reject) => ctx.signal.addEventListener("abort", () => reject(ctx.signal.reason)));
      },
    });
    const t = await client.submit("long", {});
    await running;
    assert.deepEqual((await client.get(t.id)).checkpoint, { step: 1 });
    await client.cancel(t.id);
    const end = await client.waitTask(t.id, 30);
    assert.equal(end.done, true);
    assert.equal(end.task.state, "CANCELLED");
    const report = await worker.shutdown(5);
    await run;
    assert.equal(report.cancelled, 1);
  });

  test("heartbeats keep a lease longer than its TTL: one attempt", async () => {
    let calls = 0;
    const { worker, run } = start({
      "slow": async (_p, ctx) => {
        calls += 1;
        // Outlive the lease three times over; only heartbeats keep it.
        await eventually(() => Date.now() - ctx.receivedAt.getTime() > LEASE_TTL_S * 3000, "time passes");
        return { ok: true };
      },
    });
    const t = await client.submit("slow", {});
    assert.deepEqual(await client.result(t.id, 60), { ok: true });
    assert.equal(calls, 1);
    assert.equal((await client.get(t.id)).retryCount, 0);
    await worker.shutdown(5);
    await run;
  });

  test("a zombie: the stale token's write is refused after another worker took the task", async () => {
    let firstToken = 0n;
    let scheduledAt: Date | undefined;
    let zombieHeld!: () => void;
    const held = new Promise<void>((r) => (zombieHeld = r));
    const a = start({
      "zombie": async (_p, ctx) => {
        firstToken = ctx.fencingToken;
        scheduledAt = ctx.scheduledAt;
        zombieHeld();
        await new Promise(() => {}); // hangs: the process "freezes"
      },
    });
    const t = await client.submit("zombie", {});
    await held;
    a.worker.kill(); // its stream is gone; its lease expires
    await a.run;
    const b = start({ "zombie": async (_p, ctx) => ({ token: String(ctx.fencingToken) }) });
    const result = await client.result(t.id, 60);
    assert.notEqual(result.token, String(firstToken));
    await assert.rejects(
      client.completeTask({ taskId: t.id, fencingToken: firstToken, scheduledAt: scheduledAt! }, { zombie: true }),
      (e) => e instanceof StaleFencingToken && e.reason === "STALE_FENCING_TOKEN",
    );
    const after = await client.get(t.id);
    assert.deepEqual(after.result, result);
    const history = await client.history(t.id);
    assert.ok(history.refusedWrites.some((w) => w.fencingToken === BigInt(firstToken)));
    await b.worker.shutdown(5);
    await b.run;
  });

  test("drain: a handler checkpoints and stops; the task goes back with its checkpoint and resumes elsewhere", async () => {
    let started!: () => void;
    const running = new Promise<void>((r) => (started = r));
    const a = start({
      "resumable": async (_p, ctx) => {
        await ctx.checkpoint({ done: 3 });
        started();
        await new Promise((r) => ctx.signal.addEventListener("abort", r));
        assert.equal(ctx.cancelReason, "drain");
        ctx.throwIfCancelled();
      },
    });
    const t = await client.submit("resumable", {});
    await running;
    const report = await a.worker.shutdown(10);
    await a.run;
    assert.equal(report.released, 1);
    const back = await client.get(t.id);
    assert.equal(back.retryCount, 0);
    let resumedFrom: unknown;
    const b = start({ "resumable": async (_p, ctx) => ((resumedFrom = ctx.checkpointData), { resumed: true }) });
    assert.deepEqual(await client.result(t.id, 60), { resumed: true });
    assert.deepEqual(resumedFrom, { done: 3 });
    await b.worker.shutdown(5);
    await b.run;
  });

  test("drain: a handler that ignores the signal is released at the deadline", async () => {
    let started!: () => void;
    const running = new Promise<void>((r) => (started = r));
    const a = start({
      "stubborn": async (_p, ctx) => {
        await ctx.checkpoint({ at: "x" });
        started();
        await new Promise(() => {});
      },
    });
    const t = await client.submit("stubborn", {});
    await running;
    const report = await a.worker.shutdown(0.5);
    await a.run;
    assert.equal(report.releasedAtDeadline, 1);
    const back = await eventually(async () => {
      const x = await client.get(t.id);
      return x.state === "PRELOADED" || x.state === "SCHEDULED" ? x : undefined;
    }, "the released task waits for a worker");
    assert.deepEqual(back.checkpoint, { at: "x" });
    await client.cancel(t.id);
  });

  test("a bad API key is fatal: run() rejects", async () => {
    const worker = new Worker({ target: dev.target, apiKey: "tw_bad", logger: silentLogger });
    worker.register("x", async () => ({}));
    await assert.rejects(worker.run(), (e: Error) => e.name === "Unauthenticated");
  });

  test("interrupted is what the signal carries", () => {
    const i = new Interrupted("drain");
    assert.equal(i.cancelReason, "drain");
  });
});

describe("worker across a server restart", () => {
  test("reconnects and finishes the running task without a second run", async () => {
    const dev = await startDev(["--heartbeat-interval-s", "0.5"]);
    const client = new Client({ target: dev.target, apiKey: dev.apiKey });
    const worker = new Worker({ target: dev.target, apiKey: dev.apiKey, logger: silentLogger, reconnect: { initialBackoffS: 0.05, maxBackoffS: 0.5 } });
    let calls = 0;
    let started!: () => void;
    const running = new Promise<void>((r) => (started = r));
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    worker.register("survivor", async () => {
      calls += 1;
      started();
      await gate;
      return { ok: true };
    });
    const run = worker.run();
    try {
      const t = await client.submit("survivor", {});
      await running;
      const before = worker.reconnects;
      await dev.restart();
      await eventually(() => worker.reconnects > before, "the worker reconnects");
      release();
      assert.deepEqual(await client.result(t.id, 60), { ok: true });
      assert.equal(calls, 1);
      const done = await client.get(t.id);
      assert.equal(done.retryCount, 0);
      await worker.shutdown(5);
      await run;
    } finally {
      worker.kill();
      await dev.stop();
    }
  });
});
