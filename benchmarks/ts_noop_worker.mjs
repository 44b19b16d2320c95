// The TypeScript worker of benchmarks/test_typescript_worker.py: a no-op handler for
// the "noop" type, TW_BENCH_SLOTS slots (ack first), drained on SIGTERM.
import { Worker } from "../sdk/typescript/dist/src/index.js";

const worker = new Worker({
  target: process.env.TICKWHEEL_TARGET,
  apiKey: process.env.TICKWHEEL_API_KEY,
  slots: Number(process.env.TW_BENCH_SLOTS ?? "200"),
  workerId: "ts-bench",
});
worker.register("noop", async () => ({}));
worker.handleSignals(5);
await worker.run();
