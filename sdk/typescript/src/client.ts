// The producer's client: SchedulerService (tasks, workflows, schedules, expectations,
// watching, rate limits and pauses) with an API key, and AdminClient (tenants, API keys,
// concurrency limits) with the admin token.
import { createClient, type CallOptions, type Client as RpcClient, type Transport } from "@connectrpc/connect";
import { timestampDate, timestampFromDate, type Timestamp } from "@bufbuild/protobuf/wkt";
import type { MessageInitShape } from "@bufbuild/protobuf";
import {
  AdminService,
  BulkAction,
  DebouncePayload,
  IdempotencyScope,
  JitterMode,
  OverlapPolicy,
  Pool,
  SchedulerService,
  TaskOrder,
  TaskState,
  UpstreamPolicy,
  WorkerService,
  type RetryPolicySchema,
  type ScheduleSpecSchema,
  type Task as PbTask,
  type TaskFilterSchema,
  type TaskSpecSchema,
  type Schedule as PbSchedule,
  type Workflow as PbWorkflow,
  type WorkflowNode as PbWorkflowNode,
  type GetWorkflowResponse,
  type DispatchPause as PbDispatchPause,
  type RateLimit as PbRateLimit,
} from "./gen/tickwheel/v1/tickwheel_pb.js";
import { fromError, TenantMoving, TickwheelError } from "./errors.js";
import { fromJsonBytes, jsonBytes, type JsonObject } from "./json.js";
import { regionTargets, type RegionDirectory } from "./regions.js";
import { openTransport, type TlsOptions } from "./transport.js";

export const API_KEY_HEADER = "x-api-key";
export const ADMIN_TOKEN_HEADER = "x-admin-token";
export const TENANT_HEADER = "x-tenant-id";
export const REGION_HEADER = "x-tickwheel-region";
export const JSON_HEADER = "x-tickwheel-json";
/** How long a call answered TENANT_MOVING is made again (a home move takes < 2 s). */
export const MOVE_RETRY_MS = 15_000;

export type PoolName = "CRITICAL" | "STANDARD" | "BULK";
export type StateName = "SCHEDULED" | "PRELOADED" | "DISPATCHED" | "RUNNING" | "RETRYING" | "COMPLETED" | "CANCELLED" | "DEAD_LETTER";
export const TERMINAL: ReadonlySet<StateName> = new Set(["COMPLETED", "CANCELLED", "DEAD_LETTER"]);

function enumName(e: Record<number, string>, value: number, prefix: string): string {
  return (e[value] ?? "UNSPECIFIED").replace(prefix, "");
}
export function poolOf(name: PoolName | Pool | undefined): Pool {
  if (name === undefined) return Pool.UNSPECIFIED;
  if (typeof name === "number") return name;
  const v = (Pool as unknown as Record<string, number>)[name];
  if (v === undefined) throw new TypeError(`pool: unknown pool ${JSON.stringify(name)}`);
  return v;
}
export function stateOf(name: StateName | TaskState): TaskState {
  if (typeof name === "number") return name;
  const v = (TaskState as unknown as Record<string, number>)[name];
  if (v === undefined) throw new TypeError(`states: unknown state ${JSON.stringify(name)}`);
  return v;
}

/** A task as the scheduler holds it, JSON fields as plain objects. */
export interface TaskInfo {
  id: string;
  tenantId: string;
  type: string;
  state: StateName;
  scheduledAt?: Date;
  dueAt?: Date;
  idempotencyKey: string;
  pool: PoolName;
  fencingToken: bigint;
  retryCount: number;
  maxRetries: number;
  payload?: JsonObject;
  result?: JsonObject;
  lastError: string;
  checkpoint?: JsonObject;
  workerId: string;
  cancelRequested: boolean;
  /** The task's concurrency key ("" for none). */
  concurrencyKey: string;
  createdAt?: Date;
  updatedAt?: Date;
  /** The message as it came (trace context, retry policy, shard, ...). */
  raw: PbTask;
}

const date = (t: Timestamp | undefined): Date | undefined => (t ? timestampDate(t) : undefined);
const ts = (d: Date | undefined): Timestamp | undefined => (d ? timestampFromDate(d) : undefined);

export function taskInfo(t: PbTask): TaskInfo {
  return {
    id: t.id,
    tenantId: t.tenantId,
    type: t.type,
    state: enumName(TaskState, t.state, "") as StateName,
    scheduledAt: date(t.scheduledAt),
    dueAt: date(t.dueAt),
    idempotencyKey: t.idempotencyKey,
    pool: enumName(Pool, t.pool, "") as PoolName,
    fencingToken: t.fencingToken,
    retryCount: t.retryCount,
    maxRetries: t.maxRetries,
    payload: fromJsonBytes(t.payloadJson, t.payload),
    result: fromJsonBytes(t.resultJson, t.result),
    lastError: t.lastError,
    checkpoint: fromJsonBytes(t.checkpointJson, t.checkpoint),
    workerId: t.workerId,
    cancelRequested: t.cancelRequested,
    concurrencyKey: t.concurrencyKey,
    createdAt: date(t.createdAt),
    updatedAt: date(t.updatedAt),
    raw: t,
  };
}

/** What a submit may say beyond the type and the payload. */
export interface SubmitOptions {
  /** Run at this time (default: now). */
  scheduledAt?: Date;
  /** Run this many seconds from now (instead of scheduledAt). */
  delayS?: number;
  idempotencyKey?: string;
  pool?: PoolName | Pool;
  strictTiming?: boolean;
  jitterMode?: "SYMMETRIC" | "LATE_ONLY" | "NONE";
  /** Retries after the first attempt (default 3); 0 with noRetries for none. */
  maxRetries?: number;
  noRetries?: boolean;
  timeoutS?: number;
  retryPolicy?: MessageInitShape<typeof RetryPolicySchema>;
  traceparent?: string;
  /** At most N tasks of this (type, key) run at once, cluster-wide (docs/flow-control.md). */
  concurrencyKey?: string;
  /** The task starts no faster than this key's token bucket allows (`setRateLimit`). */
  rateLimitKey?: string;
  /** Join the key's pending task instead of adding one (not with idempotencyKey or a time). */
  debounce?: DebounceOptions;
  /** At most one task per period of due time per key (not with debounce or idempotencyKey). */
  throttle?: ThrottleOptions;
  /** The idempotency key dedupes for this many seconds after its task's submission. */
  idempotencyTtlS?: number;
  /** "UNTIL_FINISHED": the key dedupes only while its task is not finished. */
  idempotencyScope?: "FOREVER" | "UNTIL_FINISHED";
}

/** Debounce by key: the task is due `periodS` after the burst's latest submission,
 * never later than `maxDelayS` (0: no cap) after its first. */
export interface DebounceOptions {
  key: string;
  periodS: number;
  maxDelayS?: number;
  /** Which submission's payload the task runs with (default: the latest). */
  payload?: "LATEST" | "FIRST";
}

export interface ThrottleOptions {
  key: string;
  periodS: number;
}

/** What a submit answers: the task, and whether this submission made it. */
export type Submitted = TaskInfo & {
  /** False when an idempotency key named a task already, or the submission was debounced. */
  created: boolean;
  /** The submission joined its debounce key's pending task (this one). */
  debounced: boolean;
  /** The submission fell inside its throttle key's period (of this task): nothing was made. */
  throttled: boolean;
};

export interface TaskSubmit extends SubmitOptions {
  type: string;
  payload?: JsonObject;
}

export function taskSpec(type: string, payload: JsonObject | undefined, o: SubmitOptions = {}): MessageInitShape<typeof TaskSpecSchema> {
  const at = o.delayS !== undefined ? new Date(Date.now() + o.delayS * 1000) : o.scheduledAt;
  return {
    type,
    payloadJson: jsonBytes(payload ?? {}),
    scheduledAt: ts(at),
    idempotencyKey: o.idempotencyKey ?? "",
    pool: poolOf(o.pool),
    strictTiming: o.strictTiming ?? false,
    jitterMode: o.jitterMode ? (JitterMode as unknown as Record<string, number>)[o.jitterMode] : JitterMode.UNSPECIFIED,
    maxRetries: o.maxRetries ?? 0,
    noRetries: o.noRetries ?? false,
    timeoutS: o.timeoutS ?? 0,
    retryPolicy: o.retryPolicy,
    traceContext: o.traceparent ? { traceparent: o.traceparent } : undefined,
    concurrencyKey: o.concurrencyKey ?? "",
    rateLimitKey: o.rateLimitKey ?? "",
    debounce: o.debounce && {
      key: o.debounce.key,
      periodS: o.debounce.periodS,
      maxDelayS: o.debounce.maxDelayS ?? 0,
      payload: o.debounce.payload ? DebouncePayload[o.debounce.payload] : DebouncePayload.UNSPECIFIED,
    },
    throttle: o.throttle && { key: o.throttle.key, periodS: o.throttle.periodS },
    idempotencyTtlS: o.idempotencyTtlS ?? 0,
    idempotencyScope: o.idempotencyScope ? IdempotencyScope[o.idempotencyScope] : IdempotencyScope.UNSPECIFIED,
  };
}

/** A rate limit key's token bucket: `rate` starts a second, bursts of `burst`. */
export interface RateLimitInfo {
  key: string;
  rate: number;
  burst: number;
  updatedAt?: Date;
}

/** A dispatch pause: `tenantId` "" for every tenant, `taskType` "" for every type,
 * `pool` undefined for every pool. */
export interface PauseInfo {
  tenantId: string;
  taskType: string;
  pool?: PoolName;
  pausedAt?: Date;
}

const rateLimitInfo = (m: PbRateLimit): RateLimitInfo => ({ key: m.key, rate: m.rate, burst: m.burst, updatedAt: date(m.updatedAt) });
const pauseInfo = (m: PbDispatchPause): PauseInfo => ({
  tenantId: m.tenantId,
  taskType: m.taskType,
  pool: m.pool === Pool.UNSPECIFIED ? undefined : (enumName(Pool, m.pool, "") as PoolName),
  pausedAt: date(m.pausedAt),
});

/** What a pause (or a resume) names: a task type, a pool, or both (neither: all work). */
export interface PauseTarget {
  taskType?: string;
  pool?: PoolName | Pool;
  /** The admin token only (no tenantId): every tenant. */
  allTenants?: boolean;
}
const pauseRequest = (p: PauseTarget) => ({ taskType: p.taskType ?? "", pool: poolOf(p.pool), allTenants: p.allTenants ?? false });

export interface ListFilter {
  states?: (StateName | TaskState)[];
  type?: string;
  pools?: (PoolName | Pool)[];
  scheduledFrom?: Date;
  scheduledTo?: Date;
  idempotencyKey?: string;
  order?: "SCHEDULED_ASC" | "SCHEDULED_DESC" | "CREATED_ASC" | "CREATED_DESC";
}

/** A task that ended without completing (its `task` says how). */
export class TaskFailed extends TickwheelError {
  override name = "TaskFailed";
  task: TaskInfo;
  constructor(task: TaskInfo) {
    super(`task ${task.id} ended ${task.state}${task.lastError ? `: ${task.lastError}` : ""}`, "OK", task.state);
    this.task = task;
  }
}

export interface WorkflowNodeInput extends SubmitOptions {
  /** The node's id within the workflow (edges name it). */
  id: string;
  type: string;
  payload?: JsonObject;
}

export interface WorkflowInfo {
  workflow: PbWorkflow;
  nodes: { id: string; task: TaskInfo }[];
  edges: { parent: string; child: string }[];
}

function workflowInfo(w: { workflow?: PbWorkflow; nodes: PbWorkflowNode[]; edges?: { parent: string; child: string }[] }): WorkflowInfo {
  return {
    workflow: w.workflow!,
    nodes: w.nodes.map((n) => ({ id: n.id, task: taskInfo(n.task!) })),
    edges: (w.edges ?? []).map((e) => ({ parent: e.parent, child: e.child })),
  };
}

export interface ScheduleInput {
  name: string;
  taskType: string;
  payload?: JsonObject;
  cron?: string;
  intervalS?: number;
  timezone?: string;
  pool?: PoolName | Pool;
  maxRetries?: number;
  noRetries?: boolean;
  timeoutS?: number;
  overlapPolicy?: "SKIP" | "ALLOW" | "BUFFER_ONE";
  catchupWindowS?: number;
  jitterS?: number;
  paused?: boolean;
}

export interface ConnectOptions {
  /** `host:port` of any node (optional with a region directory that lists the key's region). */
  target?: string;
  tls?: TlsOptions | boolean;
  /** Region name -> endpoints: calls go straight to the API key's home region. */
  regions?: RegionDirectory;
  /** Per-call deadline in milliseconds (default 30 s). */
  timeoutMs?: number;
  /** A transport of your own (tests, interceptors); overrides target/tls/regions. */
  transport?: Transport;
}

export interface ClientOptions extends ConnectOptions {
  /** The tenant's API key (`x-api-key`). */
  apiKey?: string;
  /** Or the platform admin token, acting for `tenantId` (`x-tenant-id`). */
  adminToken?: string;
  tenantId?: string;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

abstract class Base {
  protected readonly headers: Record<string, string>;
  protected readonly timeoutMs: number;
  readonly transport: Transport;
  readonly targets: string[];

  constructor(o: ConnectOptions, apiKey: string | undefined, headers: Record<string, string>) {
    this.targets = o.transport ? [] : regionTargets(o.target, apiKey, o.regions);
    this.transport = o.transport ?? openTransport(this.targets[0]!, o.tls);
    this.timeoutMs = o.timeoutMs ?? 30_000;
    this.headers = headers;
  }

  /** Make a unary call with this client's metadata and deadline; a failure comes back
   * as a typed error, and a call paused by its tenant's home move is made again. */
  protected async call<T>(fn: (opts: CallOptions) => Promise<T>, extra?: Partial<CallOptions>): Promise<T> {
    const started = Date.now();
    for (let pause = 50; ; pause = Math.min(pause * 2, 200)) {
      try {
        return await fn({ headers: this.headers, timeoutMs: this.timeoutMs, ...extra });
      } catch (err) {
        const e = fromError(err);
        if (!(e instanceof TenantMoving) || Date.now() - started + pause > MOVE_RETRY_MS) throw e;
        await sleep(pause);
      }
    }
  }
}

/** A tenant's client. */
export class Client extends Base {
  /** The generated service clients, for calls this class does not wrap. */
  readonly scheduler: RpcClient<typeof SchedulerService>;
  readonly workers: RpcClient<typeof WorkerService>;

  constructor(o: ClientOptions) {
    const headers: Record<string, string> = { [JSON_HEADER]: "bytes" };
    if (o.apiKey) headers[API_KEY_HEADER] = o.apiKey;
    else if (o.adminToken) {
      headers[ADMIN_TOKEN_HEADER] = o.adminToken;
      if (o.tenantId) headers[TENANT_HEADER] = o.tenantId;
    } else throw new TypeError("Client needs an apiKey (or an adminToken)");
    super(o, o.apiKey, headers);
    this.scheduler = createClient(SchedulerService, this.transport);
    this.workers = createClient(WorkerService, this.transport);
  }

  // -- tasks ---------------------------------------------------------------------

  /** Submit one task; `created` is false when its idempotency key named one already
   * (or the submission was debounced or throttled: `debounced`, `throttled`). */
  async submit(type: string, payload?: JsonObject, opts: SubmitOptions = {}): Promise<Submitted> {
    const r = await this.call((c) => this.scheduler.submitTask({ task: taskSpec(type, payload, opts) }, c));
    return { ...taskInfo(r.task!), created: r.created, debounced: r.debounced, throttled: r.throttled };
  }

  /** Submit many tasks in one call (at most 10,000), answered in order. */
  async submitMany(tasks: TaskSubmit[]): Promise<Submitted[]> {
    const r = await this.call((c) => this.scheduler.submitTasks({ tasks: tasks.map((t) => taskSpec(t.type, t.payload, t)) }, c));
    return r.results.map((x) => ({ ...taskInfo(x.task!), created: x.created, debounced: x.debounced, throttled: x.throttled }));
  }

  async get(taskId: string): Promise<TaskInfo> {
    return taskInfo((await this.call((c) => this.scheduler.getTask({ taskId }, c))).task!);
  }

  async cancel(taskId: string): Promise<TaskInfo> {
    return taskInfo((await this.call((c) => this.scheduler.cancelTask({ taskId }, c))).task!);
  }

  async redrive(taskId: string, scheduledAt?: Date): Promise<TaskInfo> {
    return taskInfo((await this.call((c) => this.scheduler.redriveTask({ taskId, scheduledAt: ts(scheduledAt) }, c))).task!);
  }

  /** One page of tasks; pass `nextPageToken` back (with the same filter) for the next. */
  async list(filter: ListFilter = {}, page: { pageSize?: number; pageToken?: string } = {}): Promise<{ tasks: TaskInfo[]; nextPageToken: string }> {
    const r = await this.call((c) =>
      this.scheduler.listTasks(
        {
          states: (filter.states ?? []).map(stateOf),
          type: filter.type ?? "",
          pools: (filter.pools ?? []).map(poolOf),
          scheduledFrom: ts(filter.scheduledFrom),
          scheduledTo: ts(filter.scheduledTo),
          idempotencyKey: filter.idempotencyKey ?? "",
          order: filter.order ? (TaskOrder as unknown as Record<string, number>)[filter.order] : TaskOrder.UNSPECIFIED,
          pageSize: page.pageSize ?? 0,
          pageToken: page.pageToken ?? "",
        },
        c,
      ),
    );
    return { tasks: r.tasks.map(taskInfo), nextPageToken: r.nextPageToken };
  }

  /** Every task the filter matches, page after page. */
  async *listAll(filter: ListFilter = {}, pageSize = 500): AsyncGenerator<TaskInfo> {
    let pageToken = "";
    do {
      const page = await this.list(filter, { pageSize, pageToken });
      yield* page.tasks;
      pageToken = page.nextPageToken;
    } while (pageToken);
  }

  /** One long poll (at most 60 s): the task once terminal, or as it is when the wait ends. */
  async waitTask(taskId: string, timeoutS = 30): Promise<{ task: TaskInfo; done: boolean }> {
    const r = await this.call((c) => this.scheduler.waitTask({ taskId, timeoutS }, { ...c, timeoutMs: this.timeoutMs + timeoutS * 1000 }));
    return { task: taskInfo(r.task!), done: r.done };
  }

  /** Wait until the task ends (polling WaitTask); its result when it COMPLETED, else
   * throws TaskFailed (DEAD_LETTER, CANCELLED). `timeoutS` bounds the whole wait. */
  async result(taskId: string, timeoutS = 300): Promise<JsonObject> {
    const deadline = Date.now() + timeoutS * 1000;
    for (;;) {
      const left = Math.max(0, (deadline - Date.now()) / 1000);
      const { task, done } = await this.waitTask(taskId, Math.min(30, left));
      if (done) {
        if (task.state === "COMPLETED") return task.result ?? {};
        throw new TaskFailed(task);
      }
      if (left <= 0) throw new TickwheelError(`task ${taskId} still ${task.state} after ${timeoutS} s`, "DEADLINE_EXCEEDED");
    }
  }

  /** Every state change of a task and the zombie writes the store refused. */
  async history(taskId: string) {
    return this.call((c) => this.scheduler.getTaskHistory({ taskId }, c));
  }

  // -- workflows -----------------------------------------------------------------

  async submitWorkflow(w: {
    name?: string;
    nodes: WorkflowNodeInput[];
    edges?: ([string, string] | { parent: string; child: string })[];
    idempotencyKey?: string;
    onUpstreamFailure?: "CANCEL" | "CONTINUE";
  }): Promise<WorkflowInfo & { created: boolean }> {
    const r = await this.call((c) =>
      this.scheduler.submitWorkflow(
        {
          name: w.name ?? "",
          nodes: w.nodes.map((n) => ({ id: n.id, task: taskSpec(n.type, n.payload, n) })),
          edges: (w.edges ?? []).map((e) => (Array.isArray(e) ? { parent: e[0], child: e[1] } : e)),
          idempotencyKey: w.idempotencyKey ?? "",
          onUpstreamFailure: w.onUpstreamFailure ? UpstreamPolicy[w.onUpstreamFailure] : UpstreamPolicy.UNSPECIFIED,
        },
        c,
      ),
    );
    return { ...workflowInfo(r), created: r.created };
  }

  async getWorkflow(workflowId: string): Promise<WorkflowInfo> {
    return workflowInfo(await this.call((c) => this.scheduler.getWorkflow({ workflowId }, c)));
  }

  async listWorkflows(limit = 0): Promise<PbWorkflow[]> {
    return (await this.call((c) => this.scheduler.listWorkflows({ limit }, c))).workflows;
  }

  async cancelWorkflow(workflowId: string): Promise<WorkflowInfo & { cancelled: number }> {
    const r = await this.call((c) => this.scheduler.cancelWorkflow({ workflowId }, c));
    return { ...workflowInfo(r.workflow as GetWorkflowResponse), cancelled: r.cancelled };
  }

  // -- schedules -----------------------------------------------------------------

  async createSchedule(s: ScheduleInput): Promise<PbSchedule> {
    const spec: MessageInitShape<typeof ScheduleSpecSchema> = {
      name: s.name,
      taskType: s.taskType,
      payload: s.payload,
      cron: s.cron ?? "",
      intervalS: s.intervalS ?? 0,
      timezone: s.timezone ?? "",
      pool: poolOf(s.pool),
      maxRetries: s.maxRetries ?? 0,
      noRetries: s.noRetries ?? false,
      timeoutS: s.timeoutS ?? 0,
      overlapPolicy: s.overlapPolicy ? OverlapPolicy[s.overlapPolicy] : OverlapPolicy.UNSPECIFIED,
      catchupWindowS: s.catchupWindowS,
      jitterS: s.jitterS,
      paused: s.paused ?? false,
    };
    return (await this.call((c) => this.scheduler.createSchedule({ schedule: spec }, c))).schedule!;
  }
  async getSchedule(scheduleId: string): Promise<PbSchedule> {
    return (await this.call((c) => this.scheduler.getSchedule({ scheduleId }, c))).schedule!;
  }
  async listSchedules(): Promise<PbSchedule[]> {
    return (await this.call((c) => this.scheduler.listSchedules({}, c))).schedules;
  }
  async pauseSchedule(scheduleId: string): Promise<PbSchedule> {
    return (await this.call((c) => this.scheduler.pauseSchedule({ scheduleId }, c))).schedule!;
  }
  async resumeSchedule(scheduleId: string): Promise<PbSchedule> {
    return (await this.call((c) => this.scheduler.resumeSchedule({ scheduleId }, c))).schedule!;
  }
  async deleteSchedule(scheduleId: string): Promise<void> {
    await this.call((c) => this.scheduler.deleteSchedule({ scheduleId }, c));
  }

  // -- expectations (dead man's switch) -------------------------------------------

  async registerExpectation(e: { jobId: string; scheduleId?: string; intervalS: number; toleranceS?: number; maxRuntimeS?: number }) {
    const r = await this.call((c) =>
      this.scheduler.registerExpectation(
        { jobId: e.jobId, scheduleId: e.scheduleId ?? "", intervalS: e.intervalS, toleranceS: e.toleranceS ?? 0, maxRuntimeS: e.maxRuntimeS ?? 0 },
        c,
      ),
    );
    return r.expectation!;
  }
  async listExpectations() {
    return (await this.call((c) => this.scheduler.listExpectations({}, c))).expectations;
  }
  async deleteExpectation(jobId: string): Promise<void> {
    await this.call((c) => this.scheduler.deleteExpectation({ jobId }, c));
  }

  // -- watching and bulk actions ---------------------------------------------------

  async countTasks(filter: MessageInitShape<typeof TaskFilterSchema> = {}) {
    return this.call((c) => this.scheduler.countTasks({ filter }, c));
  }
  async forecast(req: { start?: Date; bucketS?: number; buckets?: number; pools?: (PoolName | Pool)[] } = {}) {
    return this.call((c) =>
      this.scheduler.getForecast({ start: ts(req.start), bucketS: req.bucketS ?? 0, buckets: req.buckets ?? 0, pools: (req.pools ?? []).map(poolOf) }, c),
    );
  }
  async listWorkers() {
    return this.call((c) => this.scheduler.listWorkers({}, c));
  }
  async activity(windowS = 0, bucketS = 0) {
    return this.call((c) => this.scheduler.getActivity({ windowS, bucketS }, c));
  }
  async planBulkAction(action: "CANCEL" | "REDRIVE", filter: MessageInitShape<typeof TaskFilterSchema> = {}) {
    return this.call((c) => this.scheduler.planBulkAction({ action: BulkAction[action], filter }, c));
  }
  async runBulkAction(planToken: string) {
    return this.call((c) => this.scheduler.runBulkAction({ planToken }, c));
  }

  // -- flow control (issue 43; docs/flow-control.md) -------------------------------

  /** Limit the tasks naming `rateLimitKey: key` to `rate` starts a second across every
   * node, with bursts of up to `burst` (0: max(1, ceil(rate))). */
  async setRateLimit(key: string, rate: number, burst = 0): Promise<RateLimitInfo> {
    return rateLimitInfo((await this.call((c) => this.scheduler.setRateLimit({ limit: { key, rate, burst } }, c))).limit!);
  }
  /** The tenant's rate limits, by key. */
  async listRateLimits(): Promise<RateLimitInfo[]> {
    return (await this.call((c) => this.scheduler.listRateLimits({}, c))).limits.map(rateLimitInfo);
  }
  /** Remove a key's limit (NotFound if it had none): its tasks are no longer held. */
  async deleteRateLimit(key: string): Promise<void> {
    await this.call((c) => this.scheduler.deleteRateLimit({ key }, c));
  }
  /** Hold the tenant's tasks of a type and/or a pool PRELOADED until `resumeDispatch`. */
  async pauseDispatch(p: PauseTarget = {}): Promise<PauseInfo> {
    return pauseInfo((await this.call((c) => this.scheduler.pauseDispatch(pauseRequest(p), c))).pause!);
  }
  /** Remove the pause with exactly these fields (NotFound if none): its tasks go out in due order. */
  async resumeDispatch(p: PauseTarget = {}): Promise<void> {
    await this.call((c) => this.scheduler.resumeDispatch(pauseRequest(p), c));
  }
  /** The pauses that apply to the tenant (its own and every all-tenants one). */
  async listDispatchPauses(): Promise<PauseInfo[]> {
    return (await this.call((c) => this.scheduler.listDispatchPauses({}, c))).pauses.map(pauseInfo);
  }

  // -- unary worker writes (the streaming Worker is the usual way) ----------------

  /** Complete a task outside a stream, fenced by its token. */
  async completeTask(ref: { taskId: string; fencingToken: bigint; scheduledAt: Date }, result: JsonObject = {}): Promise<TaskInfo> {
    const r = await this.call((c) =>
      this.workers.completeTask({ task: { taskId: ref.taskId, fencingToken: ref.fencingToken, scheduledAt: ts(ref.scheduledAt) }, resultJson: jsonBytes(result) }, c),
    );
    return taskInfo(r.task!);
  }

  /** The cluster's live nodes as the node reached sees them (node id -> address). */
  async members(): Promise<Map<string, string>> {
    const r = await this.call((c) => this.workers.members({}, c));
    return new Map((r.members?.members ?? []).filter((m) => m.address).map((m) => [m.nodeId, m.address]));
  }
}

export interface AdminOptions extends ConnectOptions {
  adminToken?: string;
  /** Or an API key with the `admin` scope (its own tenant only). */
  apiKey?: string;
  /** The region the calls are for (`x-tickwheel-region`; default: the one reached). */
  region?: string;
}

/** Tenants, API keys and concurrency limits (the platform admin token, or a key with the admin scope). */
export class AdminClient extends Base {
  readonly admin: RpcClient<typeof AdminService>;

  constructor(o: AdminOptions) {
    const headers: Record<string, string> = {};
    if (o.apiKey) headers[API_KEY_HEADER] = o.apiKey;
    else if (o.adminToken) headers[ADMIN_TOKEN_HEADER] = o.adminToken;
    else throw new TypeError("AdminClient needs an adminToken (or an apiKey with the admin scope)");
    if (o.region) headers[REGION_HEADER] = o.region;
    super(o, o.apiKey, headers);
    this.admin = createClient(AdminService, this.transport);
  }

  async createTenant(t: { name: string; tier?: string; rateLimitRps?: number; maxConcurrentWorkers?: number; homeRegion?: string; id?: string }) {
    const tenant = { id: t.id ?? "", name: t.name, tier: t.tier ?? "", rateLimitRps: t.rateLimitRps ?? 0, maxConcurrentWorkers: t.maxConcurrentWorkers ?? 0, homeRegion: t.homeRegion ?? "" };
    return (await this.call((c) => this.admin.createTenant({ tenant }, c))).tenant!;
  }
  async getTenant(tenantId: string) {
    return (await this.call((c) => this.admin.getTenant({ tenantId }, c))).tenant!;
  }
  async updateTenant(u: { tenantId: string; tier?: string; rateLimitRps?: number; maxConcurrentWorkers?: number }) {
    return (await this.call((c) => this.admin.updateTenant({ tenantId: u.tenantId, tier: u.tier ?? "", rateLimitRps: u.rateLimitRps ?? 0, maxConcurrentWorkers: u.maxConcurrentWorkers ?? 0 }, c))).tenant!;
  }
  async listTenants(pageSize = 0, pageToken = "") {
    return this.call((c) => this.admin.listTenants({ pageSize, pageToken }, c));
  }
  /** A new API key; `secret` is shown only now. */
  async createApiKey(k: { tenantId: string; name?: string; scopes?: string[]; expiresAt?: Date }) {
    return this.call((c) => this.admin.createApiKey({ tenantId: k.tenantId, name: k.name ?? "", scopes: k.scopes ?? [], expiresAt: ts(k.expiresAt) }, c));
  }
  async listApiKeys(tenantId: string) {
    return (await this.call((c) => this.admin.listApiKeys({ tenantId }, c))).keys;
  }
  async revokeApiKey(keyId: string) {
    return (await this.call((c) => this.admin.revokeApiKey({ keyId }, c))).key!;
  }
  async rotateApiKey(keyId: string, graceS = 0, expiresAt?: Date) {
    return this.call((c) => this.admin.rotateApiKey({ keyId, graceS, expiresAt: ts(expiresAt) }, c));
  }

  /** At most `limit` tasks of one concurrency key of `type` run at once, cluster-wide
   * (1..100,000; undefined or 0: back to the default, 1). Returns the limit in force. */
  async setConcurrencyLimit(tenantId: string, type: string, limit?: number): Promise<number> {
    return (await this.call((c) => this.admin.setConcurrencyLimit({ tenantId, type, limit: limit ?? 0 }, c))).limit!.limit;
  }
  /** The concurrency limits set for a tenant, by task type (a type not listed: 1). */
  async listConcurrencyLimits(tenantId: string): Promise<Map<string, number>> {
    const r = await this.call((c) => this.admin.listConcurrencyLimits({ tenantId }, c));
    return new Map(r.limits.map((l) => [l.type, l.limit]));
  }
}
