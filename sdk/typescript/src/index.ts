// tickwheel: the TypeScript client and streaming worker for Tickwheel.
export * from "./client.js";
export * from "./errors.js";
export * from "./context.js";
export * from "./json.js";
export * from "./log.js";
export * from "./regions.js";
export { CreditSplit } from "./credit.js";
export { Worker, type Handler, type WorkerOptions, type DrainReport } from "./worker.js";
export { openTransport, type TlsOptions } from "./transport.js";
export * as pb from "./gen/tickwheel/v1/tickwheel_pb.js";
