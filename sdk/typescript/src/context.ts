// What a handler sees of one attempt of one task.
import type { JsonObject } from "./json.js";
import { TickwheelError } from "./errors.js";

/** Why a handler's signal fired: a client cancelled the task, the worker drains
 * (SIGTERM), or this attempt lost its lease (its writes will be refused). */
export type CancelReason = "cancelled" | "drain" | "lease_lost";

/** Thrown by a handler that stops early (after a checkpoint); the signal's reason. */
export class Interrupted extends TickwheelError {
  override name = "Interrupted";
  constructor(readonly cancelReason: CancelReason) {
    super(`interrupted: ${cancelReason}`, "CANCELLED", cancelReason);
  }
}

/** Throw from a handler to fail the attempt; `nonRetryable` dead-letters the task at
 * once instead of retrying it by its policy. */
export class ApplicationError extends Error {
  override name = "ApplicationError";
  constructor(message: string, readonly nonRetryable = false) {
    super(message);
  }
}

export interface TaskContext {
  readonly taskId: string;
  readonly tenantId: string;
  readonly type: string;
  /** 1 for the first attempt. */
  readonly attempt: number;
  readonly maxRetries: number;
  /** This attempt's fencing token: pass it to downstream systems so they can refuse a
   * zombie attempt's writes, as the scheduler does. */
  readonly fencingToken: bigint;
  readonly scheduledAt?: Date;
  readonly dueAt?: Date;
  readonly receivedAt: Date;
  /** Per-attempt limit in seconds (0: none); the SDK fails the attempt past it. */
  readonly timeoutS: number;
  readonly traceparent?: string;
  /** The last checkpoint (of an earlier attempt, or of this one). */
  readonly checkpointData: JsonObject | undefined;
  /** Fires on a client cancel, a drain or a lost lease (`cancelReason` says which);
   * its reason is an {@link Interrupted}. Pass it to fetch() and friends. */
  readonly signal: AbortSignal;
  readonly cancelReason: CancelReason | undefined;
  /** While draining: when the worker releases whatever is still running. */
  readonly drainDeadline: Date | undefined;
  /** Store progress so a later attempt resumes from it (fenced: throws
   * StaleFencingToken when this attempt lost the task). */
  checkpoint(data: JsonObject): Promise<void>;
  /** Throw {@link Interrupted} when the handler should stop. */
  throwIfCancelled(): void;
}
