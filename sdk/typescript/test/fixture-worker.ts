// A worker process for the tests: drains on SIGTERM (handleSignals) and exits.
// TICKWHEEL_TARGET, TICKWHEEL_API_KEY, TW_SLOTS; type "hold" checkpoints and waits for
// its signal, "work" and "echo" answer at once.
import { Worker } from "../src/index.js";

const worker = new Worker({ target: process.env.TICKWHEEL_TARGET!, apiKey: process.env.TICKWHEEL_API_KEY!, slots: Number(process.env.TW_SLOTS ?? "2") });
worker.register("hold", async (_payload, ctx) => {
  await ctx.checkpoint({ page: 42 });
  await new Promise((resolve) => ctx.signal.addEventListener("abort", resolve));
  ctx.throwIfCancelled();
});
worker.register("work", async (_payload, ctx) => ({ by: "typescript", token: String(ctx.fencingToken) }));
worker.register("echo", async (payload) => ({ echo: payload, by: "typescript" }));
worker.handleSignals(10);
await worker.run();
process.exit(0);
