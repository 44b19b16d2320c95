// Regions (docs/regions.md): an API key names its home region in a visible prefix,
// `tw_<region>.<token>`; with a directory the SDK calls that region's endpoints
// directly instead of being forwarded there.

const REGION_NAME = /^[a-z][a-z0-9-]{0,31}$/;

/** The home region an API key names, read without verifying it (undefined for keys
 * that name none: `tw_<token>` made before regions, or text that is no key). */
export function keyRegion(apiKey: string): string | undefined {
  if (!apiKey.startsWith("tw_")) return undefined;
  const rest = apiKey.slice(3);
  const dot = rest.indexOf(".");
  if (dot < 0) return undefined;
  const region = rest.slice(0, dot);
  return REGION_NAME.test(region) ? region : undefined;
}

/** Region name -> its `host:port` endpoints in the order to try them (the JSON form of
 * `--regions-file` is `{"regions": {NAME: {"endpoints": [...]}}}`). */
export type RegionDirectory = Record<string, string[]>;

/** Parse `NAME=HOST:PORT|HOST:PORT,NAME=...` (the `--regions` flag's form) or the
 * JSON form of a regions file. */
export function parseRegions(text: string): RegionDirectory {
  const trimmed = text.trim();
  if (trimmed.startsWith("{")) {
    const doc = JSON.parse(trimmed) as { regions?: Record<string, { endpoints?: string[] }> };
    const out: RegionDirectory = {};
    for (const [name, region] of Object.entries(doc.regions ?? {})) out[name] = [...(region.endpoints ?? [])];
    return out;
  }
  const out: RegionDirectory = {};
  for (const part of trimmed.split(",").filter(Boolean)) {
    const [name, endpoints] = part.split("=", 2);
    if (!name || !endpoints) throw new Error(`regions: ${JSON.stringify(part)} is not NAME=HOST:PORT|...`);
    out[name.trim()] = endpoints.split("|").map((e) => e.trim()).filter(Boolean);
  }
  return out;
}

/** Where to connect: the endpoints of the region the key names when the directory
 * lists it, else the target. */
export function regionTargets(target: string | undefined, apiKey: string | undefined, regions?: RegionDirectory): string[] {
  const region = apiKey ? keyRegion(apiKey) : undefined;
  if (regions && region && regions[region]?.length) return [...regions[region]];
  if (!target) {
    throw new Error(`a target is needed: the API key names ${region ? `region '${region}', not in the directory` : "no region"}`);
  }
  return [target];
}
