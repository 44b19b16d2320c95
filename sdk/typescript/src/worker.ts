// The streaming worker: WorkerService.Connect, one stream per cluster member.
//
// The protocol (proto/tickwheel/v1/tickwheel.proto, WorkerService), as the Python SDK
// (src/scheduler/worker) speaks it:
// - Hello (worker id, types, pools, slots as initial credit, start_on_delivery,
//   json_bytes, backlog, early_ms) -> Welcome (session, lease ttl, heartbeat interval,
//   members); a task pushed ahead of its due time (start_in_us) is acked at once and
//   its handler held until then;
// - the server pushes Assignments against credit; each finished handler gives a slot
//   back as Credit, before its outcome's Result (at most `slots` outcomes in flight so;
//   one message for every slot freed in one turn of the event loop);
// - ack-first (default): an Ack per push turns the tasks RUNNING before their handlers
//   start; start-on-delivery: the handlers start at once and no ack is sent;
// - heartbeats renew the leases of the running tasks (at once after a reconnect, so the
//   new stream takes them over); a refused one means the lease is lost (signal fires);
// - outcomes are fenced by the attempt's token: Completions (batched), Failure,
//   CancelConfirmed, Release (with the last checkpoint); a refused one is a zombie's;
// - a broken stream reconnects with full-jitter backoff (0.1 s, doubling, 2 s cap);
//   tasks already running keep running and commit on the new stream;
// - WRONG_REGION sends the stream to the endpoints it names;
// - drain: Drain (no more pushes), signal the handlers, wait the grace, Release what
//   still runs with its checkpoint, then half-close;
// - cluster reach: the worker reads the live members (WorkerService.Members) and keeps
//   a stream to each when there are two or more, its slots split by demand between
//   them (credit.ts); with one node it streams to the target alone.
import { createClient, type Client as RpcClient } from "@connectrpc/connect";
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { Timestamp } from "@bufbuild/protobuf/wkt";
import { timestampDate } from "@bufbuild/protobuf/wkt";
import { hostname } from "node:os";
import { randomUUID } from "node:crypto";
import {
  WorkerService,
  type Assignment,
  type ServerMessage,
  type TaskResult,
  type WorkerMessageSchema,
  type TaskRefSchema,
} from "./gen/tickwheel/v1/tickwheel_pb.js";
import { fromError, InvalidArgument, PermissionDenied, StaleFencingToken, TickwheelError, Unauthenticated, Unavailable, WrongRegion } from "./errors.js";
import { API_KEY_HEADER, poolOf, type PoolName } from "./client.js";
import { CreditSplit } from "./credit.js";
import { ApplicationError, Interrupted, type CancelReason, type TaskContext } from "./context.js";
import { fromJsonBytes, jsonBytes, type JsonObject } from "./json.js";
import { jsonLogger, type Logger } from "./log.js";
import { regionTargets, type RegionDirectory } from "./regions.js";
import { openTransport, type TlsOptions } from "./transport.js";

type WorkerMessageInit = MessageInitShape<typeof WorkerMessageSchema>;
type Ref = MessageInitShape<typeof TaskRefSchema>;

/** A task handler: the task's payload and its context; its value is the result (an
 * object; anything else is stored as `{"result": value}`; undefined as `{}`). */
export type Handler = (payload: JsonObject, ctx: TaskContext) => unknown | Promise<unknown>;

export interface WorkerOptions {
  /** `host:port` of any node (the seed of the member list). */
  target?: string;
  apiKey: string;
  /** Tasks run at once, over every stream (default 10). */
  slots?: number;
  workerId?: string;
  pools?: (PoolName | number)[];
  /** Start each handler when its push arrives, without an ack (see docs/typescript.md). */
  startOnDelivery?: boolean;
  /** Override the server's heartbeat interval (seconds). */
  heartbeatIntervalS?: number;
  /** Longest wait for a Result of a request (seconds, default 30). */
  requestTimeoutS?: number;
  reconnect?: { initialBackoffS?: number; maxBackoffS?: number };
  /** Reach every member of a cluster (default true): one stream per live node. */
  cluster?: boolean;
  /** How often the member list is read again (seconds, default 5). */
  membersIntervalS?: number;
  tls?: TlsOptions | boolean;
  regions?: RegionDirectory;
  /** JSON lines on stderr by default. */
  logger?: Logger;
  /** Error names (`err.name`) that dead-letter at once, per task type. */
  nonRetryable?: Record<string, string[]>;
}

/** What a drain came to. */
export interface DrainReport {
  completed: number;
  failed: number;
  cancelled: number;
  released: number;
  releasedAtDeadline: number;
  rejected: number;
  uncommitted: number;
}

/** Longest a completion waits for an earlier Completions message's Result. */
const COMPLETION_LINGER_MS = 5;
/** Hello.early_ms: a task may be pushed this far ahead of its due time, and is held
 * until then (the server pushes at most its own --push-ahead-ms ahead, 20 by default). */
const HOLD_EARLY_MS = 1000;
const FATAL = [Unauthenticated, PermissionDenied, InvalidArgument];
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** An async iterable fed by push(): the request side of the stream. */
class Outbox implements AsyncIterable<WorkerMessageInit> {
  private items: WorkerMessageInit[] = [];
  private waiter: ((v: IteratorResult<WorkerMessageInit>) => void) | undefined;
  private ended = false;
  /** Whether `m` still waits here, unwritten. */
  waiting(m: WorkerMessageInit): boolean {
    return this.items.includes(m);
  }
  push(m: WorkerMessageInit): void {
    if (this.ended) return;
    const w = this.waiter;
    if (w) {
      this.waiter = undefined;
      w({ value: m, done: false });
    } else this.items.push(m);
  }
  end(): void {
    this.ended = true;
    const w = this.waiter;
    if (w && this.items.length === 0) {
      this.waiter = undefined;
      w({ value: undefined, done: true });
    }
  }
  private next(): Promise<IteratorResult<WorkerMessageInit>> {
    const m = this.items.shift();
    if (m !== undefined) return Promise.resolve({ value: m, done: false });
    if (this.ended) return Promise.resolve({ value: undefined, done: true });
    return new Promise((r) => (this.waiter = r));
  }
  // An async generator: the transport needs next, return and throw.
  async *[Symbol.asyncIterator](): AsyncGenerator<WorkerMessageInit> {
    try {
      for (;;) {
        const r = await this.next();
        if (r.done) return;
        yield r.value;
      }
    } finally {
      this.ended = true;
    }
  }
}

/** One stream attempt: its outbox and the requests awaiting a Result. */
class Conn {
  readonly outbox = new Outbox();
  readonly pending = new Map<bigint, { resolve: (r: TaskResult[]) => void; reject: (e: Error) => void; timer: NodeJS.Timeout }>();
  readonly abort = new AbortController();
  failPending(): void {
    for (const p of this.pending.values()) {
      clearTimeout(p.timer);
      p.reject(new Unavailable("worker stream closed", "UNAVAILABLE"));
    }
    this.pending.clear();
  }
}

/** One task held by this worker (one attempt: its ref carries the token). */
class Held {
  readonly abort = new AbortController();
  cancelReason: CancelReason | undefined;
  acked = false;
  committing = false;
  released = false;
  /** Its slot went back when its handler returned; the row stays until the outcome's Result. */
  freed = false;
  done: Promise<void> = Promise.resolve();
  checkpointData: JsonObject | undefined;
  drainDeadline: Date | undefined;
  /** performance.now() before which the handler must not start: a task pushed ahead of
   * its due time (Assignment.start_in_us, from the push's arrival) is held until then. */
  readonly startAt: number;
  constructor(
    readonly member: Member,
    readonly a: Assignment,
    readonly ref: Ref,
  ) {
    this.checkpointData = fromJsonBytes(a.checkpointJson, a.checkpoint);
    this.startAt = a.startInUs ? performance.now() + a.startInUs / 1000 : 0;
  }
  cancel(reason: CancelReason): void {
    if (this.cancelReason) return; // the first reason wins
    this.cancelReason = reason;
    this.abort.abort(new Interrupted(reason));
  }
}

/** The worker's stream to one node, across reconnects. */
class Member {
  conn: Conn | undefined;
  heartbeatS: number;
  closing = false;
  reconnects = 0;
  welcomed = false;
  private ids = 0n;
  private creditDue = 0;
  private creditScheduled = false;
  private completions: { items: MessageInitShape<typeof WorkerMessageSchema>[]; waiters: { taskId: string; resolve: (r: TaskResult | undefined) => void; reject: (e: Error) => void }[] } | undefined;
  private connectedWaiters: (() => void)[] = [];
  private targetIndex = 0;
  private transport;
  private rpc: RpcClient<typeof WorkerService>;
  running: Promise<void> | undefined;

  constructor(
    readonly w: Worker,
    readonly name: string,
    private targets: string[],
    readonly wantBacklog: boolean,
  ) {
    this.heartbeatS = w.opts.heartbeatIntervalS ?? 10;
    this.transport = openTransport(targets[0]!, w.opts.tls);
    this.rpc = createClient(WorkerService, this.transport);
  }

  get target(): string {
    return this.targets[this.targetIndex]!;
  }

  private retarget(targets: string[]): void {
    this.targets = targets;
    this.targetIndex = 0;
    this.transport = openTransport(targets[0]!, this.w.opts.tls);
    this.rpc = createClient(WorkerService, this.transport);
  }

  private advance(): void {
    if (this.targets.length < 2) return;
    this.targetIndex = (this.targetIndex + 1) % this.targets.length;
    this.transport = openTransport(this.target, this.w.opts.tls);
    this.rpc = createClient(WorkerService, this.transport);
  }

  /** Stream attempts until closed; rejects on the fatal errors. */
  async run(): Promise<void> {
    const initial = (this.w.opts.reconnect?.initialBackoffS ?? 0.1) * 1000;
    const cap = (this.w.opts.reconnect?.maxBackoffS ?? 2) * 1000;
    let ceiling = initial;
    let redirected = false;
    while (!this.closing) {
      let moved = false;
      let welcomed = false;
      try {
        welcomed = await this.attempt();
      } catch (err) {
        const e = fromError(err);
        welcomed = this.welcomed;
        if (e instanceof WrongRegion && e.endpoints.length) {
          this.w.log("info", `the tenant lives in region ${e.region}: reconnecting to ${e.endpoints.join(", ")}`);
          this.retarget(e.endpoints);
          moved = true;
        } else if (FATAL.some((cls) => e instanceof cls)) {
          throw e;
        } else {
          this.w.log(this.reconnects < 3 ? "warning" : "debug", `stream to ${this.target} broke: ${e.code}: ${e.message}`);
          if (!welcomed && e.code === "UNAVAILABLE") this.advance();
        }
      }
      if (this.closing) break;
      if (welcomed) ceiling = initial;
      if (moved && !redirected) {
        redirected = true;
        continue;
      }
      redirected = moved;
      const delay = Math.random() * ceiling;
      ceiling = Math.min(ceiling * 2, cap);
      this.reconnects += 1;
      this.w.log("info", `reconnecting to ${this.target} in ${(delay / 1000).toFixed(2)} s`);
      await this.w.pause(delay);
    }
  }

  /** One stream attempt; whether it was welcomed. */
  private async attempt(): Promise<boolean> {
    const w = this.w;
    const conn = new Conn();
    this.welcomed = false;
    const announced = w.helloSlots(this);
    conn.outbox.push({
      kind: {
        case: "hello",
        value: {
          workerId: w.workerId,
          taskTypes: [...w.handlers.keys()].sort(),
          pools: (w.opts.pools ?? []).map((p) => poolOf(p as PoolName)),
          slots: announced,
          startOnDelivery: w.startOnDelivery,
          jsonBytes: true,
          backlog: this.wantBacklog,
          earlyMs: HOLD_EARLY_MS,
        },
      },
    });
    const timeoutMs = w.requestTimeoutS * 1000;
    const responses = this.rpc.connect(conn.outbox, { headers: { [API_KEY_HEADER]: w.opts.apiKey }, signal: conn.abort.signal })[Symbol.asyncIterator]();
    let heart: NodeJS.Timeout | undefined;
    try {
      let helloTimer: NodeJS.Timeout | undefined;
      const first = await Promise.race([
        responses.next(),
        new Promise<never>((_, reject) => {
          helloTimer = setTimeout(() => reject(new Unavailable("no welcome from the server in time", "UNAVAILABLE")), timeoutMs);
        }),
      ]).finally(() => clearTimeout(helloTimer));
      if (first.done || first.value.kind.case !== "welcome") throw new Unavailable("server did not welcome the worker", "UNAVAILABLE");
      const welcome = first.value.kind.value;
      if (w.opts.heartbeatIntervalS === undefined && welcome.heartbeatIntervalS > 0) this.heartbeatS = welcome.heartbeatIntervalS;
      w.log("info", `worker ${w.workerId} ${this.reconnects ? "reconnected" : "connected"} (session ${welcome.sessionId}, ${announced} slots, server ${this.target})`);
      this.welcomed = true;
      this.conn = conn;
      for (const f of this.connectedWaiters.splice(0)) f();
      w.onWelcome(this, announced, welcome.backlog);
      const beat = () => {
        heart = setTimeout(() => {
          void w.heartbeat(this).finally(() => {
            if (this.conn === conn) beat();
          });
        }, this.heartbeatS * 1000);
      };
      beat();
      for (;;) {
        const next = await responses.next();
        if (next.done) break;
        this.onMessage(next.value, conn);
      }
      return true;
    } catch (err) {
      if (this.closing && conn.abort.signal.aborted) return this.welcomed;
      throw err;
    } finally {
      clearTimeout(heart);
      if (this.conn === conn) this.conn = undefined;
      conn.failPending();
      conn.outbox.end();
      conn.abort.abort();
      w.onClosed(this);
    }
  }

  private onMessage(msg: ServerMessage, conn: Conn): void {
    const kind = msg.kind;
    switch (kind.case) {
      case "assignments":
        this.w.onAssignments(this, kind.value.tasks);
        break;
      case "result": {
        const r = kind.value;
        if (r.code) this.w.log("warning", `the server refused request ${r.requestId} (status ${r.code}, field ${JSON.stringify(r.field)}): ${r.message}`);
        const p = conn.pending.get(r.requestId);
        if (p) {
          conn.pending.delete(r.requestId);
          clearTimeout(p.timer);
          p.resolve(r.results);
        }
        break;
      }
      case "cancel":
        if (kind.value.task) this.w.onCancel(kind.value.task.taskId, kind.value.task.fencingToken);
        break;
      case "backlog":
        this.w.onBacklog(this, Number(kind.value.waiting));
        break;
      default:
        break;
    }
  }

  // -- sending ---------------------------------------------------------------------

  /** Fire and forget (dropped while disconnected). */
  send(m: WorkerMessageInit): void {
    this.conn?.outbox.push(m);
  }

  /** Give `n` credits; all given in one turn of the event loop ride in one message. */
  credit(n: number): void {
    this.creditDue += n;
    if (this.creditScheduled) return;
    this.creditScheduled = true;
    setImmediate(() => {
      this.creditScheduled = false;
      const slots = this.creditDue;
      this.creditDue = 0;
      if (slots > 0 && !this.w.stopping) this.send({ kind: { case: "credit", value: { slots } } });
    });
  }

  private lastAck: { conn: Conn; msg: WorkerMessageInit; refs: Ref[]; answer: Promise<TaskResult[]> } | undefined;

  /** Acknowledge `refs`: while an earlier ack still waits unwritten in the outbox, they
   * join it (one message and one Result for every push that arrived meanwhile). */
  ack(refs: Ref[]): Promise<TaskResult[]> {
    const last = this.lastAck;
    if (last && last.conn === this.conn && last.conn.outbox.waiting(last.msg)) {
      last.refs.push(...refs);
      return last.answer;
    }
    const tasks = [...refs];
    const msg: WorkerMessageInit = { kind: { case: "ack", value: { tasks } } };
    const answer = this.startRequest(msg);
    if (this.conn) this.lastAck = { conn: this.conn, msg, refs: tasks, answer };
    return answer;
  }

  /** Send with a request id; its Result (fails when no stream is up or it breaks). */
  startRequest(m: WorkerMessageInit): Promise<TaskResult[]> {
    const conn = this.conn;
    if (!conn) return Promise.reject(new Unavailable("worker stream not connected", "UNAVAILABLE"));
    const id = ++this.ids;
    m.requestId = id;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        conn.pending.delete(id);
        reject(new Unavailable("no answer from the server in time", "UNAVAILABLE"));
      }, this.w.requestTimeoutS * 1000);
      conn.pending.set(id, { resolve, reject, timer });
      conn.outbox.push(m);
    });
  }

  async connected(timeoutMs: number): Promise<void> {
    if (this.conn) return;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      new Promise<void>((r) => this.connectedWaiters.push(r)),
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Unavailable("worker stream not connected", "UNAVAILABLE")), timeoutMs);
      }),
    ]).finally(() => clearTimeout(timer));
  }

  /** Send (waiting for a stream if there is none) and return the results. */
  async request(m: WorkerMessageInit, timeoutMs = this.w.requestTimeoutS * 1000): Promise<TaskResult[]> {
    await this.connected(timeoutMs);
    return this.startRequest(m);
  }

  /** A completion joins the others finished meanwhile in one Completions message
   * (Nagle's rule, as the Python SDK: with no Completions awaiting its Result the batch
   * goes at the end of this turn of the event loop; with one, it waits for that Result,
   * at most COMPLETION_LINGER_MS, gathering what finishes meanwhile). */
  complete(item: MessageInitShape<typeof WorkerMessageSchema>, taskId: string): Promise<TaskResult | undefined> {
    if (!this.completions) {
      this.completions = { items: [], waiters: [] };
      if (this.completionsInFlight) this.linger = setTimeout(() => this.flushCompletions(), COMPLETION_LINGER_MS);
      else setImmediate(() => this.flushCompletions());
    }
    const batch = this.completions;
    batch.items.push(item);
    return new Promise((resolve, reject) => batch.waiters.push({ taskId, resolve, reject }));
  }

  private completionsInFlight = 0;
  private linger: NodeJS.Timeout | undefined;

  private flushCompletions(): void {
    const batch = this.completions;
    if (!batch) return;
    this.completions = undefined;
    clearTimeout(this.linger);
    this.linger = undefined;
    this.completionsInFlight += 1;
    const msg: WorkerMessageInit = { kind: { case: "completions", value: { items: batch.items as never } } };
    this.startRequest(msg)
      .then(
        (results) => {
          const by = new Map(results.map((r) => [r.taskId, r]));
          for (const wt of batch.waiters) wt.resolve(by.get(wt.taskId));
        },
        (err: Error) => {
          for (const wt of batch.waiters) wt.reject(err);
        },
      )
      .finally(() => {
        this.completionsInFlight -= 1;
        if (!this.completionsInFlight && this.completions) this.flushCompletions();
      });
  }

  /** Stop reconnecting and half-close the current stream (the server ends it). */
  finish(): void {
    this.closing = true;
    this.conn?.outbox.end();
  }

  /** Drop the stream at once (no drain). */
  kill(): void {
    this.closing = true;
    this.conn?.abort.abort();
  }
}

/**
 * Runs handlers for one tenant.
 *
 * ```ts
 * const worker = new Worker({ target: "127.0.0.1:50051", apiKey });
 * worker.register("email", async (payload, ctx) => ({ sent: true }));
 * worker.handleSignals();   // SIGTERM/SIGINT drain
 * await worker.run();       // until shutdown()
 * ```
 */
export class Worker {
  readonly opts: WorkerOptions;
  readonly workerId: string;
  readonly handlers = new Map<string, Handler>();
  readonly startOnDelivery: boolean;
  readonly requestTimeoutS: number;
  readonly capacity: number;
  private freed = 0;
  readonly held = new Map<string, Held>();
  readonly report: DrainReport = { completed: 0, failed: 0, cancelled: 0, released: 0, releasedAtDeadline: 0, rejected: 0, uncommitted: 0 };
  stopping = false;
  private readonly logger: Logger;
  private readonly split: CreditSplit;
  private readonly up = new Set<Member>();
  private readonly members = new Map<string, Member>();
  private readonly seeds: string[];
  private readonly membersClients = new Map<string, RpcClient<typeof WorkerService>>();
  private started = false;
  private closed = false;
  private wake: (() => void) | undefined;
  private fatal: Error | undefined;
  private shutdownPromise: Promise<DrainReport> | undefined;
  private drainDeadline = Infinity;
  private deadlineMoved: (() => void) | undefined;

  constructor(opts: WorkerOptions) {
    if (!opts.apiKey) throw new TypeError("Worker needs an apiKey");
    this.opts = opts;
    this.workerId = opts.workerId ?? `${hostname()}-${process.pid}-${randomUUID().slice(0, 6)}`;
    this.capacity = opts.slots ?? 10;
    if (!Number.isInteger(this.capacity) || this.capacity < 1) throw new RangeError("Worker slots must be an integer >= 1");
    this.startOnDelivery = opts.startOnDelivery ?? false;
    this.requestTimeoutS = opts.requestTimeoutS ?? 30;
    this.logger = opts.logger ?? jsonLogger();
    this.split = new CreditSplit(this.capacity);
    this.seeds = regionTargets(opts.target, opts.apiKey, opts.regions);
  }

  /** Run `handler` for tasks of `type` (before run()). */
  register(type: string, handler: Handler): this {
    if (this.started) throw new Error("register() before run()");
    this.handlers.set(type, handler);
    return this;
  }

  log(level: "debug" | "info" | "warning" | "error", message: string, fields?: Record<string, unknown>): void {
    this.logger.log(level, message, { worker_id: this.workerId, ...fields });
  }

  /** Tasks held right now. */
  get runningTasks(): number {
    return this.held.size;
  }

  /** Times a stream broke and was tried again, over every member. */
  get reconnects(): number {
    let n = 0;
    for (const m of this.members.values()) n += m.reconnects;
    return n;
  }

  /** The node names of the streams running (`seed` when streaming to the target alone). */
  get memberNames(): string[] {
    return [...this.members.keys()];
  }

  /** Drain on SIGTERM and SIGINT (a second signal shortens the grace to 0). */
  handleSignals(graceS = 30): this {
    let calls = 0;
    const onSignal = (sig: NodeJS.Signals) => {
      this.log("info", `${sig}: draining`);
      void this.shutdown(calls++ === 0 ? graceS : 0);
    };
    process.on("SIGTERM", onSignal);
    process.on("SIGINT", onSignal);
    return this;
  }

  /** Connect and run handlers until shutdown(); rejects on fatal errors (bad API key,
   * rejected hello). Transient failures reconnect with backoff. */
  async run(): Promise<void> {
    if (this.started) throw new Error("Worker.run() may be called only once");
    if (this.handlers.size === 0) throw new Error("Worker needs at least one handler (register())");
    this.started = true;
    if (this.stopping) return;
    const cluster = this.opts.cluster ?? true;
    const interval = (this.opts.membersIntervalS ?? 5) * 1000;
    let lastReconnects = -1;
    let last = -Infinity;
    try {
      while (!this.stopping && !this.fatal) {
        const reconnects = this.reconnects;
        if (this.members.size === 0 || (cluster && (reconnects !== lastReconnects || Date.now() - last >= interval))) {
          last = Date.now();
          await this.refreshMembers(cluster);
          lastReconnects = this.reconnects;
        }
        await new Promise<void>((r) => {
          this.wake = r;
          setTimeout(r, Math.min(interval, 200)).unref?.();
        });
      }
      if (this.fatal) throw this.fatal;
      await this.shutdownPromise;
    } finally {
      if (!this.stopping) {
        this.stopping = true;
        for (const m of this.members.values()) m.kill();
      }
      await Promise.allSettled([...this.members.values()].map((m) => m.running));
      this.closed = true;
    }
  }

  private async refreshMembers(cluster: boolean): Promise<void> {
    let live = new Map<string, string>();
    if (cluster) {
      const candidates = [...this.seeds, ...[...this.members.values()].map((m) => m.target).filter((t) => !this.seeds.includes(t))];
      for (const target of candidates) {
        try {
          let rpc = this.membersClients.get(target);
          if (!rpc) {
            rpc = createClient(WorkerService, openTransport(target, this.opts.tls));
            this.membersClients.set(target, rpc);
          }
          const r = await rpc.members({}, { headers: { [API_KEY_HEADER]: this.opts.apiKey }, timeoutMs: 5000 });
          live = new Map((r.members?.members ?? []).filter((m) => m.address).map((m) => [m.nodeId, m.address]));
          if (live.size) break;
        } catch (err) {
          this.log("debug", `members from ${target}: ${fromError(err).message}`);
        }
      }
    }
    const alone = this.members.has("seed") || this.members.size === 0;
    if (live.size <= 1 && alone) {
      // One node (or an older server): the target alone, every slot at its Hello.
      if (!this.members.has("seed")) this.startMember("seed", this.seeds, false);
      return;
    }
    if (live.size === 0) return; // nobody answered: keep what runs
    for (const [name, m] of [...this.members]) {
      if (live.get(name) !== m.target) {
        this.log("info", `member ${name} left: draining its stream`);
        this.members.delete(name);
        this.up.delete(m);
        this.splitGrant(this.split.close(name));
        m.send({ kind: { case: "drain", value: {} } });
        // its tasks keep running and commit on it; it closes when they are done
        void this.closeWhenIdle(m);
      }
    }
    for (const [name, address] of live) {
      if (!this.members.has(name)) this.startMember(name, [address], true);
    }
  }

  private async closeWhenIdle(m: Member): Promise<void> {
    while ([...this.held.values()].some((h) => h.member === m)) await sleep(200);
    m.finish();
  }

  private startMember(name: string, targets: string[], backlog: boolean): void {
    const m = new Member(this, name, targets, backlog);
    this.members.set(name, m);
    this.log("info", name === "seed" ? `streaming to ${targets[0]} alone` : `streaming to member ${name} at ${targets[0]} (slots shared by demand)`);
    m.running = m.run().catch((err: Error) => {
      if (!this.fatal) this.fatal = err;
      this.wake?.();
    });
  }

  /** Wait `ms`, or less when the worker stops. */
  async pause(ms: number): Promise<void> {
    await sleep(ms);
  }

  // -- credit ----------------------------------------------------------------------

  private splitGrant(grants: Map<string, number>): void {
    if (this.stopping) return;
    for (const [name, n] of grants) {
      const m = this.members.get(name);
      if (m && this.up.has(m) && n > 0) m.credit(n);
    }
  }

  helloSlots(m: Member): number {
    if (this.stopping) return 0;
    this.up.delete(m);
    this.splitGrant(this.split.close(m.name));
    this.splitGrant(this.split.open(m.name, m.wantBacklog));
    return this.split.granted(m.name);
  }

  onWelcome(m: Member, announced: number, reports: boolean): void {
    if (this.stopping) {
      m.send({ kind: { case: "drain", value: {} } });
    } else {
      this.up.add(m);
      const grants = this.split.open(m.name, reports && m.wantBacklog);
      grants.delete(m.name);
      this.splitGrant(grants);
      const extra = this.split.granted(m.name) - announced;
      if (extra > 0) m.credit(extra);
    }
    // Tasks still held on this member from a previous stream: take them over now.
    const refs = [...this.held.values()].filter((h) => h.member === m && h.acked && !h.released).map((h) => h.ref);
    if (refs.length) m.send({ kind: { case: "heartbeat", value: { tasks: refs } } });
  }

  onClosed(m: Member): void {
    this.up.delete(m);
    this.splitGrant(this.split.close(m.name));
  }

  onBacklog(m: Member, waiting: number): void {
    if (!this.stopping) this.splitGrant(this.split.backlog(m.name, waiting));
  }

  // -- tasks -----------------------------------------------------------------------

  onCancel(taskId: string, token: bigint): void {
    const h = this.held.get(taskId);
    if (h && h.a.fencingToken === token) {
      this.log("info", `task ${taskId}: cancel requested by a client`, { task_id: taskId });
      h.cancel("cancelled");
    }
  }

  async heartbeat(m: Member): Promise<void> {
    const refs = [...this.held.values()].filter((h) => h.member === m && h.acked && !h.released && !h.committing).map((h) => h.ref);
    if (!refs.length) return;
    let results: TaskResult[];
    try {
      results = await m.request({ kind: { case: "heartbeat", value: { tasks: refs } } });
    } catch (err) {
      this.log("debug", `heartbeat failed: ${(err as Error).message}`);
      return;
    }
    for (const r of results) {
      if (r.ok) continue;
      const h = this.held.get(r.taskId);
      if (h && !h.released && !h.committing) {
        this.log("warning", `zombie: task ${r.taskId} lost its lease (${r.reason}); its result will be rejected`, { task_id: r.taskId });
        h.cancel("lease_lost");
      }
    }
  }

  onAssignments(m: Member, tasks: Assignment[]): void {
    const fresh: Held[] = [];
    let givenBack = 0;
    for (const a of tasks) {
      const ref: Ref = { taskId: a.taskId, fencingToken: a.fencingToken, scheduledAt: a.scheduledAt as Timestamp };
      if (this.stopping || !this.handlers.has(a.type) || this.held.has(a.taskId)) {
        m.send({ kind: { case: "release", value: { task: ref } } });
        givenBack += 1;
        continue;
      }
      const h = new Held(m, a, ref);
      this.held.set(a.taskId, h);
      fresh.push(h);
    }
    this.split.pushed(m.name, fresh.length + givenBack);
    if (givenBack) this.splitGrant(this.split.finished(givenBack));
    if (!fresh.length) return;
    if (this.startOnDelivery) {
      for (const h of fresh) {
        h.acked = true;
        this.launch(h);
      }
      return;
    }
    m.ack(fresh.map((h) => h.ref)).then(
      (results) => {
        const ok = new Map(results.map((r) => [r.taskId, r]));
        for (const h of fresh) {
          const r = ok.get(h.a.taskId);
          if (r?.ok) {
            h.acked = true;
            this.launch(h);
          } else {
            this.log("info", `task ${h.a.taskId}: ack refused (${r?.reason ?? "no answer"}): not run`, { task_id: h.a.taskId });
            this.drop(h);
          }
        }
      },
      (err: Error) => {
        // The stream broke before the answer: the server takes the unacked tasks back.
        this.log("info", `ack failed: ${err.message}: ${fresh.length} task(s) not run`);
        for (const h of fresh) this.drop(h);
      },
    );
  }

  private drop(h: Held): void {
    if (this.held.get(h.a.taskId) === h) this.held.delete(h.a.taskId);
    if (h.freed) this.freed -= 1; // its slot went back when its handler returned
    else this.splitGrant(this.split.finished(1));
  }

  /** The handler returned: its slot is free now, while its outcome is still being
   * committed (at most `capacity` rows in that state; past that, at drop). A slot bounds
   * the handlers that run at once, so a short task's slot is free a round trip sooner. */
  private handlerEnded(h: Held): void {
    if (h.freed || this.freed >= this.capacity) return;
    h.freed = true;
    this.freed += 1;
    this.splitGrant(this.split.finished(1));
  }

  private launch(h: Held): void {
    h.done = this.attempt(h).catch((err: Error) => this.log("error", `task ${h.a.taskId}: ${err.stack ?? err.message}`)).finally(() => this.drop(h));
  }

  private context(h: Held): TaskContext {
    const a = h.a;
    const w = this;
    return {
      taskId: a.taskId,
      tenantId: a.tenantId,
      type: a.type,
      attempt: a.attempt,
      maxRetries: a.maxRetries,
      fencingToken: a.fencingToken,
      scheduledAt: a.scheduledAt ? timestampDate(a.scheduledAt) : undefined,
      dueAt: a.dueAt ? timestampDate(a.dueAt) : undefined,
      receivedAt: new Date(),
      timeoutS: a.timeoutS,
      traceparent: a.traceContext?.traceparent || undefined,
      get checkpointData() {
        return h.checkpointData;
      },
      signal: h.abort.signal,
      get cancelReason() {
        return h.cancelReason;
      },
      get drainDeadline() {
        return h.drainDeadline;
      },
      async checkpoint(data: JsonObject) {
        const results = await h.member.request({ kind: { case: "checkpoint", value: { task: h.ref, dataJson: jsonBytes(data) } } });
        const r = results[0];
        if (!r?.ok) {
          throw new StaleFencingToken(`task ${a.taskId}: stale fencing token ${a.fencingToken}: ${r?.reason ?? "checkpoint refused"}`, "FAILED_PRECONDITION", "STALE_FENCING_TOKEN", {
            task_id: a.taskId,
            token: String(a.fencingToken),
            reason: r?.reason ?? "",
          });
        }
        h.checkpointData = data;
      },
      throwIfCancelled() {
        if (h.cancelReason) throw new Interrupted(h.cancelReason);
      },
      // keep `w` referenced for debuggers
      toString: () => `TaskContext(${a.taskId}, ${a.type}, attempt ${a.attempt}, token ${a.fencingToken}, worker ${w.workerId})`,
    } as TaskContext;
  }

  private async invoke(h: Held): Promise<{ ok: true; value: Uint8Array } | { ok: false; error: Error }> {
    // Pushed ahead: held to its due instant (a timer may fire a little early: wait again).
    for (let wait = h.startAt - performance.now(); wait > 0; wait = h.startAt - performance.now()) {
      await sleep(Math.ceil(wait));
    }
    // Cancelled, drained or lost before it started: the handler never runs.
    if (h.cancelReason) return { ok: false, error: new Interrupted(h.cancelReason) };
    const handler = this.handlers.get(h.a.type)!;
    const payload = fromJsonBytes(h.a.payloadJson, h.a.payload) ?? {};
    const ctx = this.context(h);
    let timer: NodeJS.Timeout | undefined;
    try {
      let run = Promise.resolve().then(() => handler(payload, ctx));
      if (h.a.timeoutS > 0) {
        run = Promise.race([
          run,
          new Promise<never>((_, reject) => {
            timer = setTimeout(() => reject(new Error(`handler exceeded its timeout of ${h.a.timeoutS} s`)), h.a.timeoutS * 1000);
          }),
        ]);
      }
      const value = await run;
      const result = value === undefined || value === null ? {} : typeof value === "object" && !Array.isArray(value) ? value : { result: value };
      return { ok: true, value: jsonBytes(result) };
    } catch (err) {
      const error = err instanceof Error ? err : new Error(String(err));
      if (!h.cancelReason) this.log("warning", `task ${h.a.taskId} (type ${h.a.type}, attempt ${h.a.attempt}, fencing token ${h.a.fencingToken}): attempt failed: ${error.message}`, { task_id: h.a.taskId });
      return { ok: false, error };
    } finally {
      clearTimeout(timer);
    }
  }

  private async attempt(h: Held): Promise<void> {
    const outcome = await this.invoke(h);
    this.handlerEnded(h);
    if (h.released) return; // released at the drain deadline while it ran
    const reason = h.cancelReason;
    let msg: WorkerMessageInit | undefined;
    let kind: keyof DrainReport;
    if (reason === "cancelled") {
      msg = { kind: { case: "cancelConfirmed", value: { task: h.ref } } };
      kind = "cancelled";
    } else if (!outcome.ok && reason === "drain") {
      msg = { kind: { case: "release", value: { task: h.ref, checkpointJson: jsonBytes(h.checkpointData) } } };
      kind = "released";
    } else if (!outcome.ok && reason === "lease_lost") {
      this.report.rejected += 1;
      return; // any write would be refused: another attempt owns the task
    } else if (!outcome.ok) {
      const e = outcome.error;
      const errorType = (e.name && e.name !== "Error" ? e.name : e.constructor?.name) || "Error";
      const listed = this.opts.nonRetryable?.[h.a.type]?.includes(errorType) ?? false;
      const retryable = !(e instanceof ApplicationError && e.nonRetryable) && !listed;
      msg = {
        kind: {
          case: "failure",
          value: { task: h.ref, error: (e.message || errorType).slice(0, 4000), retryable, errorType: /^[\x20-\x7e]{1,128}$/.test(errorType) ? errorType : "" },
        },
      };
      kind = "failed";
    } else {
      kind = "completed";
    }
    h.committing = true;
    const res = await this.commit(h, msg, outcome.ok ? outcome.value : undefined);
    if (res === undefined) {
      this.report.uncommitted += 1;
    } else if (!res.ok) {
      this.report.rejected += 1;
      this.log("warning", `zombie: ${kind} of task ${h.a.taskId} with fencing token ${h.a.fencingToken} was rejected (${res.reason}); another attempt owns the task, this outcome is discarded`, {
        task_id: h.a.taskId,
      });
    } else {
      this.report[kind] += 1;
      if (kind === "released") this.log("info", `task ${h.a.taskId}: released with checkpoint ${JSON.stringify(h.checkpointData ?? null)}`, { task_id: h.a.taskId });
    }
  }

  /** A fenced write, tried again across reconnects; undefined if it never got through. */
  private async commit(h: Held, msg: WorkerMessageInit | undefined, result: Uint8Array | undefined): Promise<TaskResult | undefined> {
    for (let attempt = 0; attempt < 5; attempt++) {
      try {
        if (msg === undefined) {
          await h.member.connected(this.requestTimeoutS * 1000);
          return await h.member.complete({ task: h.ref, resultJson: result } as never, h.a.taskId);
        }
        return (await h.member.request({ ...msg }))[0];
      } catch (err) {
        if (!(err instanceof Unavailable) || h.member.closing) break;
        this.log("info", `task ${h.a.taskId}: commit retry ${attempt + 1}: ${err.message}`, { task_id: h.a.taskId });
      }
    }
    this.log("warning", `task ${h.a.taskId}: could not commit its outcome; its lease will expire`, { task_id: h.a.taskId });
    return undefined;
  }

  // -- drain -----------------------------------------------------------------------

  /** Drain: stop taking work at once, tell running handlers (their signal fires with
   * reason "drain"), give them `graceS` to finish or to checkpoint and throw, then
   * release what is left with its last checkpoint and close the streams. Safe to
   * call twice; a shorter grace moves the deadline forward. */
  shutdown(graceS = 30): Promise<DrainReport> {
    const deadline = Date.now() + graceS * 1000;
    if (deadline < this.drainDeadline) {
      this.drainDeadline = deadline;
      for (const h of this.held.values()) h.drainDeadline = new Date(deadline);
      this.deadlineMoved?.();
    }
    if (!this.shutdownPromise) this.shutdownPromise = this.drain();
    return this.shutdownPromise;
  }

  private async drain(): Promise<DrainReport> {
    this.stopping = true;
    if (!this.started) return this.report;
    const members = [...this.members.values()];
    for (const m of members) m.send({ kind: { case: "drain", value: {} } });
    for (const h of this.held.values()) {
      h.drainDeadline ??= new Date(this.drainDeadline);
      h.cancel("drain");
    }
    this.log("info", `worker ${this.workerId} draining: ${this.held.size} task(s) running, ${Math.max(0, (this.drainDeadline - Date.now()) / 1000).toFixed(1)} s grace`);
    for (;;) {
      const running = [...this.held.values()].filter((h) => h.acked && !h.committing);
      const left = this.drainDeadline - Date.now();
      if (!running.length || left <= 0) break;
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        Promise.race(running.map((h) => h.done)),
        new Promise<void>((r) => {
          timer = setTimeout(r, left);
          this.deadlineMoved = r;
        }),
      ]);
      clearTimeout(timer);
    }
    const leftovers = [...this.held.values()].filter((h) => !h.committing && !h.released);
    if (leftovers.length) {
      this.log("warning", `worker ${this.workerId}: grace over, releasing ${leftovers.length} task(s) still running`);
      await Promise.all(
        leftovers.map(async (h) => {
          h.released = true;
          h.cancel("drain");
          try {
            const r = (await h.member.request({ kind: { case: "release", value: { task: h.ref, checkpointJson: jsonBytes(h.checkpointData) } } }, 5000))[0];
            if (r && !r.ok) this.report.rejected += 1;
            else this.report.releasedAtDeadline += 1;
          } catch (err) {
            this.log("warning", `task ${h.a.taskId}: release failed: ${(err as Error).message}`);
            this.report.uncommitted += 1;
          }
          this.drop(h);
        }),
      );
    }
    // Outcome commits still in flight get their (short) chance.
    const pending = [...this.held.values()].map((h) => h.done);
    if (pending.length) await Promise.race([Promise.allSettled(pending), sleep(this.requestTimeoutS * 1000)]);
    for (const m of this.members.values()) m.finish();
    this.wake?.();
    this.log("info", `worker ${this.workerId} drained: ${JSON.stringify(this.report)}`);
    return this.report;
  }

  /** Drop every stream at once, without a drain (tests: a worker that dies). */
  kill(): void {
    this.stopping = true;
    for (const m of this.members.values()) m.kill();
    this.wake?.();
  }
}

