// A worker: runs "greet" tasks until SIGTERM/SIGINT, then drains.
import { Worker } from "tickwheel";

const worker = new Worker({
  target: process.env.TICKWHEEL_TARGET ?? "127.0.0.1:50051",
  apiKey: process.env.TICKWHEEL_API_KEY,
  slots: 10,
});
worker.register("greet", async (payload, ctx) => {
  ctx.throwIfCancelled();
  return { greeting: `Hello, ${payload.name}!`, by: "typescript", attempt: ctx.attempt };
});
worker.handleSignals(30);
await worker.run();
