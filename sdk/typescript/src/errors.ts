// gRPC status -> typed Tickwheel errors, read from the standard google.rpc.Status
// details the server sends in `grpc-status-details-bin` (its ErrorInfo, BadRequest and
// QuotaFailure), as the Python client does.
import { Code, ConnectError } from "@connectrpc/connect";
import { BadRequestSchema, ErrorInfoSchema, QuotaFailureSchema } from "./gen/google/rpc/error_details_pb.js";

export const ERROR_DOMAIN = "tickwheel.dev";

/** Every error this SDK throws. `code` is the gRPC status name; `reason` the
 * ErrorInfo reason (e.g. "STALE_FENCING_TOKEN"); `metadata` its fields as strings. */
export class TickwheelError extends Error {
  override name = "TickwheelError";
  code: string;
  reason: string;
  metadata: Record<string, string>;
  /** The request field the error is about (`tasks[3].payload_json`), when it names one. */
  field?: string;
  /** Whether the same call may succeed if made again later. */
  get retryable(): boolean {
    return ["UNAVAILABLE", "DEADLINE_EXCEEDED", "RESOURCE_EXHAUSTED"].includes(this.code);
  }
  constructor(message: string, code = "UNKNOWN", reason = "", metadata: Record<string, string> = {}) {
    super(message);
    this.code = code;
    this.reason = reason;
    this.metadata = metadata;
  }
}

export class InvalidArgument extends TickwheelError {
  override name = "InvalidArgument";
  problem: string;
  constructor(message: string, code: string, reason: string, metadata: Record<string, string>) {
    super(message, code, reason, metadata);
    this.field = metadata.field ?? "";
    this.problem = metadata.problem ?? message;
  }
}
export class UnknownRegion extends InvalidArgument {
  override name = "UnknownRegion";
  region = this.metadata.region ?? "";
  known = this.metadata.known ?? "";
}
export class FailedPrecondition extends TickwheelError {
  override name = "FailedPrecondition";
  constructor(message: string, code: string, reason: string, metadata: Record<string, string>) {
    super(message, code, reason, metadata);
    if (metadata.field) this.field = metadata.field;
  }
}
export class WrongRegion extends FailedPrecondition {
  override name = "WrongRegion";
  region = this.metadata.region ?? "";
  /** The home region's `host:port` endpoints, in the order to try them. */
  endpoints = (this.metadata.endpoints ?? "").split(",").map((s) => s.trim()).filter(Boolean);
}
export class NotFound extends TickwheelError {
  override name = "NotFound";
}
export class AlreadyExists extends TickwheelError {
  override name = "AlreadyExists";
}
export class InvalidTransition extends TickwheelError {
  override name = "InvalidTransition";
}
export class StaleFencingToken extends TickwheelError {
  override name = "StaleFencingToken";
}
export class Unauthenticated extends TickwheelError {
  override name = "Unauthenticated";
}
export class PermissionDenied extends TickwheelError {
  override name = "PermissionDenied";
}
export class ResourceExhausted extends TickwheelError {
  override name = "ResourceExhausted";
  /** The limit that was hit (QuotaFailure subject or ErrorInfo `limit`). */
  limit = this.metadata.limit ?? "";
}
export class StoreError extends TickwheelError {
  override name = "StoreError";
}
export class Unavailable extends TickwheelError {
  override name = "Unavailable";
}
export class TenantMoving extends Unavailable {
  override name = "TenantMoving";
}
/** A call that failed with a status no Tickwheel error describes (transport failure,
 * a deadline, a server that sent no details). */
export class RPCError extends TickwheelError {
  override name = "RPCError";
}

type ErrorClass = new (message: string, code: string, reason: string, metadata: Record<string, string>) => TickwheelError;

const BY_REASON: Record<string, ErrorClass> = {
  INVALID_ARGUMENT: InvalidArgument,
  FAILED_PRECONDITION: FailedPrecondition,
  NOT_FOUND: NotFound,
  ALREADY_EXISTS: AlreadyExists,
  INVALID_TRANSITION: InvalidTransition,
  STALE_FENCING_TOKEN: StaleFencingToken,
  UNAUTHENTICATED: Unauthenticated,
  PERMISSION_DENIED: PermissionDenied,
  RESOURCE_EXHAUSTED: ResourceExhausted,
  STORE_ERROR: StoreError,
  UNAVAILABLE: Unavailable,
  WRONG_REGION: WrongRegion,
  UNKNOWN_REGION: UnknownRegion,
  TENANT_MOVING: TenantMoving,
};

const BY_CODE: Partial<Record<Code, ErrorClass>> = {
  [Code.InvalidArgument]: InvalidArgument,
  [Code.FailedPrecondition]: FailedPrecondition,
  [Code.NotFound]: NotFound,
  [Code.AlreadyExists]: AlreadyExists,
  [Code.Unauthenticated]: Unauthenticated,
  [Code.PermissionDenied]: PermissionDenied,
  [Code.ResourceExhausted]: ResourceExhausted,
  [Code.Unavailable]: Unavailable,
};

/** The gRPC status name of a Connect code ("INVALID_ARGUMENT"). */
export function codeName(code: Code): string {
  return (Code[code] ?? "Unknown").replace(/([a-z])([A-Z])/g, "$1_$2").toUpperCase();
}

/** The typed error a failed call stands for. */
export function fromError(err: unknown): TickwheelError {
  if (err instanceof TickwheelError) return err;
  const ce = ConnectError.from(err);
  const code = codeName(ce.code);
  const info = ce.findDetails(ErrorInfoSchema).find((i) => i.domain === ERROR_DOMAIN) ?? ce.findDetails(ErrorInfoSchema)[0];
  const metadata: Record<string, string> = { ...(info?.metadata ?? {}) };
  const bad = ce.findDetails(BadRequestSchema)[0]?.fieldViolations[0];
  if (bad && !metadata.field) metadata.field = bad.field;
  if (bad && !metadata.problem) metadata.problem = bad.description;
  const quota = ce.findDetails(QuotaFailureSchema)[0]?.violations[0];
  if (quota && !metadata.limit) metadata.limit = quota.subject;
  const cls = (info && BY_REASON[info.reason]) || (info ? undefined : BY_CODE[ce.code]) || RPCError;
  const error = new cls(ce.rawMessage, code, info?.reason ?? "", metadata);
  (error as { cause?: unknown }).cause = err;
  return error;
}
