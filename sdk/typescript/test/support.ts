// Starts a real `tickwheel dev` (SQLite, no other service) for the tests, on a free port.
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync, existsSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const here = fileURLToPath(new URL(".", import.meta.url));
/** The repository root (this file runs from sdk/typescript/dist/test/). */
export const REPO = resolve(here, "..", "..", "..", "..");

export function tickwheelBin(): string {
  const fromEnv = process.env.TICKWHEEL_BIN;
  if (fromEnv) return fromEnv;
  const venv = join(REPO, ".venv", "bin", "tickwheel");
  if (existsSync(venv)) return venv;
  return "tickwheel";
}

export function pythonBin(): string {
  return process.env.TICKWHEEL_PYTHON ?? join(REPO, ".venv", "bin", "python");
}

export async function freePort(): Promise<number> {
  return new Promise((res, rej) => {
    const s = createServer();
    s.listen(0, "127.0.0.1", () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => res(port));
    });
    s.on("error", rej);
  });
}

export interface DevServer {
  target: string;
  apiKey: string;
  adminToken: string;
  tenantId: string;
  port: number;
  proc: ChildProcess;
  log: () => string;
  stop: () => Promise<void>;
  /** Kill and start again on the same database and port (a node restart). */
  restart: () => Promise<void>;
}

/** `tickwheel dev --json` on a fresh SQLite file; resolves once it printed its facts. */
export async function startDev(extra: string[] = []): Promise<DevServer> {
  const dir = mkdtempSync(join(tmpdir(), "tickwheel-ts-"));
  const port = await freePort();
  let output = "";
  const server: Partial<DevServer> = { port, target: `127.0.0.1:${port}` };
  const launch = () =>
    new Promise<void>((res, rej) => {
      const proc = spawn(
        tickwheelBin(),
        ["dev", "--json", "--db", join(dir, "dev.db"), "--listen", `127.0.0.1:${port}`, "--no-ui", "--no-metrics", ...extra],
        { stdio: ["ignore", "pipe", "pipe"] },
      );
      server.proc = proc;
      let stdout = "";
      const timer = setTimeout(() => rej(new Error(`tickwheel dev did not start:\n${output}`)), 60_000);
      proc.stdout!.on("data", (d: Buffer) => {
        stdout += d.toString();
        output += d.toString();
        const line = stdout.split("\n").find((l) => l.startsWith("{"));
        if (line && stdout.includes("\n", stdout.indexOf(line))) {
          const facts = JSON.parse(line) as { target: string; api_key: string; admin_token: string; tenant_id: string };
          Object.assign(server, { apiKey: facts.api_key, adminToken: facts.admin_token, tenantId: facts.tenant_id });
          clearTimeout(timer);
          res();
        }
      });
      proc.stderr!.on("data", (d: Buffer) => (output += d.toString()));
      proc.on("exit", (code) => {
        clearTimeout(timer);
        rej(new Error(`tickwheel dev exited ${code}:\n${output}`));
      });
    });
  const stopProc = async () => {
    const proc = server.proc!;
    if (proc.exitCode !== null || proc.signalCode !== null) return;
    await new Promise<void>((res) => {
      proc.once("exit", () => res());
      proc.kill("SIGTERM");
      setTimeout(() => proc.kill("SIGKILL"), 10_000).unref();
    });
  };
  await launch();
  server.log = () => output;
  server.stop = async () => {
    await stopProc();
    rmSync(dir, { recursive: true, force: true });
  };
  server.restart = async () => {
    const proc = server.proc!;
    await new Promise<void>((res) => {
      proc.once("exit", () => res());
      proc.kill("SIGKILL");
    });
    await launch();
  };
  return server as DevServer;
}

/** Poll `check` until it returns a truthy value (no timed assertion: the test's own
 * timeout bounds it). */
export async function eventually<T>(check: () => Promise<T> | T, what: string, timeoutMs = 60_000): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await check();
      if (v) return v as NonNullable<T>;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) throw new Error(`never happened: ${what}${last ? ` (last error: ${String(last)})` : ""}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
