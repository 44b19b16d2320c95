// A worker process drained by SIGTERM: its running task goes back with its checkpoint.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { Client, CreditSplit } from "../src/index.js";
import { eventually, startDev } from "./support.js";

test("SIGTERM drains the worker process and releases its task with the checkpoint", async () => {
  const dev = await startDev();
  const client = new Client({ target: dev.target, apiKey: dev.apiKey });
  const script = fileURLToPath(new URL("./fixture-worker.js", import.meta.url));
  const proc = spawn(process.execPath, [script], {
    env: { ...process.env, TICKWHEEL_TARGET: dev.target, TICKWHEEL_API_KEY: dev.apiKey },
    stdio: ["ignore", "ignore", "pipe"],
  });
  let logs = "";
  proc.stderr!.on("data", (d: Buffer) => (logs += d.toString()));
  const exited = new Promise<number | null>((r) => proc.on("exit", (code) => r(code)));
  try {
    const t = await client.submit("hold", {});
    await eventually(async () => (await client.get(t.id)).checkpoint?.page === 42, "the handler checkpointed");
    proc.kill("SIGTERM");
    assert.equal(await exited, 0, logs);
    const back = await client.get(t.id);
    assert.ok(["PRELOADED", "SCHEDULED"].includes(back.state), back.state);
    assert.equal(back.retryCount, 0);
    assert.deepEqual(back.checkpoint, { page: 42 });
    // Its logs are JSON lines.
    const lines = logs.trim().split("\n").map((l) => JSON.parse(l) as { level: string; message: string; worker_id: string });
    assert.ok(lines.some((l) => /released with checkpoint/.test(l.message) && l.worker_id));
  } finally {
    proc.kill("SIGKILL");
    await dev.stop();
  }
});

test("credit split by demand (the rules of docs/cluster.md)", () => {
  const split = new CreditSplit(10);
  assert.deepEqual(Object.fromEntries(split.open("a", true)), { a: 1 });
  assert.deepEqual(Object.fromEntries(split.open("b", true)), { b: 1 });
  // b's node reports 5 waiting: it gets them, a keeps its one.
  assert.deepEqual(Object.fromEntries(split.backlog("b", 5)), { b: 4 });
  assert.equal(split.totalGranted(), 6);
  split.pushed("b", 5);
  assert.equal(split.granted("b"), 0);
  // A non-reporting stream takes what no backlog asks for.
  const g = split.open("c", false);
  assert.equal(split.totalGranted(), split.free());
  assert.ok((g.get("c") ?? 0) >= 1);
  // Closing a stream gives its credit back to the others.
  split.close("c");
  assert.equal(split.granted("b"), 1, "every stream keeps one credit");
  // Freed slots stay in reserve while no reporting node has work waiting...
  assert.deepEqual(Object.fromEntries(split.finished(5)), {});
  // ...and go to the node that reports work next.
  assert.deepEqual(Object.fromEntries(split.backlog("a", 3)), { a: 2 });
});
