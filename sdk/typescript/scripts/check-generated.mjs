// Drift check: regenerate src/gen/ into a temporary directory and fail when it differs
// from the committed files (as `make proto-check` does for the Python modules).
import { execFileSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("..", import.meta.url));
const committed = join(root, "src", "gen");
const tmp = mkdtempSync(join(tmpdir(), "tickwheel-gen-"));

function files(dir) {
  const out = [];
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) out.push(...files(path));
    else out.push(path);
  }
  return out;
}

try {
  const buf = join(root, "node_modules", ".bin", "buf");
  const bin = join(root, "node_modules", ".bin");
  const env = { ...process.env, PATH: `${bin}:${process.env.PATH ?? ""}` };
  execFileSync(buf, ["generate", "--output", tmp], { cwd: root, stdio: "inherit", env });
  const fresh = join(tmp, "src", "gen");
  const want = new Map(files(fresh).map((p) => [relative(fresh, p), readFileSync(p, "utf8")]));
  const have = new Map(files(committed).map((p) => [relative(committed, p), readFileSync(p, "utf8")]));
  const stale = [];
  for (const [rel, text] of want) if (have.get(rel) !== text) stale.push(rel);
  for (const rel of have.keys()) if (!want.has(rel)) stale.push(`${rel} (no longer generated)`);
  if (stale.length) {
    console.error(`src/gen is stale (run \`npm run generate\`): ${stale.join(", ")}`);
    process.exit(1);
  }
  console.log(`src/gen is current (${want.size} files)`);
} finally {
  rmSync(tmp, { recursive: true, force: true });
}
