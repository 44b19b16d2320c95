// Flow control (issue 43) against a real `tickwheel dev`: the submit options (concurrency
// and rate limit keys, debounce, throttle, idempotency windows), the rate limit and
// pause calls, and the admin's concurrency limits.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { AdminClient, Client, InvalidArgument, NotFound, Worker, silentLogger } from "../src/index.js";
import { eventually, startDev, type DevServer } from "./support.js";

describe("flow control", () => {
  let dev: DevServer;
  let client: Client;
  before(async () => {
    dev = await startDev(["--preload-interval-s", "0.2"]);
    client = new Client({ target: dev.target, apiKey: dev.apiKey });
  });
  after(async () => {
    await dev?.stop();
  });

  test("a task keeps its concurrency key; the admin sets, lists and clears a type's limit", async () => {
    const t = await client.submit("ts.sync", { c: "acme" }, { concurrencyKey: "acme", rateLimitKey: "partner", delayS: 86400 });
    assert.equal(t.concurrencyKey, "acme");
    assert.equal((await client.get(t.id)).concurrencyKey, "acme");
    const admin = new AdminClient({ target: dev.target, adminToken: dev.adminToken });
    assert.deepEqual(await admin.listConcurrencyLimits(dev.tenantId), new Map());
    assert.equal(await admin.setConcurrencyLimit(dev.tenantId, "ts.sync", 3), 3);
    assert.deepEqual(await admin.listConcurrencyLimits(dev.tenantId), new Map([["ts.sync", 3]]));
    assert.equal(await admin.setConcurrencyLimit(dev.tenantId, "ts.sync"), 1);
    assert.deepEqual(await admin.listConcurrencyLimits(dev.tenantId), new Map());
    await assert.rejects(admin.setConcurrencyLimit(dev.tenantId, "ts.sync", 100_001), (e) => e instanceof InvalidArgument && e.field === "limit");
    await assert.rejects(client.submit("ts.sync", {}, { concurrencyKey: "k".repeat(129) }), (e) => e instanceof InvalidArgument && e.field === "task.concurrency_key");
  });

  test("debounce joins the key's pending task; the first payload is kept on request", async () => {
    const a = await client.submit("ts.reindex", { rev: 1 }, { debounce: { key: "doc-1", periodS: 3600 } });
    const b = await client.submit("ts.reindex", { rev: 2 }, { debounce: { key: "doc-1", periodS: 3600, maxDelayS: 7200 } });
    assert.deepEqual([a.created, a.debounced, b.created, b.debounced], [true, false, false, true]);
    assert.equal(b.id, a.id);
    assert.deepEqual((await client.get(a.id)).payload, { rev: 2 });
    const c = await client.submit("ts.reindex", { rev: 1 }, { debounce: { key: "doc-2", periodS: 3600, payload: "FIRST" } });
    await client.submit("ts.reindex", { rev: 2 }, { debounce: { key: "doc-2", periodS: 3600, payload: "FIRST" } });
    assert.deepEqual((await client.get(c.id)).payload, { rev: 1 });
    await assert.rejects(
      client.submit("ts.reindex", {}, { debounce: { key: "doc-3", periodS: 60, maxDelayS: 10 } }),
      (e) => e instanceof InvalidArgument && e.field === "task.debounce.max_delay_s",
    );
  });

  test("throttle answers the period's task and makes nothing", async () => {
    const a = await client.submit("ts.report", { n: 1 }, { throttle: { key: "acct-42", periodS: 3600 }, delayS: 3600 });
    const b = await client.submit("ts.report", { n: 2 }, { throttle: { key: "acct-42", periodS: 3600 }, delayS: 3600 });
    assert.deepEqual([a.created, a.throttled, b.created, b.throttled], [true, false, false, true]);
    assert.equal(b.id, a.id);
    await assert.rejects(
      client.submit("ts.report", {}, { throttle: { key: "", periodS: 60 } }),
      (e) => e instanceof InvalidArgument && e.field === "task.throttle.key",
    );
  });

  test("idempotency windows: until finished, and a TTL", async () => {
    const opts = { idempotencyKey: "ts-nightly", idempotencyScope: "UNTIL_FINISHED" as const, delayS: 86400 };
    const a = await client.submit("ts.nightly", {}, opts);
    assert.equal((await client.submit("ts.nightly", {}, opts)).id, a.id);
    await client.cancel(a.id);
    const b = await client.submit("ts.nightly", {}, opts);
    assert.equal(b.created, true);
    assert.notEqual(b.id, a.id);
    const ttl = { idempotencyKey: "ts-ttl", idempotencyTtlS: 0.05, delayS: 86400 };
    const first = await client.submit("ts.nightly", {}, ttl);
    const later = await eventually(async () => {
      const t = await client.submit("ts.nightly", {}, ttl);
      return t.created ? t : undefined;
    }, "a submission after the key's window makes a new task");
    assert.notEqual(later.id, first.id);
    await assert.rejects(
      client.submit("ts.nightly", {}, { idempotencyTtlS: 60 }),
      (e) => e instanceof InvalidArgument && e.field === "task.idempotency_ttl_s",
    );
  });

  test("rate limits: set, list, delete", async () => {
    const set = await client.setRateLimit("ts-partner", 0.5, 3);
    assert.deepEqual([set.key, set.rate, set.burst], ["ts-partner", 0.5, 3]);
    assert.ok(set.updatedAt instanceof Date);
    assert.equal((await client.setRateLimit("ts-other", 10)).burst, 10);
    const listed = await client.listRateLimits();
    assert.deepEqual(listed.map((l) => l.key).sort(), ["ts-other", "ts-partner"]);
    await client.deleteRateLimit("ts-other");
    await assert.rejects(client.deleteRateLimit("ts-other"), (e) => e instanceof NotFound);
    await assert.rejects(client.setRateLimit("ts-bad", 0), (e) => e instanceof InvalidArgument && e.field === "limit.rate");
  });

  test("a paused type's due task waits, is counted as paused, and runs on resume", async () => {
    const paused = await client.pauseDispatch({ taskType: "ts.paused" });
    assert.deepEqual([paused.taskType, paused.pool, paused.tenantId], ["ts.paused", undefined, dev.tenantId]);
    assert.equal((await client.pauseDispatch({ pool: "BULK" })).pool, "BULK");
    const listed = await client.listDispatchPauses();
    assert.deepEqual(listed.map((p) => `${p.taskType}/${p.pool ?? ""}`).sort(), ["/BULK", "ts.paused/"]);
    await client.resumeDispatch({ pool: "BULK" });
    await assert.rejects(client.resumeDispatch({ pool: "BULK" }), (e) => e instanceof NotFound);

    const worker = new Worker({ target: dev.target, apiKey: dev.apiKey, logger: silentLogger, slots: 2 });
    worker.register("ts.paused", async () => ({ ran: true }));
    const run = worker.run();
    try {
      const t = await client.submit("ts.paused", {});
      await eventually(async () => (await client.forecast({ bucketS: 60, buckets: 2 })).heldPaused >= 1n, "the task held by the pause");
      assert.equal((await client.get(t.id)).state, "PRELOADED");
      await client.resumeDispatch({ taskType: "ts.paused" });
      assert.deepEqual(await client.result(t.id, 60), { ran: true });
      assert.deepEqual(await client.listDispatchPauses(), []);
    } finally {
      await worker.shutdown(5);
      await run;
    }
  });
});
