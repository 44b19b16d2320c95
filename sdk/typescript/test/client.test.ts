// Every client call against a real `tickwheel dev`.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { AdminClient, Client, InvalidArgument, InvalidTransition, NotFound, Unauthenticated, keyRegion, parseRegions, regionTargets } from "../src/index.js";
import { startDev, type DevServer } from "./support.js";

describe("client", () => {
  let dev: DevServer;
  let client: Client;
  before(async () => {
    dev = await startDev();
    client = new Client({ target: dev.target, apiKey: dev.apiKey });
  });
  after(async () => {
    await dev?.stop();
  });

  test("submit, get, and JSON payloads as bytes", async () => {
    const payload = { n: 1, big: 12345678901234, nested: { list: [1, "two", null, true] }, text: "é ✓" };
    const t = await client.submit("echo", payload, { delayS: 86400, pool: "CRITICAL" });
    assert.equal(t.created, true);
    assert.equal(t.state, "SCHEDULED");
    const got = await client.get(t.id);
    assert.equal(got.id, t.id);
    assert.equal(got.type, "echo");
    assert.equal(got.pool, "CRITICAL");
    assert.deepEqual(got.payload, payload);
    assert.ok(got.scheduledAt instanceof Date && got.scheduledAt.getTime() > Date.now() + 80_000_000);
  });

  test("an idempotent resubmit returns the existing task", async () => {
    const a = await client.submit("echo", { a: 1 }, { idempotencyKey: "ts-idem-1", delayS: 86400 });
    const b = await client.submit("echo", { a: 2 }, { idempotencyKey: "ts-idem-1", delayS: 86400 });
    assert.equal(a.created, true);
    assert.equal(b.created, false);
    assert.equal(b.id, a.id);
  });

  test("submitMany, and list with paging", async () => {
    const tasks = await client.submitMany(Array.from({ length: 5 }, (_, i) => ({ type: "paged", payload: { i }, delayS: 86400 })));
    assert.equal(tasks.length, 5);
    assert.deepEqual(tasks.map((t) => t.payload), [0, 1, 2, 3, 4].map((i) => ({ i })));
    const seen: string[] = [];
    let pageToken = "";
    let pages = 0;
    do {
      const page = await client.list({ type: "paged", order: "CREATED_ASC" }, { pageSize: 2, pageToken });
      assert.ok(page.tasks.length <= 2);
      seen.push(...page.tasks.map((t) => t.id));
      pageToken = page.nextPageToken;
      pages += 1;
    } while (pageToken);
    assert.deepEqual(seen, tasks.map((t) => t.id));
    assert.ok(pages >= 3);
    const all: string[] = [];
    for await (const t of client.listAll({ type: "paged", states: ["SCHEDULED"] }, 2)) all.push(t.id);
    assert.deepEqual(new Set(all), new Set(seen));
  });

  test("cancel, and a second cancel is an invalid transition", async () => {
    const t = await client.submit("echo", {}, { delayS: 86400 });
    const c = await client.cancel(t.id);
    assert.equal(c.state, "CANCELLED");
    await assert.rejects(client.cancel(t.id), (e) => e instanceof InvalidTransition && e.reason === "INVALID_TRANSITION");
  });

  test("waitTask answers at once with timeout 0", async () => {
    const t = await client.submit("echo", {}, { delayS: 86400 });
    const w = await client.waitTask(t.id, 0);
    assert.equal(w.done, false);
    assert.equal(w.task.state, "SCHEDULED");
  });

  test("errors are typed and name the field", async () => {
    await assert.rejects(client.submit("", {}), (e) => e instanceof InvalidArgument && e.code === "INVALID_ARGUMENT" && /type/.test(e.field ?? ""));
    await assert.rejects(client.submit("t".repeat(65), {}), (e) => e instanceof InvalidArgument && /type/.test(e.field ?? ""));
    await assert.rejects(client.get("not-a-uuid"), (e) => e instanceof InvalidArgument && e.field === "task_id");
    await assert.rejects(client.get("00000000-0000-7000-8000-000000000000"), (e) => e instanceof NotFound);
    await assert.rejects(
      client.submitMany([{ type: "ok" }, { type: "ok", timeoutS: -1 }]),
      (e) => e instanceof InvalidArgument && (e.field ?? "").startsWith("tasks[1]"),
    );
    const bad = new Client({ target: dev.target, apiKey: "tw_nope" });
    await assert.rejects(bad.get("00000000-0000-7000-8000-000000000000"), (e) => e instanceof Unauthenticated);
  });

  test("history of a task", async () => {
    const t = await client.submit("echo", {}, { delayS: 86400 });
    await client.cancel(t.id);
    const h = await client.history(t.id);
    assert.ok(h.transitions.length >= 1);
  });

  test("schedules: create, get, list, pause, resume, delete", async () => {
    const s = await client.createSchedule({ name: "ts-every-hour", taskType: "tick", intervalS: 3600, payload: { k: "v" } });
    assert.equal(s.name, "ts-every-hour");
    assert.equal((await client.getSchedule(s.id)).taskType, "tick");
    assert.ok((await client.listSchedules()).some((x) => x.id === s.id));
    assert.equal((await client.pauseSchedule(s.id)).paused, true);
    assert.equal((await client.resumeSchedule(s.id)).paused, false);
    await client.deleteSchedule(s.id);
    await assert.rejects(client.getSchedule(s.id), (e) => e instanceof NotFound);
    await assert.rejects(client.createSchedule({ name: "ts-bad", taskType: "tick", cron: "not a cron" }), (e) => e instanceof InvalidArgument && /cron/.test(e.field ?? ""));
  });

  test("workflows: submit, get, list, cancel", async () => {
    const wf = await client.submitWorkflow({
      name: "ts-dag",
      nodes: [
        { id: "a", type: "step", payload: { n: 1 }, delayS: 86400 },
        { id: "b", type: "step", payload: { n: 2 } },
      ],
      edges: [["a", "b"]],
    });
    assert.equal(wf.created, true);
    assert.equal(wf.nodes.length, 2);
    const got = await client.getWorkflow(wf.workflow.id);
    assert.deepEqual(got.edges, [{ parent: "a", child: "b" }]);
    assert.ok((await client.listWorkflows()).some((w) => w.id === wf.workflow.id));
    const c = await client.cancelWorkflow(wf.workflow.id);
    assert.equal(c.cancelled, 2);
    await assert.rejects(
      client.submitWorkflow({ nodes: [{ id: "a", type: "s" }, { id: "b", type: "s" }], edges: [["a", "b"], ["b", "a"]] }),
      (e) => e instanceof InvalidArgument && /edges/.test(e.field ?? ""),
    );
  });

  test("expectations: register, list, delete", async () => {
    const e = await client.registerExpectation({ jobId: "ts-nightly", intervalS: 86400, toleranceS: 600 });
    assert.equal(e.jobId, "ts-nightly");
    assert.ok((await client.listExpectations()).some((x) => x.jobId === "ts-nightly"));
    await client.deleteExpectation("ts-nightly");
    await assert.rejects(client.deleteExpectation("ts-nightly"), (err) => err instanceof NotFound);
  });

  test("watching: count, forecast, workers, activity; bulk cancel in two steps", async () => {
    await client.submitMany([{ type: "bulk", delayS: 86400 }, { type: "bulk", delayS: 86400 }]);
    const counts = await client.countTasks({ type: "bulk" });
    assert.ok(counts.asOf !== undefined);
    await client.forecast({ bucketS: 60, buckets: 90 });
    const workers = await client.listWorkers();
    assert.ok(Array.isArray(workers.workers));
    await client.activity(300, 60);
    const plan = await client.planBulkAction("CANCEL", { type: "bulk" });
    assert.equal(plan.count, 2n);
    const run = await client.runBulkAction(plan.planToken);
    assert.equal(run.changed, 2n);
  });

  test("admin: tenants and API keys", async () => {
    const admin = new AdminClient({ target: dev.target, adminToken: dev.adminToken });
    const tenant = await admin.createTenant({ name: `ts-${Date.now()}` });
    assert.equal((await admin.getTenant(tenant.id)).name, tenant.name);
    assert.equal((await admin.updateTenant({ tenantId: tenant.id, rateLimitRps: 50 })).rateLimitRps, 50);
    assert.ok((await admin.listTenants()).tenants.some((t) => t.id === tenant.id));
    const key = await admin.createApiKey({ tenantId: tenant.id, name: "ci", scopes: ["submit", "read"] });
    const theirs = new Client({ target: dev.target, apiKey: key.secret });
    const t = await theirs.submit("echo", {}, { delayS: 86400 });
    assert.equal(t.tenantId, tenant.id);
    assert.ok((await admin.listApiKeys(tenant.id)).some((k) => k.id === key.keyId));
    const rotated = await admin.rotateApiKey(key.keyId, 0);
    assert.ok(rotated.secret);
    await admin.revokeApiKey(rotated.newKey!.id);
    const revoked = new Client({ target: dev.target, apiKey: rotated.secret });
    await assert.rejects(revoked.get(t.id), (e) => e instanceof Unauthenticated);
    // With the admin token, acting for a tenant.
    const asAdmin = new Client({ target: dev.target, adminToken: dev.adminToken, tenantId: tenant.id });
    assert.equal((await asAdmin.get(t.id)).id, t.id);
  });

  test("members of a single node", async () => {
    const members = await client.members();
    assert.equal(members.size, 1);
  });

  test("regions: a key names its home region", () => {
    assert.equal(keyRegion("tw_eu.abc"), "eu");
    assert.equal(keyRegion("tw_abc"), undefined);
    assert.equal(keyRegion("nope"), undefined);
    const dir = parseRegions("eu=eu1:50051|eu2:50051,us=us1:50051");
    assert.deepEqual(regionTargets(undefined, "tw_eu.x", dir), ["eu1:50051", "eu2:50051"]);
    assert.deepEqual(regionTargets("local:1", "tw_abc", dir), ["local:1"]);
    assert.deepEqual(parseRegions('{"regions": {"eu": {"endpoints": ["a:1"]}}}'), { eu: ["a:1"] });
  });
});
