// JSON objects on the wire as UTF-8 bytes (`payload_json`, `result_json`, ...): the
// cheaper form for both sides (see "JSON as bytes" in proto/tickwheel/v1/tickwheel.proto).
import type { JsonObject } from "@bufbuild/protobuf";

export type { JsonObject };
const encoder = new TextEncoder();
const decoder = new TextDecoder();
const EMPTY = new Uint8Array(0);

/** A JSON object as bytes; undefined/null as empty bytes (unset). */
export function jsonBytes(value: unknown): Uint8Array {
  if (value === undefined || value === null) return EMPTY;
  return encoder.encode(JSON.stringify(value));
}

/** Bytes (preferred) or a Struct as a plain object; undefined when both are unset. */
export function fromJsonBytes(bytes: Uint8Array | undefined, struct?: JsonObject): JsonObject | undefined {
  if (bytes && bytes.length > 0) return JSON.parse(decoder.decode(bytes)) as JsonObject;
  return struct;
}
