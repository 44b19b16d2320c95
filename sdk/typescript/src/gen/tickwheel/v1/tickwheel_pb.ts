// Tickwheel public API, version 1.
//
// Three services: SchedulerService (clients submit and manage tasks, DAG workflows,
// cron/interval schedules and dead man's switch expectations), WorkerService
// (workers receive tasks over one bidirectional stream and commit results with a
// fencing token), AdminService (tenants and API keys).
//
// Authentication: every call carries an API key in the `x-api-key` metadata entry
// (AdminService calls carry the admin token in `x-admin-token`). Errors come back as
// gRPC status codes: INVALID_ARGUMENT (the message names the field), NOT_FOUND,
// FAILED_PRECONDITION (stale fencing token or illegal transition, with the reason),
// UNAUTHENTICATED, PERMISSION_DENIED, RESOURCE_EXHAUSTED (quotas and sizes).
//
// Error details: every error also carries the standard `google.rpc.Status` in the
// `grpc-status-details-bin` trailer (any gRPC library reads it; docs/clients.md shows
// how in JavaScript, Go and Java). Its details hold a `google.rpc.ErrorInfo` with
// `domain` "tickwheel.dev", `reason` the Tickwheel error type (INVALID_ARGUMENT,
// NOT_FOUND, ALREADY_EXISTS, INVALID_TRANSITION, STALE_FENCING_TOKEN, UNAUTHENTICATED,
// PERMISSION_DENIED, RESOURCE_EXHAUSTED, STORE_ERROR, UNAVAILABLE, WRONG_REGION,
// UNKNOWN_REGION, TENANT_MOVING) and `metadata` the
// error's fields as strings (`field` and `problem`; `task_id`, `token`, `reason`;
// `limit` and `detail`; ...); an invalid argument adds a `google.rpc.BadRequest` with
// one field violation (the field's path, e.g. `tasks[3].payload`), an exhausted limit a
// `google.rpc.QuotaFailure` whose subject names the limit.
//
// Regions (docs/regions.md): a deployment may run several regions, each a whole stack
// with its own database; every tenant lives in one home region (`Tenant.home_region`)
// and only there are its rows written and its tasks run. Any region accepts any call
// and gets it home, without a global look-up:
// - An API key names its home region in a visible prefix: `tw_<region>.<token>`
//   (region: lower-case letters, digits and `-`, starting with a letter, at most 32
//   characters; the token is URL-safe base64 and has no `.`). Keys made before regions
//   look like `tw_<token>`, keys of a node without a region `tw_local.<token>`: both
//   belong to the region that holds them. A key of the region it reaches (or such a
//   key) goes to its tenant's home region.
// - With the admin token (no API key) the call is for the region named in the
//   `x-tickwheel-region` metadata entry (default: the region it reaches); CreateTenant
//   goes to its `tenant.home_region` when set.
// - A unary call whose home is another region is forwarded there by the node it
//   reached: the same request bytes and metadata, the caller's remaining deadline,
//   plus `x-tickwheel-forwarded-from: <region>`; the caller gets the home region's
//   answer unchanged (response, or status code, message, `grpc-status-details-bin`
//   and trailing metadata). A call that was forwarded already and would be forwarded
//   again answers FAILED_PRECONDITION "x-tickwheel-forwarded-from: ..." naming the
//   regions (they disagree about its home; no call loops). When no endpoint of the
//   home region answers: UNAVAILABLE naming the region.
// - A worker stream (WorkerService.Connect) is not forwarded: in the wrong region it
//   ends at once with FAILED_PRECONDITION and an ErrorInfo with `reason`
//   "WRONG_REGION", `domain` "tickwheel.dev" and `metadata` {"region": the home
//   region, "endpoints": its `host:port` endpoints joined by `,`, in the order to try
//   them}. A worker in any language reconnects to those endpoints (the first that
//   answers; on UNAVAILABLE the next) with the same key and hello.
// - A key, `x-tickwheel-region` or `tenant.home_region` naming a region the directory
//   does not list answers INVALID_ARGUMENT ("x-api-key: unknown region 'xx' (known:
//   eu, us)") with ErrorInfo `reason` "UNKNOWN_REGION" and `metadata` `field`,
//   `region` and `known`.
// - While a tenant's home moves to another region (`tickwheel tenants move`, well
//   under 2 s), its calls answer UNAVAILABLE with ErrorInfo `reason` "TENANT_MOVING"
//   and `metadata` {"tenant_id", "detail"}: nothing was done, so any call may be made
//   again as it was (the Python client does, every 0.2 s at most); its worker streams
//   end with the same status and reconnect (a worker is then sent to the new home by
//   WRONG_REGION, and finishes the tasks it was running there with the same token).
//   The tenant's keys keep their prefix: the old home forwards their calls.
// A client can skip the hop: read the region from its key's prefix and call that
// region's endpoints from the directory (the Python SDKs do, given one).
//
// Input rules that hold for every request:
// - A request that is not a valid encoding of its message (bad wire format, invalid
//   UTF-8 in a string) answers INVALID_ARGUMENT "request: is not a valid
//   tickwheel.v1.X message"; on the worker stream it ends the stream the same way.
// - Every Timestamp must lie in 1970-01-01T00:00:01Z .. 9999-12-30T23:59:59Z (nanos
//   0..999999999): the epoch itself is refused, because a zero Timestamp is what a
//   client sends by mistake (a JavaScript `Date` given where a Timestamp belongs
//   arrives as epoch 0). An unset Timestamp field is not a zero one: leave it unset.
// - Every id (task, workflow, schedule, tenant) is a UUID in its canonical
//   8-4-4-4-12 hex form (either case); braces, `urn:uuid:` and bare digits are refused.
// - A Struct (payload, result, checkpoint) may nest objects and lists at most 32 levels
//   (the outermost object is level 1); deeper is INVALID_ARGUMENT naming the field,
//   also when it is too deep for the protobuf decoder to read at all. NaN and the
//   infinities are refused (JSON cannot hold them).
// - JSON as bytes. Every JSON object a task carries (payload, result, checkpoint) has
//   two fields: a `google.protobuf.Struct` (e.g. `payload`) and a `bytes` twin holding
//   the object as UTF-8 JSON text (e.g. `payload_json`, `{"n": 1}`). Set at most one
//   of the two in a request: both set (a Struct with at least one field and non-empty
//   bytes) answers INVALID_ARGUMENT naming the `_json` field. The bytes are stored as
//   they are (PostgreSQL JSONB), without a conversion on the server, so they are the
//   cheaper form for both sides: serialise with your JSON library (numbers keep their
//   precision, where a Struct holds every number as a double). They must be one JSON
//   object (not an array or scalar) in valid UTF-8 (RFC 8259: no NaN, no comments, no
//   trailing commas), nested at most 32 levels, without a `\u0000` escape (PostgreSQL
//   cannot store it), and within the field's size limit counted in bytes; otherwise
//   INVALID_ARGUMENT names the field (`tasks[3].payload_json`) and nothing is written.
//   Empty bytes mean unset. Answers carry a JSON value in ONE of its two fields: the
//   Struct by default; the `_json` bytes on a worker stream whose Hello set
//   `json_bytes`, and in the responses of a unary call that carries the metadata entry
//   `x-tickwheel-json: bytes` (e.g. GetTask's Task.payload_json; an absent value is
//   both fields unset). The bytes a reader gets are the stored JSONB's text: the same
//   object, but key order, duplicate keys (the last one wins) and spacing may differ
//   from what was sent. Kafka records always carry the Struct form.
// - A message larger than the server's maximum receive size (64 MiB by default; the
//   server sets it explicitly) is refused by gRPC with RESOURCE_EXHAUSTED.
//
// Field numbers are never reused.

// @generated by protoc-gen-es v2.13.0 with parameter "target=ts,import_extension=js"
// @generated from file tickwheel/v1/tickwheel.proto (package tickwheel.v1, syntax proto3)
/* eslint-disable */

import type { GenEnum, GenFile, GenMessage, GenService } from "@bufbuild/protobuf/codegenv2";
import { enumDesc, fileDesc, messageDesc, serviceDesc } from "@bufbuild/protobuf/codegenv2";
import type { Timestamp } from "@bufbuild/protobuf/wkt";
import { file_google_protobuf_struct, file_google_protobuf_timestamp } from "@bufbuild/protobuf/wkt";
import type { JsonObject, Message } from "@bufbuild/protobuf";

/**
 * Describes the file tickwheel/v1/tickwheel.proto.
 */
export const file_tickwheel_v1_tickwheel: GenFile = /*@__PURE__*/
  fileDesc("Chx0aWNrd2hlZWwvdjEvdGlja3doZWVsLnByb3RvEgx0aWNrd2hlZWwudjEiNwoMVHJhY2VDb250ZXh0EhMKC3RyYWNlcGFyZW50GAEgASgJEhIKCnRyYWNlc3RhdGUYAiABKAkixAMKCFRhc2tTcGVjEgwKBHR5cGUYASABKAkSKAoHcGF5bG9hZBgCIAEoCzIXLmdvb2dsZS5wcm90b2J1Zi5TdHJ1Y3QSMAoMc2NoZWR1bGVkX2F0GAMgASgLMhouZ29vZ2xlLnByb3RvYnVmLlRpbWVzdGFtcBIXCg9pZGVtcG90ZW5jeV9rZXkYBCABKAkSIAoEcG9vbBgFIAEoDjISLnRpY2t3aGVlbC52MS5Qb29sEhUKDXN0cmljdF90aW1pbmcYBiABKAgSLQoLaml0dGVyX21vZGUYByABKA4yGC50aWNrd2hlZWwudjEuSml0dGVyTW9kZRITCgttYXhfcmV0cmllcxgIIAEoDRISCgpub19yZXRyaWVzGAkgASgIEhEKCXRpbWVvdXRfcxgKIAEoARIxCg10cmFjZV9jb250ZXh0GAsgASgLMhoudGlja3doZWVsLnYxLlRyYWNlQ29udGV4dBIvCgxyZXRyeV9wb2xpY3kYDCABKAsyGS50aWNrd2hlZWwudjEuUmV0cnlQb2xpY3kSFAoMcGF5bG9hZF9qc29uGA0gASgMEhcKD2NvbmN1cnJlbmN5X2tleRgUIAEoCSJ4CgtSZXRyeVBvbGljeRIZChFpbml0aWFsX2JhY2tvZmZfcxgBIAEoARIVCg1tYXhfYmFja29mZl9zGAIgASgBEhQKDG1heF9hdHRlbXB0cxgDIAEoDRIhChlub25fcmV0cnlhYmxlX2Vycm9yX3R5cGVzGAQgAygJIpsHCgRUYXNrEgoKAmlkGAEgASgJEhEKCXRlbmFudF9pZBgCIAEoCRIMCgR0eXBlGAMgASgJEiYKBXN0YXRlGAQgASgOMhcudGlja3doZWVsLnYxLlRhc2tTdGF0ZRIwCgxzY2hlZHVsZWRfYXQYBSABKAsyGi5nb29nbGUucHJvdG9idWYuVGltZXN0YW1wEioKBmR1ZV9hdBgGIAEoCzIaLmdvb2dsZS5wcm90b2J1Zi5UaW1lc3RhbXASFwoPaWRlbXBvdGVuY3lfa2V5GAcgASgJEiAKBHBvb2wYCCABKA4yEi50aWNrd2hlZWwudjEuUG9vbBIVCg1mZW5jaW5nX3Rva2VuGAkgASgDEhMKC3JldHJ5X2NvdW50GAogASgNEhMKC21heF9yZXRyaWVzGAsgASgNEigKB3BheWxvYWQYDCABKAsyFy5nb29nbGUucHJvdG9idWYuU3RydWN0EicKBnJlc3VsdBgNIAEoCzIXLmdvb2dsZS5wcm90b2J1Zi5TdHJ1Y3QSEgoKbGFzdF9lcnJvchgOIAEoCRIrCgpjaGVja3BvaW50GA8gASgLMhcuZ29vZ2xlLnByb3RvYnVmLlN0cnVjdBIRCgl3b3JrZXJfaWQYECABKAkSGAoQY2FuY2VsX3JlcXVlc3RlZBgRIAEoCBIQCghzaGFyZF9pZBgSIAEoDRIuCgpjcmVhdGVkX2F0GBMgASgLMhouZ29vZ2xlLnByb3RvYnVmLlRpbWVzdGFtcBIuCgp1cGRhdGVkX2F0GBQgASgLMhouZ29vZ2xlLnByb3RvYnVmLlRpbWVzdGFtcBIVCg1zdHJpY3RfdGltaW5nGBUgASgIEjEKDXRyYWNlX2NvbnRleHQYFiABKAsyGi50aWNrd2hlZWwudjEuVHJhY2VDb250ZXh0Ei8KDHJldHJ5X3BvbGljeRgXIAEoCzIZLnRpY2t3aGVlbC52MS5SZXRyeVBvbGljeRIUCgxwYXlsb2FkX2pzb24YGCABKAwSEwoLcmVzdWx0X2pzb24YGSABKAwSFwoPY2hlY2twb2ludF9qc29uGBogASgMEhcKD2xhc3RfZXJyb3JfdHlwZRgbIAEoCRIWCg5sYXN0X3RyYWNlYmFjaxgcIAEoCRITCgt3b3JrZmxvd19pZBgdIAEoCRITCgtzY2hlZHVsZV9pZBgeIAEoCRIXCg9jb25jdXJyZW5jeV9rZXkYPCABKAkiOQoRU3VibWl0VGFza1JlcXVlc3QSJAoEdGFzaxgBIAEoCzIWLnRpY2t3aGVlbC52MS5UYXNrU3BlYyJHChJTdWJtaXRUYXNrUmVzcG9uc2USIAoEdGFzaxgBIAEoCzISLnRpY2t3aGVlbC52MS5UYXNrEg8KB2NyZWF0ZWQYAiABKAgiOwoSU3VibWl0VGFza3NSZXF1ZXN0EiUKBXRhc2tzGAEgAygLMhYudGlja3doZWVsLnYxLlRhc2tTcGVjIkgKE1N1Ym1pdFRhc2tzUmVzcG9uc2USMQoHcmVzdWx0cxgBIAMoCzIgLnRpY2t3aGVlbC52MS5TdWJtaXRUYXNrUmVzcG9uc2UiIQoOR2V0VGFza1JlcXVlc3QSDwoHdGFza19pZBgBIAEoCSIzCg9HZXRUYXNrUmVzcG9uc2USIAoEdGFzaxgBIAEoCzISLnRpY2t3aGVlbC52MS5UYXNrIiQKEUNhbmNlbFRhc2tSZXF1ZXN0Eg8KB3Rhc2tfaWQYASABKAkiNgoSQ2FuY2VsVGFza1Jlc3BvbnNlEiAKBHRhc2sYASABKAsyEi50aWNrd2hlZWwudjEuVGFzayK6AgoQTGlzdFRhc2tzUmVxdWVzdBInCgZzdGF0ZXMYASADKA4yFy50aWNrd2hlZWwudjEuVGFza1N0YXRlEgwKBHR5cGUYAiABKAkSMgoOc2NoZWR1bGVkX2Zyb20YAyABKAsyGi5nb29nbGUucHJvdG9idWYuVGltZXN0YW1wEjAKDHNjaGVkdWxlZF90bxgEIAEoCzIaLmdvb2dsZS5wcm90b2J1Zi5UaW1lc3RhbXASEQoJcGFnZV9zaXplGAUgASgNEhIKCnBhZ2VfdG9rZW4YBiABKAkSJgoFb3JkZXIYByABKA4yFy50aWNrd2hlZWwudjEuVGFza09yZGVyEiEKBXBvb2xzGAggAygOMhIudGlja3doZWVsLnYxLlBvb2wSFwoPaWRlbXBvdGVuY3lfa2V5GAkgASgJIk8KEUxpc3RUYXNrc1Jlc3BvbnNlEiEKBXRhc2tzGAEgAygLMhIudGlja3doZWVsLnYxLlRhc2sSFwoPbmV4dF9wYWdlX3Rva2VuGAIgASgJIlcKElJlZHJpdmVUYXNrUmVxdWVzdBIPCgd0YXNrX2lkGAEgASgJEjAKDHNjaGVkdWxlZF9hdBgCIAEoCzIaLmdvb2dsZS5wcm90b2J1Zi5UaW1lc3RhbXAiNwoTUmVkcml2ZVRhc2tSZXNwb25zZRIgCgR0YXNrGAEgASgLMhIudGlja3doZWVsLnYxLlRhc2siNQoPV2FpdFRhc2tSZXF1ZXN0Eg8KB3Rhc2tfaWQYASABKAkSEQoJdGltZW91dF9zGAIgASgBIkIKEFdhaXRUYXNrUmVzcG9uc2USIAoEdGFzaxgBIAEoCzISLnRpY2t3aGVlbC52MS5UYXNrEgwKBGRvbmUYAiABKAgiRAoQV29ya2Zsb3dOb2RlU3BlYxIKCgJpZBgBIAEoCRIkCgR0YXNrGAIgASgLMhYudGlja3doZWVsLnYxLlRhc2tTcGVjIi0KDFdvcmtmbG93RWRnZRIOCgZwYXJlbnQYASABKAkSDQoFY2hpbGQYAiABKAkizwEKCFdvcmtmbG93EgoKAmlkGAEgASgJEhEKCXRlbmFudF9pZBgCIAEoCRIMCgRuYW1lGAMgASgJEhcKD2lkZW1wb3RlbmN5X2tleRgEIAEoCRI5ChNvbl91cHN0cmVhbV9mYWlsdXJlGAUgASgOMhwudGlja3doZWVsLnYxLlVwc3RyZWFtUG9saWN5EhIKCm5vZGVfY291bnQYBiABKA0SLgoKY3JlYXRlZF9hdBgHIAEoCzIaLmdvb2dsZS5wcm90b2J1Zi5UaW1lc3RhbXAiPAoMV29ya2Zsb3dOb2RlEgoKAmlkGAEgASgJEiAKBHRhc2sYAiABKAsyEi50aWNrd2hlZWwudjEuVGFzayLTAQoVU3VibWl0V29ya2Zsb3dSZXF1ZXN0EgwKBG5hbWUYASABKAkSLQoFbm9kZXMYAiADKAsyHi50aWNrd2hlZWwudjEuV29ya2Zsb3dOb2RlU3BlYxIpCgVlZGdlcxgDIAMoCzIaLnRpY2t3aGVlbC52MS5Xb3JrZmxvd0VkZ2USFwoPaWRlbXBvdGVuY3lfa2V5GAQgASgJEjkKE29uX3Vwc3RyZWFtX2ZhaWx1cmUYBSABKA4yHC50aWNrd2hlZWwudjEuVXBzdHJlYW1Qb2xpY3kifgoWU3VibWl0V29ya2Zsb3dSZXNwb25zZRIoCgh3b3JrZmxvdxgBIAEoCzIWLnRpY2t3aGVlbC52MS5Xb3JrZmxvdxIPCgdjcmVhdGVkGAIgASgIEikKBW5vZGVzGAMgAygLMhoudGlja3doZWVsLnYxLldvcmtmbG93Tm9kZSIpChJHZXRXb3JrZmxvd1JlcXVlc3QSEwoLd29ya2Zsb3dfaWQYASABKAkilQEKE0dldFdvcmtmbG93UmVzcG9uc2USKAoId29ya2Zsb3cYASABKAsyFi50aWNrd2hlZWwudjEuV29ya2Zsb3cSKQoFbm9kZXMYAiADKAsyGi50aWNrd2hlZWwudjEuV29ya2Zsb3dOb2RlEikKBWVkZ2VzGAMgAygLMhoudGlja3doZWVsLnYxLldvcmtmbG93RWRnZSKIAwoMU2NoZWR1bGVTcGVjEgwKBG5hbWUYASABKAkSEQoJdGFza190eXBlGAIgASgJEigKB3BheWxvYWQYAyABKAsyFy5nb29nbGUucHJvdG9idWYuU3RydWN0EgwKBGNyb24YBCABKAkSEgoKaW50ZXJ2YWxfcxgFIAEoARIQCgh0aW1lem9uZRgGIAEoCRIgCgRwb29sGAcgASgOMhIudGlja3doZWVsLnYxLlBvb2wSEwoLbWF4X3JldHJpZXMYCCABKA0SEgoKbm9fcmV0cmllcxgJIAEoCBIRCgl0aW1lb3V0X3MYCiABKAESMwoOb3ZlcmxhcF9wb2xpY3kYCyABKA4yGy50aWNrd2hlZWwudjEuT3ZlcmxhcFBvbGljeRIdChBjYXRjaHVwX3dpbmRvd19zGAwgASgBSACIAQESFQoIaml0dGVyX3MYDSABKAFIAYgBARIOCgZwYXVzZWQYDiABKAhCEwoRX2NhdGNodXBfd2luZG93X3NCCwoJX2ppdHRlcl9zIo8FCghTY2hlZHVsZRIKCgJpZBgBIAEoCRIRCgl0ZW5hbnRfaWQYAiABKAkSDAoEbmFtZRgDIAEoCRIMCgRjcm9uGAQgASgJEhIKCmludGVydmFsX3MYBSABKAESEAoIdGltZXpvbmUYBiABKAkSEQoJdGFza190eXBlGAcgASgJEigKB3BheWxvYWQYCCABKAsyFy5nb29nbGUucHJvdG9idWYuU3RydWN0EiAKBHBvb2wYCSABKA4yEi50aWNrd2hlZWwudjEuUG9vbBITCgttYXhfcmV0cmllcxgKIAEoDRIRCgl0aW1lb3V0X3MYCyABKAESMwoOb3ZlcmxhcF9wb2xpY3kYDCABKA4yGy50aWNrd2hlZWwudjEuT3ZlcmxhcFBvbGljeRIYChBjYXRjaHVwX3dpbmRvd19zGA0gASgBEhAKCGppdHRlcl9zGA4gASgBEg4KBnBhdXNlZBgPIAEoCBIwCgxuZXh0X2ZpcmVfYXQYECABKAsyGi5nb29nbGUucHJvdG9idWYuVGltZXN0YW1wEjEKDWxhc3RfZmlyZWRfYXQYESABKAsyGi5nb29nbGUucHJvdG9idWYuVGltZXN0YW1wEi8KC2J1ZmZlcmVkX2F0GBIgASgLMhouZ29vZ2xlLnByb3RvYnVmLlRpbWVzdGFtcBIuCgpjcmVhdGVkX2F0GBMgASgLMhouZ29vZ2xlLnByb3RvYnVmLlRpbWVzdGFtcBIuCgp1cGRhdGVkX2F0GBQgASgLMhouZ29vZ2xlLnByb3RvYnVmLlRpbWVzdGFtcBI0ChB1cGNvbWluZ19maXJlX2F0GBUgAygLMhouZ29vZ2xlLnByb3RvYnVmLlRpbWVzdGFtcCJFChVDcmVhdGVTY2hlZHVsZVJlcXVlc3QSLAoIc2NoZWR1bGUYASABKAsyGi50aWNrd2hlZWwudjEuU2NoZWR1bGVTcGVjIkIKFkNyZWF0ZVNjaGVkdWxlUmVzcG9uc2USKAoIc2NoZWR1bGUYASABKAsyFi50aWNrd2hlZWwudjEuU2NoZWR1bGUiKQoSR2V0U2NoZWR1bGVSZXF1ZXN0EhMKC3NjaGVkdWxlX2lkGAEgASgJIj8KE0dldFNjaGVkdWxlUmVzcG9uc2USKAoIc2NoZWR1bGUYASABKAsyFi50aWNrd2hlZWwudjEuU2NoZWR1bGUiFgoUTGlzdFNjaGVkdWxlc1JlcXVlc3QiQgoVTGlzdFNjaGVkdWxlc1Jlc3BvbnNlEikKCXNjaGVkdWxlcxgBIAMoCzIWLnRpY2t3aGVlbC52MS5TY2hlZHVsZSIrChRQYXVzZVNjaGVkdWxlUmVxdWVzdBITCgtzY2hlZHVsZV9pZBgBIAEoCSJBChVQYXVzZVNjaGVkdWxlUmVzcG9uc2USKAoIc2NoZWR1bGUYASABKAsyFi50aWNrd2hlZWwudjEuU2NoZWR1bGUiLAoVUmVzdW1lU2NoZWR1bGVSZXF1ZXN0EhMKC3NjaGVkdWxlX2lkGAEgASgJIkIKFlJlc3VtZVNjaGVkdWxlUmVzcG9uc2USKAoIc2NoZWR1bGUYASABKAsyFi50aWNrd2hlZWwudjEuU2NoZWR1bGUiLAoVRGVsZXRlU2NoZWR1bGVSZXF1ZXN0EhMKC3NjaGVkdWxlX2lkGAEgASgJIhgKFkRlbGV0ZVNjaGVkdWxlUmVzcG9uc2Ui2gIKC0V4cGVjdGF0aW9uEgoKAmlkGAEgASgJEhEKCXRlbmFudF9pZBgCIAEoCRIOCgZqb2JfaWQYAyABKAkSEwoLc2NoZWR1bGVfaWQYBCABKAkSEgoKaW50ZXJ2YWxfcxgFIAEoDRITCgt0b2xlcmFuY2VfcxgGIAEoDRIVCg1tYXhfcnVudGltZV9zGAcgASgNEi4KCmNyZWF0ZWRfYXQYCCABKAsyGi5nb29nbGUucHJvdG9idWYuVGltZXN0YW1wEi8KBnN0YXR1cxgJIAEoDjIfLnRpY2t3aGVlbC52MS5FeHBlY3RhdGlvblN0YXR1cxI1ChFsYXN0X2NvbXBsZXRlZF9hdBgKIAEoCzIaLmdvb2dsZS5wcm90b2J1Zi5UaW1lc3RhbXASLwoLZGVhZGxpbmVfYXQYCyABKAsyGi5nb29nbGUucHJvdG9idWYuVGltZXN0YW1wIoEBChpSZWdpc3RlckV4cGVjdGF0aW9uUmVxdWVzdBIOCgZqb2JfaWQYASABKAkSEwoLc2NoZWR1bGVfaWQYAiABKAkSEgoKaW50ZXJ2YWxfcxgDIAEoDRITCgt0b2xlcmFuY2VfcxgEIAEoDRIVCg1tYXhfcnVudGltZV9zGAUgASgNIk0KG1JlZ2lzdGVyRXhwZWN0YXRpb25SZXNwb25zZRIuCgtleHBlY3RhdGlvbhgBIAEoCzIZLnRpY2t3aGVlbC52MS5FeHBlY3RhdGlvbiIZChdMaXN0RXhwZWN0YXRpb25zUmVxdWVzdCJLChhMaXN0RXhwZWN0YXRpb25zUmVzcG9uc2USLwoMZXhwZWN0YXRpb25zGAEgAygLMhkudGlja3doZWVsLnYxLkV4cGVjdGF0aW9uIioKBk1lbWJlchIPCgdub2RlX2lkGAEgASgJEg8KB2FkZHJlc3MYAiABKAkiVgoKTWVtYmVyTGlzdBIlCgdtZW1iZXJzGAEgAygLMhQudGlja3doZWVsLnYxLk1lbWJlchIQCghyZXZpc2lvbhgCIAEoBBIPCgdub2RlX2lkGAMgASgJIhAKDk1lbWJlcnNSZXF1ZXN0IjwKD01lbWJlcnNSZXNwb25zZRIpCgdtZW1iZXJzGAEgASgLMhgudGlja3doZWVsLnYxLk1lbWJlckxpc3QiYwoHVGFza1JlZhIPCgd0YXNrX2lkGAEgASgJEhUKDWZlbmNpbmdfdG9rZW4YAiABKAMSMAoMc2NoZWR1bGVkX2F0GAMgASgLMhouZ29vZ2xlLnByb3RvYnVmLlRpbWVzdGFtcCKgAQoFSGVsbG8SEQoJd29ya2VyX2lkGAEgASgJEhIKCnRhc2tfdHlwZXMYAiADKAkSIQoFcG9vbHMYAyADKA4yEi50aWNrd2hlZWwudjEuUG9vbBINCgVzbG90cxgEIAEoDRIZChFzdGFydF9vbl9kZWxpdmVyeRgFIAEoCBISCgpqc29uX2J5dGVzGAYgASgIEg8KB2JhY2tsb2cYByABKAgiFwoGQ3JlZGl0Eg0KBXNsb3RzGAEgASgNIisKA0FjaxIkCgV0YXNrcxgBIAMoCzIVLnRpY2t3aGVlbC52MS5UYXNrUmVmIjEKCUhlYXJ0YmVhdBIkCgV0YXNrcxgBIAMoCzIVLnRpY2t3aGVlbC52MS5UYXNrUmVmImsKCkNoZWNrcG9pbnQSIwoEdGFzaxgBIAEoCzIVLnRpY2t3aGVlbC52MS5UYXNrUmVmEiUKBGRhdGEYAiABKAsyFy5nb29nbGUucHJvdG9idWYuU3RydWN0EhEKCWRhdGFfanNvbhgDIAEoDCJvCgpDb21wbGV0aW9uEiMKBHRhc2sYASABKAsyFS50aWNrd2hlZWwudjEuVGFza1JlZhInCgZyZXN1bHQYAiABKAsyFy5nb29nbGUucHJvdG9idWYuU3RydWN0EhMKC3Jlc3VsdF9qc29uGAMgASgMIjYKC0NvbXBsZXRpb25zEicKBWl0ZW1zGAEgAygLMhgudGlja3doZWVsLnYxLkNvbXBsZXRpb24idwoHRmFpbHVyZRIjCgR0YXNrGAEgASgLMhUudGlja3doZWVsLnYxLlRhc2tSZWYSDQoFZXJyb3IYAiABKAkSEQoJcmV0cnlhYmxlGAMgASgIEhIKCmVycm9yX3R5cGUYBCABKAkSEQoJdHJhY2ViYWNrGAUgASgJInQKB1JlbGVhc2USIwoEdGFzaxgBIAEoCzIVLnRpY2t3aGVlbC52MS5UYXNrUmVmEisKCmNoZWNrcG9pbnQYAiABKAsyFy5nb29nbGUucHJvdG9idWYuU3RydWN0EhcKD2NoZWNrcG9pbnRfanNvbhgDIAEoDCI2Cg9DYW5jZWxDb25maXJtZWQSIwoEdGFzaxgBIAEoCzIVLnRpY2t3aGVlbC52MS5UYXNrUmVmIgcKBURyYWluIpAECg1Xb3JrZXJNZXNzYWdlEhIKCnJlcXVlc3RfaWQYASABKAQSJAoFaGVsbG8YAiABKAsyEy50aWNrd2hlZWwudjEuSGVsbG9IABImCgZjcmVkaXQYAyABKAsyFC50aWNrd2hlZWwudjEuQ3JlZGl0SAASIAoDYWNrGAQgASgLMhEudGlja3doZWVsLnYxLkFja0gAEiwKCWhlYXJ0YmVhdBgFIAEoCzIXLnRpY2t3aGVlbC52MS5IZWFydGJlYXRIABIuCgpjaGVja3BvaW50GAYgASgLMhgudGlja3doZWVsLnYxLkNoZWNrcG9pbnRIABIuCgpjb21wbGV0aW9uGAcgASgLMhgudGlja3doZWVsLnYxLkNvbXBsZXRpb25IABIoCgdmYWlsdXJlGAggASgLMhUudGlja3doZWVsLnYxLkZhaWx1cmVIABIoCgdyZWxlYXNlGAkgASgLMhUudGlja3doZWVsLnYxLlJlbGVhc2VIABI5ChBjYW5jZWxfY29uZmlybWVkGAogASgLMh0udGlja3doZWVsLnYxLkNhbmNlbENvbmZpcm1lZEgAEiQKBWRyYWluGAsgASgLMhMudGlja3doZWVsLnYxLkRyYWluSAASMAoLY29tcGxldGlvbnMYDCABKAsyGS50aWNrd2hlZWwudjEuQ29tcGxldGlvbnNIAEIGCgRraW5kIrkECgpBc3NpZ25tZW50Eg8KB3Rhc2tfaWQYASABKAkSEQoJdGVuYW50X2lkGAIgASgJEgwKBHR5cGUYAyABKAkSKAoHcGF5bG9hZBgEIAEoCzIXLmdvb2dsZS5wcm90b2J1Zi5TdHJ1Y3QSFQoNZmVuY2luZ190b2tlbhgFIAEoAxIPCgdhdHRlbXB0GAYgASgNEhMKC21heF9yZXRyaWVzGAcgASgNEjAKDHNjaGVkdWxlZF9hdBgIIAEoCzIaLmdvb2dsZS5wcm90b2J1Zi5UaW1lc3RhbXASKgoGZHVlX2F0GAkgASgLMhouZ29vZ2xlLnByb3RvYnVmLlRpbWVzdGFtcBI0ChBsZWFzZV9leHBpcmVzX2F0GAogASgLMhouZ29vZ2xlLnByb3RvYnVmLlRpbWVzdGFtcBIrCgpjaGVja3BvaW50GAsgASgLMhcuZ29vZ2xlLnByb3RvYnVmLlN0cnVjdBIxCg10cmFjZV9jb250ZXh0GAwgASgLMhoudGlja3doZWVsLnYxLlRyYWNlQ29udGV4dBIgCgRwb29sGA0gASgOMhIudGlja3doZWVsLnYxLlBvb2wSEQoJdGltZW91dF9zGA4gASgBEjoKFmRpc3BhdGNoX3RyYWNlX2NvbnRleHQYDyABKAsyGi50aWNrd2hlZWwudjEuVHJhY2VDb250ZXh0EhQKDHBheWxvYWRfanNvbhgQIAEoDBIXCg9jaGVja3BvaW50X2pzb24YESABKAwiNgoLQXNzaWdubWVudHMSJwoFdGFza3MYASADKAsyGC50aWNrd2hlZWwudjEuQXNzaWdubWVudCI0Cg1DYW5jZWxSZXF1ZXN0EiMKBHRhc2sYASABKAsyFS50aWNrd2hlZWwudjEuVGFza1JlZiI5CgpUYXNrUmVzdWx0Eg8KB3Rhc2tfaWQYASABKAkSCgoCb2sYAiABKAgSDgoGcmVhc29uGAMgASgJInUKBlJlc3VsdBISCgpyZXF1ZXN0X2lkGAEgASgEEikKB3Jlc3VsdHMYAiADKAsyGC50aWNrd2hlZWwudjEuVGFza1Jlc3VsdBIMCgRjb2RlGAMgASgNEg8KB21lc3NhZ2UYBCABKAkSDQoFZmllbGQYBSABKAkijAEKB1dlbGNvbWUSEgoKc2Vzc2lvbl9pZBgBIAEoCRITCgtsZWFzZV90dGxfcxgCIAEoARIcChRoZWFydGJlYXRfaW50ZXJ2YWxfcxgDIAEoARIpCgdtZW1iZXJzGAQgASgLMhgudGlja3doZWVsLnYxLk1lbWJlckxpc3QSDwoHYmFja2xvZxgFIAEoCCIaCgdCYWNrbG9nEg8KB3dhaXRpbmcYASABKAQi9AEKDVNlcnZlck1lc3NhZ2USKAoHd2VsY29tZRgBIAEoCzIVLnRpY2t3aGVlbC52MS5XZWxjb21lSAASMAoLYXNzaWdubWVudHMYAiABKAsyGS50aWNrd2hlZWwudjEuQXNzaWdubWVudHNIABItCgZjYW5jZWwYAyABKAsyGy50aWNrd2hlZWwudjEuQ2FuY2VsUmVxdWVzdEgAEiYKBnJlc3VsdBgEIAEoCzIULnRpY2t3aGVlbC52MS5SZXN1bHRIABIoCgdiYWNrbG9nGAUgASgLMhUudGlja3doZWVsLnYxLkJhY2tsb2dIAEIGCgRraW5kIngKE0NvbXBsZXRlVGFza1JlcXVlc3QSIwoEdGFzaxgBIAEoCzIVLnRpY2t3aGVlbC52MS5UYXNrUmVmEicKBnJlc3VsdBgCIAEoCzIXLmdvb2dsZS5wcm90b2J1Zi5TdHJ1Y3QSEwoLcmVzdWx0X2pzb24YAyABKAwiOAoUQ29tcGxldGVUYXNrUmVzcG9uc2USIAoEdGFzaxgBIAEoCzISLnRpY2t3aGVlbC52MS5UYXNrIn8KD0ZhaWxUYXNrUmVxdWVzdBIjCgR0YXNrGAEgASgLMhUudGlja3doZWVsLnYxLlRhc2tSZWYSDQoFZXJyb3IYAiABKAkSEQoJcmV0cnlhYmxlGAMgASgIEhIKCmVycm9yX3R5cGUYBCABKAkSEQoJdHJhY2ViYWNrGAUgASgJIjQKEEZhaWxUYXNrUmVzcG9uc2USIAoEdGFzaxgBIAEoCzISLnRpY2t3aGVlbC52MS5UYXNrIkIKEENvbmN1cnJlbmN5TGltaXQSEQoJdGVuYW50X2lkGAEgASgJEgwKBHR5cGUYAiABKAkSDQoFbGltaXQYAyABKA0iTAoaU2V0Q29uY3VycmVuY3lMaW1pdFJlcXVlc3QSEQoJdGVuYW50X2lkGAEgASgJEgwKBHR5cGUYAiABKAkSDQoFbGltaXQYAyABKA0iTAobU2V0Q29uY3VycmVuY3lMaW1pdFJlc3BvbnNlEi0KBWxpbWl0GAEgASgLMh4udGlja3doZWVsLnYxLkNvbmN1cnJlbmN5TGltaXQiMQocTGlzdENvbmN1cnJlbmN5TGltaXRzUmVxdWVzdBIRCgl0ZW5hbnRfaWQYASABKAkiTwodTGlzdENvbmN1cnJlbmN5TGltaXRzUmVzcG9uc2USLgoGbGltaXRzGAEgAygLMh4udGlja3doZWVsLnYxLkNvbmN1cnJlbmN5TGltaXQifQoGVGVuYW50EgoKAmlkGAEgASgJEgwKBG5hbWUYAiABKAkSDAoEdGllchgDIAEoCRIWCg5yYXRlX2xpbWl0X3JwcxgEIAEoDRIeChZtYXhfY29uY3VycmVudF93b3JrZXJzGAUgASgNEhMKC2hvbWVfcmVnaW9uGAYgASgJIjsKE0NyZWF0ZVRlbmFudFJlcXVlc3QSJAoGdGVuYW50GAEgASgLMhQudGlja3doZWVsLnYxLlRlbmFudCI8ChRDcmVhdGVUZW5hbnRSZXNwb25zZRIkCgZ0ZW5hbnQYASABKAsyFC50aWNrd2hlZWwudjEuVGVuYW50IiUKEEdldFRlbmFudFJlcXVlc3QSEQoJdGVuYW50X2lkGAEgASgJIjkKEUdldFRlbmFudFJlc3BvbnNlEiQKBnRlbmFudBgBIAEoCzIULnRpY2t3aGVlbC52MS5UZW5hbnQibgoTVXBkYXRlVGVuYW50UmVxdWVzdBIRCgl0ZW5hbnRfaWQYASABKAkSDAoEdGllchgCIAEoCRIWCg5yYXRlX2xpbWl0X3JwcxgDIAEoDRIeChZtYXhfY29uY3VycmVudF93b3JrZXJzGAQgASgNIjwKFFVwZGF0ZVRlbmFudFJlc3BvbnNlEiQKBnRlbmFudBgBIAEoCzIULnRpY2t3aGVlbC52MS5UZW5hbnQidgoTQ3JlYXRlQXBpS2V5UmVxdWVzdBIRCgl0ZW5hbnRfaWQYASABKAkSDAoEbmFtZRgCIAEoCRIOCgZzY29wZXMYAyADKAkSLgoKZXhwaXJlc19hdBgEIAEoCzIaLmdvb2dsZS5wcm90b2J1Zi5UaW1lc3RhbXAiNgoUQ3JlYXRlQXBpS2V5UmVzcG9uc2USDgoGa2V5X2lkGAEgASgJEg4KBnNlY3JldBgCIAEoCSKuAgoGQXBpS2V5EgoKAmlkGAEgASgJEhEKCXRlbmFudF9pZBgCIAEoCRIMCgRuYW1lGAMgASgJEg4KBnNjb3BlcxgEIAMoCRIuCgpjcmVhdGVkX2F0GAUgASgLMhouZ29vZ2xlLnByb3RvYnVmLlRpbWVzdGFtcBIuCgpleHBpcmVzX2F0GAYgASgLMhouZ29vZ2xlLnByb3RvYnVmLlRpbWVzdGFtcBIPCgdyZXZva2VkGAcgASgIEi4KCnJldm9rZWRfYXQYCCABKAsyGi5nb29nbGUucHJvdG9idWYuVGltZXN0YW1wEjAKDGxhc3RfdXNlZF9hdBgJIAEoCzIaLmdvb2dsZS5wcm90b2J1Zi5UaW1lc3RhbXASFAoMcm90YXRlZF9mcm9tGAogASgJIicKEkxpc3RBcGlLZXlzUmVxdWVzdBIRCgl0ZW5hbnRfaWQYASABKAkiOQoTTGlzdEFwaUtleXNSZXNwb25zZRIiCgRrZXlzGAEgAygLMhQudGlja3doZWVsLnYxLkFwaUtleSIlChNSZXZva2VBcGlLZXlSZXF1ZXN0Eg4KBmtleV9pZBgBIAEoCSI5ChRSZXZva2VBcGlLZXlSZXNwb25zZRIhCgNrZXkYASABKAsyFC50aWNrd2hlZWwudjEuQXBpS2V5ImYKE1JvdGF0ZUFwaUtleVJlcXVlc3QSDgoGa2V5X2lkGAEgASgJEg8KB2dyYWNlX3MYAiABKA0SLgoKZXhwaXJlc19hdBgDIAEoCzIaLmdvb2dsZS5wcm90b2J1Zi5UaW1lc3RhbXAidAoUUm90YXRlQXBpS2V5UmVzcG9uc2USJQoHb2xkX2tleRgBIAEoCzIULnRpY2t3aGVlbC52MS5BcGlLZXkSJQoHbmV3X2tleRgCIAEoCzIULnRpY2t3aGVlbC52MS5BcGlLZXkSDgoGc2VjcmV0GAMgASgJIjsKEkxpc3RUZW5hbnRzUmVxdWVzdBIRCglwYWdlX3NpemUYASABKA0SEgoKcGFnZV90b2tlbhgCIAEoCSJVChNMaXN0VGVuYW50c1Jlc3BvbnNlEiUKB3RlbmFudHMYASADKAsyFC50aWNrd2hlZWwudjEuVGVuYW50EhcKD25leHRfcGFnZV90b2tlbhgCIAEoCSIoChVHZXRUYXNrSGlzdG9yeVJlcXVlc3QSDwoHdGFza19pZBgBIAEoCSKHAgoOVGFza1RyYW5zaXRpb24SJgoCYXQYASABKAsyGi5nb29nbGUucHJvdG9idWYuVGltZXN0YW1wEisKCmZyb21fc3RhdGUYAiABKA4yFy50aWNrd2hlZWwudjEuVGFza1N0YXRlEikKCHRvX3N0YXRlGAMgASgOMhcudGlja3doZWVsLnYxLlRhc2tTdGF0ZRIVCg1mZW5jaW5nX3Rva2VuGAQgASgEEhMKC3NoYXJkX2Vwb2NoGAUgASgEEg0KBWFjdG9yGAYgASgJEg4KBnJlYXNvbhgHIAEoCRIqCgZkdWVfYXQYCCABKAsyGi5nb29nbGUucHJvdG9idWYuVGltZXN0YW1wIpIBCgxSZWZ1c2VkV3JpdGUSJgoCYXQYASABKAsyGi5nb29nbGUucHJvdG9idWYuVGltZXN0YW1wEhUKDWZlbmNpbmdfdG9rZW4YAiABKAQSFQoNY3VycmVudF90b2tlbhgDIAEoBBINCgVhY3RvchgEIAEoCRINCgV3cml0ZRgFIAEoCRIOCgZyZWFzb24YBiABKAkifwoWR2V0VGFza0hpc3RvcnlSZXNwb25zZRIxCgt0cmFuc2l0aW9ucxgBIAMoCzIcLnRpY2t3aGVlbC52MS5UYXNrVHJhbnNpdGlvbhIyCg5yZWZ1c2VkX3dyaXRlcxgCIAMoCzIaLnRpY2t3aGVlbC52MS5SZWZ1c2VkV3JpdGUizAEKClRhc2tGaWx0ZXISJwoGc3RhdGVzGAEgAygOMhcudGlja3doZWVsLnYxLlRhc2tTdGF0ZRIMCgR0eXBlGAIgASgJEiEKBXBvb2xzGAMgAygOMhIudGlja3doZWVsLnYxLlBvb2wSMgoOc2NoZWR1bGVkX2Zyb20YBCABKAsyGi5nb29nbGUucHJvdG9idWYuVGltZXN0YW1wEjAKDHNjaGVkdWxlZF90bxgFIAEoCzIaLmdvb2dsZS5wcm90b2J1Zi5UaW1lc3RhbXAiPQoRQ291bnRUYXNrc1JlcXVlc3QSKAoGZmlsdGVyGAEgASgLMhgudGlja3doZWVsLnYxLlRhc2tGaWx0ZXIihQEKCVRhc2tDb3VudBIRCgl0ZW5hbnRfaWQYASABKAkSJgoFc3RhdGUYAiABKA4yFy50aWNrd2hlZWwudjEuVGFza1N0YXRlEgwKBHR5cGUYAyABKAkSIAoEcG9vbBgEIAEoDjISLnRpY2t3aGVlbC52MS5Qb29sEg0KBWNvdW50GAUgASgEIooBChJDb3VudFRhc2tzUmVzcG9uc2USJwoGY291bnRzGAEgAygLMhcudGlja3doZWVsLnYxLlRhc2tDb3VudBINCgV0b3RhbBgCIAEoBBIRCgl0cnVuY2F0ZWQYAyABKAgSKQoFYXNfb2YYBCABKAsyGi5nb29nbGUucHJvdG9idWYuVGltZXN0YW1wIoUBChJHZXRGb3JlY2FzdFJlcXVlc3QSKQoFc3RhcnQYASABKAsyGi5nb29nbGUucHJvdG9idWYuVGltZXN0YW1wEhAKCGJ1Y2tldF9zGAIgASgNEg8KB2J1Y2tldHMYAyABKA0SIQoFcG9vbHMYBCADKA4yEi50aWNrd2hlZWwudjEuUG9vbCJ+Cg5Gb3JlY2FzdEJ1Y2tldBIpCgVzdGFydBgBIAEoCzIaLmdvb2dsZS5wcm90b2J1Zi5UaW1lc3RhbXASIAoEcG9vbBgCIAEoDjISLnRpY2t3aGVlbC52MS5Qb29sEg8KB25vbWluYWwYAyABKAQSDgoGZmlyaW5nGAQgASgEIrABChNHZXRGb3JlY2FzdFJlc3BvbnNlEikKBXN0YXJ0GAEgASgLMhouZ29vZ2xlLnByb3RvYnVmLlRpbWVzdGFtcBIQCghidWNrZXRfcxgCIAEoDRItCgdidWNrZXRzGAMgAygLMhwudGlja3doZWVsLnYxLkZvcmVjYXN0QnVja2V0Ei0KB292ZXJkdWUYBCADKAsyHC50aWNrd2hlZWwudjEuRm9yZWNhc3RCdWNrZXQiFAoSTGlzdFdvcmtlcnNSZXF1ZXN0Iq0CCgpXb3JrZXJJbmZvEhEKCXdvcmtlcl9pZBgBIAEoCRIRCgl0ZW5hbnRfaWQYAiABKAkSEgoKdGFza190eXBlcxgDIAMoCRIhCgVwb29scxgEIAMoDjISLnRpY2t3aGVlbC52MS5Qb29sEg0KBXNsb3RzGAUgASgNEhIKCnNsb3RzX3VzZWQYBiABKA0SEgoKc2xvdHNfZnJlZRgHIAEoDRIZChFzdGFydF9vbl9kZWxpdmVyeRgIIAEoCBIwCgxjb25uZWN0ZWRfYXQYCSABKAsyGi5nb29nbGUucHJvdG9idWYuVGltZXN0YW1wEi0KCWxhc3Rfc2VlbhgKIAEoCzIaLmdvb2dsZS5wcm90b2J1Zi5UaW1lc3RhbXASDwoHbm9kZV9pZBgLIAEoCSKAAQoTTGlzdFdvcmtlcnNSZXNwb25zZRIpCgd3b3JrZXJzGAEgAygLMhgudGlja3doZWVsLnYxLldvcmtlckluZm8SDwoHbm9kZV9pZBgCIAEoCRItCgh1bnNlcnZlZBgDIAMoCzIbLnRpY2t3aGVlbC52MS5VbnNlcnZlZFRhc2tzIpQBCg1VbnNlcnZlZFRhc2tzEhEKCXRlbmFudF9pZBgBIAEoCRIMCgR0eXBlGAIgASgJEiAKBHBvb2wYAyABKA4yEi50aWNrd2hlZWwudjEuUG9vbBINCgVjb3VudBgEIAEoBBIxCg1vbGRlc3RfZHVlX2F0GAUgASgLMhouZ29vZ2xlLnByb3RvYnVmLlRpbWVzdGFtcCI4ChJHZXRBY3Rpdml0eVJlcXVlc3QSEAoId2luZG93X3MYASABKA0SEAoIYnVja2V0X3MYAiABKA0iogEKDkFjdGl2aXR5QnVja2V0EikKBXN0YXJ0GAEgASgLMhouZ29vZ2xlLnByb3RvYnVmLlRpbWVzdGFtcBISCgpkaXNwYXRjaGVkGAIgASgEEhEKCWNvbXBsZXRlZBgDIAEoBBIOCgZmYWlsZWQYBCABKAQSFgoObGF0ZW5lc3NfcDUwX3MYBSABKAESFgoObGF0ZW5lc3NfcDk5X3MYBiABKAEiVgoTR2V0QWN0aXZpdHlSZXNwb25zZRItCgdidWNrZXRzGAEgAygLMhwudGlja3doZWVsLnYxLkFjdGl2aXR5QnVja2V0EhAKCGJ1Y2tldF9zGAIgASgNImsKFVBsYW5CdWxrQWN0aW9uUmVxdWVzdBIoCgZhY3Rpb24YASABKA4yGC50aWNrd2hlZWwudjEuQnVsa0FjdGlvbhIoCgZmaWx0ZXIYAiABKAsyGC50aWNrd2hlZWwudjEuVGFza0ZpbHRlciLvAQoWUGxhbkJ1bGtBY3Rpb25SZXNwb25zZRINCgVjb3VudBgBIAEoBBISCgpwbGFuX3Rva2VuGAIgASgJEigKBmFjdGlvbhgDIAEoDjIYLnRpY2t3aGVlbC52MS5CdWxrQWN0aW9uEigKBmZpbHRlchgEIAEoCzIYLnRpY2t3aGVlbC52MS5UYXNrRmlsdGVyEi4KCnBsYW5uZWRfYXQYBSABKAsyGi5nb29nbGUucHJvdG9idWYuVGltZXN0YW1wEi4KCmV4cGlyZXNfYXQYBiABKAsyGi5nb29nbGUucHJvdG9idWYuVGltZXN0YW1wIioKFFJ1bkJ1bGtBY3Rpb25SZXF1ZXN0EhIKCnBsYW5fdG9rZW4YASABKAkijQEKFVJ1bkJ1bGtBY3Rpb25SZXNwb25zZRIoCgZhY3Rpb24YASABKA4yGC50aWNrd2hlZWwudjEuQnVsa0FjdGlvbhIoCgZmaWx0ZXIYAiABKAsyGC50aWNrd2hlZWwudjEuVGFza0ZpbHRlchIPCgdtYXRjaGVkGAMgASgEEg8KB2NoYW5nZWQYBCABKAQiJQoUTGlzdFdvcmtmbG93c1JlcXVlc3QSDQoFbGltaXQYASABKA0iQgoVTGlzdFdvcmtmbG93c1Jlc3BvbnNlEikKCXdvcmtmbG93cxgBIAMoCzIWLnRpY2t3aGVlbC52MS5Xb3JrZmxvdyIsChVDYW5jZWxXb3JrZmxvd1JlcXVlc3QSEwoLd29ya2Zsb3dfaWQYASABKAkiYAoWQ2FuY2VsV29ya2Zsb3dSZXNwb25zZRIzCgh3b3JrZmxvdxgBIAEoCzIhLnRpY2t3aGVlbC52MS5HZXRXb3JrZmxvd1Jlc3BvbnNlEhEKCWNhbmNlbGxlZBgCIAEoDSIqChhEZWxldGVFeHBlY3RhdGlvblJlcXVlc3QSDgoGam9iX2lkGAEgASgJIhsKGURlbGV0ZUV4cGVjdGF0aW9uUmVzcG9uc2Uq9wEKCVRhc2tTdGF0ZRIaChZUQVNLX1NUQVRFX1VOU1BFQ0lGSUVEEAASGAoUVEFTS19TVEFURV9TQ0hFRFVMRUQQARIYChRUQVNLX1NUQVRFX1BSRUxPQURFRBACEhkKFVRBU0tfU1RBVEVfRElTUEFUQ0hFRBADEhYKElRBU0tfU1RBVEVfUlVOTklORxAEEhcKE1RBU0tfU1RBVEVfUkVUUllJTkcQBRIYChRUQVNLX1NUQVRFX0NPTVBMRVRFRBAGEhgKFFRBU0tfU1RBVEVfQ0FOQ0VMTEVEEAcSGgoWVEFTS19TVEFURV9ERUFEX0xFVFRFUhAIKlEKBFBvb2wSFAoQUE9PTF9VTlNQRUNJRklFRBAAEhEKDVBPT0xfQ1JJVElDQUwQARIRCg1QT09MX1NUQU5EQVJEEAISDQoJUE9PTF9CVUxLEAMqdQoKSml0dGVyTW9kZRIbChdKSVRURVJfTU9ERV9VTlNQRUNJRklFRBAAEhkKFUpJVFRFUl9NT0RFX1NZTU1FVFJJQxABEhkKFUpJVFRFUl9NT0RFX0xBVEVfT05MWRACEhQKEEpJVFRFUl9NT0RFX05PTkUQAyprCg5VcHN0cmVhbVBvbGljeRIfChtVUFNUUkVBTV9QT0xJQ1lfVU5TUEVDSUZJRUQQABIaChZVUFNUUkVBTV9QT0xJQ1lfQ0FOQ0VMEAESHAoYVVBTVFJFQU1fUE9MSUNZX0NPTlRJTlVFEAIqgQEKDU92ZXJsYXBQb2xpY3kSHgoaT1ZFUkxBUF9QT0xJQ1lfVU5TUEVDSUZJRUQQABIXChNPVkVSTEFQX1BPTElDWV9TS0lQEAESGAoUT1ZFUkxBUF9QT0xJQ1lfQUxMT1cQAhIdChlPVkVSTEFQX1BPTElDWV9CVUZGRVJfT05FEAMqjQEKEUV4cGVjdGF0aW9uU3RhdHVzEiIKHkVYUEVDVEFUSU9OX1NUQVRVU19VTlNQRUNJRklFRBAAEhkKFUVYUEVDVEFUSU9OX1NUQVRVU19PSxABEhsKF0VYUEVDVEFUSU9OX1NUQVRVU19MQVRFEAISHAoYRVhQRUNUQVRJT05fU1RBVFVTX1NUVUNLEAMqnQEKCVRhc2tPcmRlchIaChZUQVNLX09SREVSX1VOU1BFQ0lGSUVEEAASHAoYVEFTS19PUkRFUl9TQ0hFRFVMRURfQVNDEAESHQoZVEFTS19PUkRFUl9TQ0hFRFVMRURfREVTQxACEhoKFlRBU0tfT1JERVJfQ1JFQVRFRF9BU0MQAxIbChdUQVNLX09SREVSX0NSRUFURURfREVTQxAEKloKCkJ1bGtBY3Rpb24SGwoXQlVMS19BQ1RJT05fVU5TUEVDSUZJRUQQABIWChJCVUxLX0FDVElPTl9DQU5DRUwQARIXChNCVUxLX0FDVElPTl9SRURSSVZFEAIy2hIKEFNjaGVkdWxlclNlcnZpY2USTwoKU3VibWl0VGFzaxIfLnRpY2t3aGVlbC52MS5TdWJtaXRUYXNrUmVxdWVzdBogLnRpY2t3aGVlbC52MS5TdWJtaXRUYXNrUmVzcG9uc2USUgoLU3VibWl0VGFza3MSIC50aWNrd2hlZWwudjEuU3VibWl0VGFza3NSZXF1ZXN0GiEudGlja3doZWVsLnYxLlN1Ym1pdFRhc2tzUmVzcG9uc2USRgoHR2V0VGFzaxIcLnRpY2t3aGVlbC52MS5HZXRUYXNrUmVxdWVzdBodLnRpY2t3aGVlbC52MS5HZXRUYXNrUmVzcG9uc2USTwoKQ2FuY2VsVGFzaxIfLnRpY2t3aGVlbC52MS5DYW5jZWxUYXNrUmVxdWVzdBogLnRpY2t3aGVlbC52MS5DYW5jZWxUYXNrUmVzcG9uc2USTAoJTGlzdFRhc2tzEh4udGlja3doZWVsLnYxLkxpc3RUYXNrc1JlcXVlc3QaHy50aWNrd2hlZWwudjEuTGlzdFRhc2tzUmVzcG9uc2USUgoLUmVkcml2ZVRhc2sSIC50aWNrd2hlZWwudjEuUmVkcml2ZVRhc2tSZXF1ZXN0GiEudGlja3doZWVsLnYxLlJlZHJpdmVUYXNrUmVzcG9uc2USSQoIV2FpdFRhc2sSHS50aWNrd2hlZWwudjEuV2FpdFRhc2tSZXF1ZXN0Gh4udGlja3doZWVsLnYxLldhaXRUYXNrUmVzcG9uc2USWwoOU3VibWl0V29ya2Zsb3cSIy50aWNrd2hlZWwudjEuU3VibWl0V29ya2Zsb3dSZXF1ZXN0GiQudGlja3doZWVsLnYxLlN1Ym1pdFdvcmtmbG93UmVzcG9uc2USUgoLR2V0V29ya2Zsb3cSIC50aWNrd2hlZWwudjEuR2V0V29ya2Zsb3dSZXF1ZXN0GiEudGlja3doZWVsLnYxLkdldFdvcmtmbG93UmVzcG9uc2USWwoOQ3JlYXRlU2NoZWR1bGUSIy50aWNrd2hlZWwudjEuQ3JlYXRlU2NoZWR1bGVSZXF1ZXN0GiQudGlja3doZWVsLnYxLkNyZWF0ZVNjaGVkdWxlUmVzcG9uc2USUgoLR2V0U2NoZWR1bGUSIC50aWNrd2hlZWwudjEuR2V0U2NoZWR1bGVSZXF1ZXN0GiEudGlja3doZWVsLnYxLkdldFNjaGVkdWxlUmVzcG9uc2USWAoNTGlzdFNjaGVkdWxlcxIiLnRpY2t3aGVlbC52MS5MaXN0U2NoZWR1bGVzUmVxdWVzdBojLnRpY2t3aGVlbC52MS5MaXN0U2NoZWR1bGVzUmVzcG9uc2USWAoNUGF1c2VTY2hlZHVsZRIiLnRpY2t3aGVlbC52MS5QYXVzZVNjaGVkdWxlUmVxdWVzdBojLnRpY2t3aGVlbC52MS5QYXVzZVNjaGVkdWxlUmVzcG9uc2USWwoOUmVzdW1lU2NoZWR1bGUSIy50aWNrd2hlZWwudjEuUmVzdW1lU2NoZWR1bGVSZXF1ZXN0GiQudGlja3doZWVsLnYxLlJlc3VtZVNjaGVkdWxlUmVzcG9uc2USWwoORGVsZXRlU2NoZWR1bGUSIy50aWNrd2hlZWwudjEuRGVsZXRlU2NoZWR1bGVSZXF1ZXN0GiQudGlja3doZWVsLnYxLkRlbGV0ZVNjaGVkdWxlUmVzcG9uc2USagoTUmVnaXN0ZXJFeHBlY3RhdGlvbhIoLnRpY2t3aGVlbC52MS5SZWdpc3RlckV4cGVjdGF0aW9uUmVxdWVzdBopLnRpY2t3aGVlbC52MS5SZWdpc3RlckV4cGVjdGF0aW9uUmVzcG9uc2USYQoQTGlzdEV4cGVjdGF0aW9ucxIlLnRpY2t3aGVlbC52MS5MaXN0RXhwZWN0YXRpb25zUmVxdWVzdBomLnRpY2t3aGVlbC52MS5MaXN0RXhwZWN0YXRpb25zUmVzcG9uc2USWwoOR2V0VGFza0hpc3RvcnkSIy50aWNrd2hlZWwudjEuR2V0VGFza0hpc3RvcnlSZXF1ZXN0GiQudGlja3doZWVsLnYxLkdldFRhc2tIaXN0b3J5UmVzcG9uc2USWAoNTGlzdFdvcmtmbG93cxIiLnRpY2t3aGVlbC52MS5MaXN0V29ya2Zsb3dzUmVxdWVzdBojLnRpY2t3aGVlbC52MS5MaXN0V29ya2Zsb3dzUmVzcG9uc2USWwoOQ2FuY2VsV29ya2Zsb3cSIy50aWNrd2hlZWwudjEuQ2FuY2VsV29ya2Zsb3dSZXF1ZXN0GiQudGlja3doZWVsLnYxLkNhbmNlbFdvcmtmbG93UmVzcG9uc2USZAoRRGVsZXRlRXhwZWN0YXRpb24SJi50aWNrd2hlZWwudjEuRGVsZXRlRXhwZWN0YXRpb25SZXF1ZXN0GicudGlja3doZWVsLnYxLkRlbGV0ZUV4cGVjdGF0aW9uUmVzcG9uc2USTwoKQ291bnRUYXNrcxIfLnRpY2t3aGVlbC52MS5Db3VudFRhc2tzUmVxdWVzdBogLnRpY2t3aGVlbC52MS5Db3VudFRhc2tzUmVzcG9uc2USUgoLR2V0Rm9yZWNhc3QSIC50aWNrd2hlZWwudjEuR2V0Rm9yZWNhc3RSZXF1ZXN0GiEudGlja3doZWVsLnYxLkdldEZvcmVjYXN0UmVzcG9uc2USUgoLTGlzdFdvcmtlcnMSIC50aWNrd2hlZWwudjEuTGlzdFdvcmtlcnNSZXF1ZXN0GiEudGlja3doZWVsLnYxLkxpc3RXb3JrZXJzUmVzcG9uc2USUgoLR2V0QWN0aXZpdHkSIC50aWNrd2hlZWwudjEuR2V0QWN0aXZpdHlSZXF1ZXN0GiEudGlja3doZWVsLnYxLkdldEFjdGl2aXR5UmVzcG9uc2USWwoOUGxhbkJ1bGtBY3Rpb24SIy50aWNrd2hlZWwudjEuUGxhbkJ1bGtBY3Rpb25SZXF1ZXN0GiQudGlja3doZWVsLnYxLlBsYW5CdWxrQWN0aW9uUmVzcG9uc2USWAoNUnVuQnVsa0FjdGlvbhIiLnRpY2t3aGVlbC52MS5SdW5CdWxrQWN0aW9uUmVxdWVzdBojLnRpY2t3aGVlbC52MS5SdW5CdWxrQWN0aW9uUmVzcG9uc2UywgIKDVdvcmtlclNlcnZpY2USRwoHQ29ubmVjdBIbLnRpY2t3aGVlbC52MS5Xb3JrZXJNZXNzYWdlGhsudGlja3doZWVsLnYxLlNlcnZlck1lc3NhZ2UoATABElUKDENvbXBsZXRlVGFzaxIhLnRpY2t3aGVlbC52MS5Db21wbGV0ZVRhc2tSZXF1ZXN0GiIudGlja3doZWVsLnYxLkNvbXBsZXRlVGFza1Jlc3BvbnNlEkkKCEZhaWxUYXNrEh0udGlja3doZWVsLnYxLkZhaWxUYXNrUmVxdWVzdBoeLnRpY2t3aGVlbC52MS5GYWlsVGFza1Jlc3BvbnNlEkYKB01lbWJlcnMSHC50aWNrd2hlZWwudjEuTWVtYmVyc1JlcXVlc3QaHS50aWNrd2hlZWwudjEuTWVtYmVyc1Jlc3BvbnNlMpUHCgxBZG1pblNlcnZpY2USVQoMQ3JlYXRlVGVuYW50EiEudGlja3doZWVsLnYxLkNyZWF0ZVRlbmFudFJlcXVlc3QaIi50aWNrd2hlZWwudjEuQ3JlYXRlVGVuYW50UmVzcG9uc2USTAoJR2V0VGVuYW50Eh4udGlja3doZWVsLnYxLkdldFRlbmFudFJlcXVlc3QaHy50aWNrd2hlZWwudjEuR2V0VGVuYW50UmVzcG9uc2USVQoMVXBkYXRlVGVuYW50EiEudGlja3doZWVsLnYxLlVwZGF0ZVRlbmFudFJlcXVlc3QaIi50aWNrd2hlZWwudjEuVXBkYXRlVGVuYW50UmVzcG9uc2USVQoMQ3JlYXRlQXBpS2V5EiEudGlja3doZWVsLnYxLkNyZWF0ZUFwaUtleVJlcXVlc3QaIi50aWNrd2hlZWwudjEuQ3JlYXRlQXBpS2V5UmVzcG9uc2USUgoLTGlzdEFwaUtleXMSIC50aWNrd2hlZWwudjEuTGlzdEFwaUtleXNSZXF1ZXN0GiEudGlja3doZWVsLnYxLkxpc3RBcGlLZXlzUmVzcG9uc2USVQoMUmV2b2tlQXBpS2V5EiEudGlja3doZWVsLnYxLlJldm9rZUFwaUtleVJlcXVlc3QaIi50aWNrd2hlZWwudjEuUmV2b2tlQXBpS2V5UmVzcG9uc2USVQoMUm90YXRlQXBpS2V5EiEudGlja3doZWVsLnYxLlJvdGF0ZUFwaUtleVJlcXVlc3QaIi50aWNrd2hlZWwudjEuUm90YXRlQXBpS2V5UmVzcG9uc2USUgoLTGlzdFRlbmFudHMSIC50aWNrd2hlZWwudjEuTGlzdFRlbmFudHNSZXF1ZXN0GiEudGlja3doZWVsLnYxLkxpc3RUZW5hbnRzUmVzcG9uc2USagoTU2V0Q29uY3VycmVuY3lMaW1pdBIoLnRpY2t3aGVlbC52MS5TZXRDb25jdXJyZW5jeUxpbWl0UmVxdWVzdBopLnRpY2t3aGVlbC52MS5TZXRDb25jdXJyZW5jeUxpbWl0UmVzcG9uc2UScAoVTGlzdENvbmN1cnJlbmN5TGltaXRzEioudGlja3doZWVsLnYxLkxpc3RDb25jdXJyZW5jeUxpbWl0c1JlcXVlc3QaKy50aWNrd2hlZWwudjEuTGlzdENvbmN1cnJlbmN5TGltaXRzUmVzcG9uc2ViBnByb3RvMw", [file_google_protobuf_struct, file_google_protobuf_timestamp]);

/**
 * W3C trace context captured at submission and carried to the worker.
 *
 * @generated from message tickwheel.v1.TraceContext
 */
export type TraceContext = Message<"tickwheel.v1.TraceContext"> & {
  /**
   * The W3C `traceparent` header value.
   *
   * @generated from field: string traceparent = 1;
   */
  traceparent: string;

  /**
   * The W3C `tracestate` header value (may be empty).
   *
   * @generated from field: string tracestate = 2;
   */
  tracestate: string;
};

/**
 * Describes the message tickwheel.v1.TraceContext.
 * Use `create(TraceContextSchema)` to create a new message.
 */
export const TraceContextSchema: GenMessage<TraceContext> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 0);

/**
 * What a client asks to run.
 *
 * @generated from message tickwheel.v1.TaskSpec
 */
export type TaskSpec = Message<"tickwheel.v1.TaskSpec"> & {
  /**
   * Task type; workers register handlers per type. 1-64 characters.
   *
   * @generated from field: string type = 1;
   */
  type: string;

  /**
   * JSON object handed to the handler. At most 1 MiB serialised by default, nested at
   * most 32 levels. Build it with your library's Struct helper (docs/clients.md): a
   * plain object where a Struct belongs is silently sent as `{}` by some libraries.
   *
   * @generated from field: google.protobuf.Struct payload = 2;
   */
  payload?: JsonObject | undefined;

  /**
   * When to run (a delay is `now + delay`). Unset means now; a set value must be in
   * the Timestamp range above (an explicit epoch 0 is refused, never taken as "now").
   * A time in the past runs at once. The task is never dispatched before this instant
   * unless jitter_mode is JITTER_MODE_SYMMETRIC; on a round instant (a whole minute) it
   * may run up to the jitter window later (see JitterMode). Task.due_at answers the
   * effective time.
   *
   * @generated from field: google.protobuf.Timestamp scheduled_at = 3;
   */
  scheduledAt?: Timestamp | undefined;

  /**
   * Deduplicates submissions per tenant whatever the time; up to 128 characters.
   * Unset means the task id is the key (no deduplication).
   *
   * @generated from field: string idempotency_key = 4;
   */
  idempotencyKey: string;

  /**
   * Priority pool.
   *
   * @generated from field: tickwheel.v1.Pool pool = 5;
   */
  pool: Pool;

  /**
   * Run at the exact instant asked (no jitter, even on a round instant).
   *
   * @generated from field: bool strict_timing = 6;
   */
  strictTiming: boolean;

  /**
   * Jitter mode when strict_timing is false; unspecified means the default rule
   * (late-only on a round instant, none otherwise; see JitterMode).
   *
   * @generated from field: tickwheel.v1.JitterMode jitter_mode = 7;
   */
  jitterMode: JitterMode;

  /**
   * Retries after the first attempt before DEAD_LETTER. Unset (0) means the default
   * of 3 unless `no_retries` is set.
   *
   * @generated from field: uint32 max_retries = 8;
   */
  maxRetries: number;

  /**
   * Set to allow no retry at all.
   *
   * @generated from field: bool no_retries = 9;
   */
  noRetries: boolean;

  /**
   * Run-time limit per attempt in seconds, 0 to 604,800 (7 days); 0 means no limit
   * beyond the lease.
   *
   * @generated from field: double timeout_s = 10;
   */
  timeoutS: number;

  /**
   * Trace context; when unset it is read from the call's `traceparent` metadata.
   *
   * @generated from field: tickwheel.v1.TraceContext trace_context = 11;
   */
  traceContext?: TraceContext | undefined;

  /**
   * This task's retry backoff and non-retryable errors; unset means the server's
   * defaults (its base and cap, every error retryable).
   *
   * @generated from field: tickwheel.v1.RetryPolicy retry_policy = 12;
   */
  retryPolicy?: RetryPolicy | undefined;

  /**
   * `payload` as UTF-8 JSON bytes (see "JSON as bytes" at the top): set this or
   * `payload`, not both. Same limits: at most 1 MiB by default (counted in bytes),
   * nested at most 32 levels.
   *
   * @generated from field: bytes payload_json = 13;
   */
  payloadJson: Uint8Array;

  /**
   * Concurrency key (issue 43, docs/flow-control.md): at most N tasks of this
   * (tenant, type, key) are DISPATCHED or RUNNING at once across the whole cluster,
   * N being the type's limit (AdminService.SetConcurrencyLimit; 1 when none is set).
   * Tasks over the limit stay PRELOADED and start in due order as slots free (a slot
   * frees when its task completes, fails, is released or cancelled, or its lease
   * expires). 1-128 characters, no NUL; empty: no key, no limit. E.g. a customer id.
   *
   * @generated from field: string concurrency_key = 20;
   */
  concurrencyKey: string;
};

/**
 * Describes the message tickwheel.v1.TaskSpec.
 * Use `create(TaskSpecSchema)` to create a new message.
 */
export const TaskSpecSchema: GenMessage<TaskSpec> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 1);

/**
 * A task's own retry policy. A failed attempt that may retry is due again after
 * min(max_backoff_s, initial_backoff_s * 2^(attempt - 1)) seconds plus a deterministic
 * spread of up to 25%. An attempt that failed with an error type listed in
 * `non_retryable_error_types` dead-letters at once (the worker reports the type in
 * Failure.error_type; the Python SDK sends the exception's class name).
 *
 * @generated from message tickwheel.v1.RetryPolicy
 */
export type RetryPolicy = Message<"tickwheel.v1.RetryPolicy"> & {
  /**
   * First backoff in seconds, > 0 and at most 86,400; 0 means the server's default.
   *
   * @generated from field: double initial_backoff_s = 1;
   */
  initialBackoffS: number;

  /**
   * Largest backoff in seconds, >= initial_backoff_s and at most 86,400; 0 means the
   * server's default cap (or initial_backoff_s when that is larger).
   *
   * @generated from field: double max_backoff_s = 2;
   */
  maxBackoffS: number;

  /**
   * Attempts in all, the first included (1 = no retry), at most 101; 0 means
   * TaskSpec.max_retries decides. Set it or max_retries/no_retries, not both.
   *
   * @generated from field: uint32 max_attempts = 3;
   */
  maxAttempts: number;

  /**
   * Error types that never retry (at most 32, each 1-128 characters), matched
   * exactly against Failure.error_type (e.g. `ValueError`, `billing.CardDeclined`).
   *
   * @generated from field: repeated string non_retryable_error_types = 4;
   */
  nonRetryableErrorTypes: string[];
};

/**
 * Describes the message tickwheel.v1.RetryPolicy.
 * Use `create(RetryPolicySchema)` to create a new message.
 */
export const RetryPolicySchema: GenMessage<RetryPolicy> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 2);

/**
 * A task as the scheduler holds it.
 *
 * @generated from message tickwheel.v1.Task
 */
export type Task = Message<"tickwheel.v1.Task"> & {
  /**
   * UUIDv7 task id.
   *
   * @generated from field: string id = 1;
   */
  id: string;

  /**
   * Owning tenant id.
   *
   * @generated from field: string tenant_id = 2;
   */
  tenantId: string;

  /**
   * Task type.
   *
   * @generated from field: string type = 3;
   */
  type: string;

  /**
   * Lifecycle state.
   *
   * @generated from field: tickwheel.v1.TaskState state = 4;
   */
  state: TaskState;

  /**
   * The time the client asked for.
   *
   * @generated from field: google.protobuf.Timestamp scheduled_at = 5;
   */
  scheduledAt?: Timestamp | undefined;

  /**
   * The effective due time after jitter (and retry backoff).
   *
   * @generated from field: google.protobuf.Timestamp due_at = 6;
   */
  dueAt?: Timestamp | undefined;

  /**
   * Idempotency key.
   *
   * @generated from field: string idempotency_key = 7;
   */
  idempotencyKey: string;

  /**
   * Priority pool.
   *
   * @generated from field: tickwheel.v1.Pool pool = 8;
   */
  pool: Pool;

  /**
   * Current fencing token.
   *
   * @generated from field: int64 fencing_token = 9;
   */
  fencingToken: bigint;

  /**
   * Attempts that have failed so far.
   *
   * @generated from field: uint32 retry_count = 10;
   */
  retryCount: number;

  /**
   * Retries allowed.
   *
   * @generated from field: uint32 max_retries = 11;
   */
  maxRetries: number;

  /**
   * Input payload.
   *
   * @generated from field: google.protobuf.Struct payload = 12;
   */
  payload?: JsonObject | undefined;

  /**
   * Result of a completed task.
   *
   * @generated from field: google.protobuf.Struct result = 13;
   */
  result?: JsonObject | undefined;

  /**
   * Last error message of a failed attempt.
   *
   * @generated from field: string last_error = 14;
   */
  lastError: string;

  /**
   * Last checkpoint written by a worker.
   *
   * @generated from field: google.protobuf.Struct checkpoint = 15;
   */
  checkpoint?: JsonObject | undefined;

  /**
   * Worker currently holding the lease.
   *
   * @generated from field: string worker_id = 16;
   */
  workerId: string;

  /**
   * A cancel was requested and awaits the worker.
   *
   * @generated from field: bool cancel_requested = 17;
   */
  cancelRequested: boolean;

  /**
   * Shard of the task.
   *
   * @generated from field: uint32 shard_id = 18;
   */
  shardId: number;

  /**
   * Creation time.
   *
   * @generated from field: google.protobuf.Timestamp created_at = 19;
   */
  createdAt?: Timestamp | undefined;

  /**
   * Last change.
   *
   * @generated from field: google.protobuf.Timestamp updated_at = 20;
   */
  updatedAt?: Timestamp | undefined;

  /**
   * Whether strict timing was asked.
   *
   * @generated from field: bool strict_timing = 21;
   */
  strictTiming: boolean;

  /**
   * Trace context captured at submission.
   *
   * @generated from field: tickwheel.v1.TraceContext trace_context = 22;
   */
  traceContext?: TraceContext | undefined;

  /**
   * The task's own retry policy (unset: the server's defaults).
   *
   * @generated from field: tickwheel.v1.RetryPolicy retry_policy = 23;
   */
  retryPolicy?: RetryPolicy | undefined;

  /**
   * `payload` as UTF-8 JSON bytes, instead of `payload`, when the call asked for bytes
   * (metadata `x-tickwheel-json: bytes`; see "JSON as bytes" at the top). A submit's
   * answer for a task it created carries the payload in the form the request sent.
   *
   * @generated from field: bytes payload_json = 24;
   */
  payloadJson: Uint8Array;

  /**
   * `result` as UTF-8 JSON bytes, instead of `result`, when the call asked for bytes.
   *
   * @generated from field: bytes result_json = 25;
   */
  resultJson: Uint8Array;

  /**
   * `checkpoint` as UTF-8 JSON bytes, instead of `checkpoint`, when the call asked for
   * bytes.
   *
   * @generated from field: bytes checkpoint_json = 26;
   */
  checkpointJson: Uint8Array;

  /**
   * The type of the last failed attempt's error as the worker reported it
   * (Failure.error_type, e.g. `ValueError`); empty when it named none, and cleared
   * with `last_error` when a lease expiry or an upstream failure writes it.
   *
   * @generated from field: string last_error_type = 27;
   */
  lastErrorType: string;

  /**
   * The traceback of the last failed attempt as the worker reported it
   * (Failure.traceback); empty when it sent none.
   *
   * @generated from field: string last_traceback = 28;
   */
  lastTraceback: string;

  /**
   * The workflow the task is a node of (empty: none).
   *
   * @generated from field: string workflow_id = 29;
   */
  workflowId: string;

  /**
   * The schedule that created the task (empty: none).
   *
   * @generated from field: string schedule_id = 30;
   */
  scheduleId: string;

  /**
   * The task's concurrency key (TaskSpec.concurrency_key; empty: none).
   *
   * @generated from field: string concurrency_key = 60;
   */
  concurrencyKey: string;
};

/**
 * Describes the message tickwheel.v1.Task.
 * Use `create(TaskSchema)` to create a new message.
 */
export const TaskSchema: GenMessage<Task> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 3);

/**
 * @generated from message tickwheel.v1.SubmitTaskRequest
 */
export type SubmitTaskRequest = Message<"tickwheel.v1.SubmitTaskRequest"> & {
  /**
   * The task to run.
   *
   * @generated from field: tickwheel.v1.TaskSpec task = 1;
   */
  task?: TaskSpec | undefined;
};

/**
 * Describes the message tickwheel.v1.SubmitTaskRequest.
 * Use `create(SubmitTaskRequestSchema)` to create a new message.
 */
export const SubmitTaskRequestSchema: GenMessage<SubmitTaskRequest> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 4);

/**
 * @generated from message tickwheel.v1.SubmitTaskResponse
 */
export type SubmitTaskResponse = Message<"tickwheel.v1.SubmitTaskResponse"> & {
  /**
   * The task (the existing one for an idempotent resubmit).
   *
   * @generated from field: tickwheel.v1.Task task = 1;
   */
  task?: Task | undefined;

  /**
   * False when the idempotency key already named a task.
   *
   * @generated from field: bool created = 2;
   */
  created: boolean;
};

/**
 * Describes the message tickwheel.v1.SubmitTaskResponse.
 * Use `create(SubmitTaskResponseSchema)` to create a new message.
 */
export const SubmitTaskResponseSchema: GenMessage<SubmitTaskResponse> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 5);

/**
 * @generated from message tickwheel.v1.SubmitTasksRequest
 */
export type SubmitTasksRequest = Message<"tickwheel.v1.SubmitTasksRequest"> & {
  /**
   * Tasks to run; at most 10,000 per call.
   *
   * @generated from field: repeated tickwheel.v1.TaskSpec tasks = 1;
   */
  tasks: TaskSpec[];
};

/**
 * Describes the message tickwheel.v1.SubmitTasksRequest.
 * Use `create(SubmitTasksRequestSchema)` to create a new message.
 */
export const SubmitTasksRequestSchema: GenMessage<SubmitTasksRequest> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 6);

/**
 * @generated from message tickwheel.v1.SubmitTasksResponse
 */
export type SubmitTasksResponse = Message<"tickwheel.v1.SubmitTasksResponse"> & {
  /**
   * One result per request item, in order.
   *
   * @generated from field: repeated tickwheel.v1.SubmitTaskResponse results = 1;
   */
  results: SubmitTaskResponse[];
};

/**
 * Describes the message tickwheel.v1.SubmitTasksResponse.
 * Use `create(SubmitTasksResponseSchema)` to create a new message.
 */
export const SubmitTasksResponseSchema: GenMessage<SubmitTasksResponse> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 7);

/**
 * @generated from message tickwheel.v1.GetTaskRequest
 */
export type GetTaskRequest = Message<"tickwheel.v1.GetTaskRequest"> & {
  /**
   * Task id.
   *
   * @generated from field: string task_id = 1;
   */
  taskId: string;
};

/**
 * Describes the message tickwheel.v1.GetTaskRequest.
 * Use `create(GetTaskRequestSchema)` to create a new message.
 */
export const GetTaskRequestSchema: GenMessage<GetTaskRequest> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 8);

/**
 * @generated from message tickwheel.v1.GetTaskResponse
 */
export type GetTaskResponse = Message<"tickwheel.v1.GetTaskResponse"> & {
  /**
   * The task.
   *
   * @generated from field: tickwheel.v1.Task task = 1;
   */
  task?: Task | undefined;
};

/**
 * Describes the message tickwheel.v1.GetTaskResponse.
 * Use `create(GetTaskResponseSchema)` to create a new message.
 */
export const GetTaskResponseSchema: GenMessage<GetTaskResponse> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 9);

/**
 * @generated from message tickwheel.v1.CancelTaskRequest
 */
export type CancelTaskRequest = Message<"tickwheel.v1.CancelTaskRequest"> & {
  /**
   * Task id.
   *
   * @generated from field: string task_id = 1;
   */
  taskId: string;
};

/**
 * Describes the message tickwheel.v1.CancelTaskRequest.
 * Use `create(CancelTaskRequestSchema)` to create a new message.
 */
export const CancelTaskRequestSchema: GenMessage<CancelTaskRequest> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 10);

/**
 * @generated from message tickwheel.v1.CancelTaskResponse
 */
export type CancelTaskResponse = Message<"tickwheel.v1.CancelTaskResponse"> & {
  /**
   * The task after the cancel (CANCELLED, or cancel_requested while its worker stops).
   *
   * @generated from field: tickwheel.v1.Task task = 1;
   */
  task?: Task | undefined;
};

/**
 * Describes the message tickwheel.v1.CancelTaskResponse.
 * Use `create(CancelTaskResponseSchema)` to create a new message.
 */
export const CancelTaskResponseSchema: GenMessage<CancelTaskResponse> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 11);

/**
 * @generated from message tickwheel.v1.ListTasksRequest
 */
export type ListTasksRequest = Message<"tickwheel.v1.ListTasksRequest"> & {
  /**
   * Only these states (empty: all).
   *
   * @generated from field: repeated tickwheel.v1.TaskState states = 1;
   */
  states: TaskState[];

  /**
   * Only this type (empty: all).
   *
   * @generated from field: string type = 2;
   */
  type: string;

  /**
   * Scheduled at or after.
   *
   * @generated from field: google.protobuf.Timestamp scheduled_from = 3;
   */
  scheduledFrom?: Timestamp | undefined;

  /**
   * Scheduled before.
   *
   * @generated from field: google.protobuf.Timestamp scheduled_to = 4;
   */
  scheduledTo?: Timestamp | undefined;

  /**
   * Page size, 1-1000; 0 means 100.
   *
   * @generated from field: uint32 page_size = 5;
   */
  pageSize: number;

  /**
   * Token from the previous page; empty for the first. A token is bound to the filter
   * it was issued for (states, type, pools, idempotency_key, scheduled_from,
   * scheduled_to) and continues the order it was issued for (pass the same `order`);
   * the page size may change. Sent with another filter it answers INVALID_ARGUMENT
   * "page_token: was issued for a different filter".
   *
   * @generated from field: string page_token = 6;
   */
  pageToken: string;

  /**
   * The order of the pages; unspecified is TASK_ORDER_SCHEDULED_ASC.
   *
   * @generated from field: tickwheel.v1.TaskOrder order = 7;
   */
  order: TaskOrder;

  /**
   * Only these pools (empty: all); POOL_UNSPECIFIED and unknown values answer
   * INVALID_ARGUMENT "pools[i]: ...".
   *
   * @generated from field: repeated tickwheel.v1.Pool pools = 8;
   */
  pools: Pool[];

  /**
   * Only the task with this idempotency key (empty: any), at most 128 characters; the
   * other fields still narrow (a page of at most one task, found by the key's index).
   *
   * @generated from field: string idempotency_key = 9;
   */
  idempotencyKey: string;
};

/**
 * Describes the message tickwheel.v1.ListTasksRequest.
 * Use `create(ListTasksRequestSchema)` to create a new message.
 */
export const ListTasksRequestSchema: GenMessage<ListTasksRequest> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 12);

/**
 * @generated from message tickwheel.v1.ListTasksResponse
 */
export type ListTasksResponse = Message<"tickwheel.v1.ListTasksResponse"> & {
  /**
   * The page.
   *
   * @generated from field: repeated tickwheel.v1.Task tasks = 1;
   */
  tasks: Task[];

  /**
   * Token of the next page; empty at the end.
   *
   * @generated from field: string next_page_token = 2;
   */
  nextPageToken: string;
};

/**
 * Describes the message tickwheel.v1.ListTasksResponse.
 * Use `create(ListTasksResponseSchema)` to create a new message.
 */
export const ListTasksResponseSchema: GenMessage<ListTasksResponse> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 13);

/**
 * @generated from message tickwheel.v1.RedriveTaskRequest
 */
export type RedriveTaskRequest = Message<"tickwheel.v1.RedriveTaskRequest"> & {
  /**
   * Task id.
   *
   * @generated from field: string task_id = 1;
   */
  taskId: string;

  /**
   * When to run again; unset means now.
   *
   * @generated from field: google.protobuf.Timestamp scheduled_at = 2;
   */
  scheduledAt?: Timestamp | undefined;
};

/**
 * Describes the message tickwheel.v1.RedriveTaskRequest.
 * Use `create(RedriveTaskRequestSchema)` to create a new message.
 */
export const RedriveTaskRequestSchema: GenMessage<RedriveTaskRequest> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 14);

/**
 * @generated from message tickwheel.v1.RedriveTaskResponse
 */
export type RedriveTaskResponse = Message<"tickwheel.v1.RedriveTaskResponse"> & {
  /**
   * The task, SCHEDULED again.
   *
   * @generated from field: tickwheel.v1.Task task = 1;
   */
  task?: Task | undefined;
};

/**
 * Describes the message tickwheel.v1.RedriveTaskResponse.
 * Use `create(RedriveTaskResponseSchema)` to create a new message.
 */
export const RedriveTaskResponseSchema: GenMessage<RedriveTaskResponse> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 15);

/**
 * @generated from message tickwheel.v1.WaitTaskRequest
 */
export type WaitTaskRequest = Message<"tickwheel.v1.WaitTaskRequest"> & {
  /**
   * Task id.
   *
   * @generated from field: string task_id = 1;
   */
  taskId: string;

  /**
   * Longest wait in seconds, 0 to 60 (larger values wait 60); 0 answers at once.
   *
   * @generated from field: double timeout_s = 2;
   */
  timeoutS: number;
};

/**
 * Describes the message tickwheel.v1.WaitTaskRequest.
 * Use `create(WaitTaskRequestSchema)` to create a new message.
 */
export const WaitTaskRequestSchema: GenMessage<WaitTaskRequest> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 16);

/**
 * @generated from message tickwheel.v1.WaitTaskResponse
 */
export type WaitTaskResponse = Message<"tickwheel.v1.WaitTaskResponse"> & {
  /**
   * The task, terminal or as it is when the wait timed out.
   *
   * @generated from field: tickwheel.v1.Task task = 1;
   */
  task?: Task | undefined;

  /**
   * True when the task is in a terminal state.
   *
   * @generated from field: bool done = 2;
   */
  done: boolean;
};

/**
 * Describes the message tickwheel.v1.WaitTaskResponse.
 * Use `create(WaitTaskResponseSchema)` to create a new message.
 */
export const WaitTaskResponseSchema: GenMessage<WaitTaskResponse> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 17);

/**
 * One node of a workflow to submit.
 *
 * @generated from message tickwheel.v1.WorkflowNodeSpec
 */
export type WorkflowNodeSpec = Message<"tickwheel.v1.WorkflowNodeSpec"> & {
  /**
   * Node id, unique in the workflow, 1-64 characters; edges name nodes by it.
   *
   * @generated from field: string id = 1;
   */
  id: string;

  /**
   * The task to run. `idempotency_key` must be empty (the workflow's key dedupes the
   * whole graph). Unset `scheduled_at` means as soon as every parent completed, with
   * no jitter; a later `scheduled_at` holds the node until then.
   *
   * @generated from field: tickwheel.v1.TaskSpec task = 2;
   */
  task?: TaskSpec | undefined;
};

/**
 * Describes the message tickwheel.v1.WorkflowNodeSpec.
 * Use `create(WorkflowNodeSpecSchema)` to create a new message.
 */
export const WorkflowNodeSpecSchema: GenMessage<WorkflowNodeSpec> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 18);

/**
 * A dependency: `child` runs only after `parent` completed.
 *
 * @generated from message tickwheel.v1.WorkflowEdge
 */
export type WorkflowEdge = Message<"tickwheel.v1.WorkflowEdge"> & {
  /**
   * Node id of the parent.
   *
   * @generated from field: string parent = 1;
   */
  parent: string;

  /**
   * Node id of the child.
   *
   * @generated from field: string child = 2;
   */
  child: string;
};

/**
 * Describes the message tickwheel.v1.WorkflowEdge.
 * Use `create(WorkflowEdgeSchema)` to create a new message.
 */
export const WorkflowEdgeSchema: GenMessage<WorkflowEdge> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 19);

/**
 * A workflow's header (its nodes and edges travel beside it).
 *
 * @generated from message tickwheel.v1.Workflow
 */
export type Workflow = Message<"tickwheel.v1.Workflow"> & {
  /**
   * UUIDv7 workflow id.
   *
   * @generated from field: string id = 1;
   */
  id: string;

  /**
   * Owning tenant id.
   *
   * @generated from field: string tenant_id = 2;
   */
  tenantId: string;

  /**
   * Display name (may be empty).
   *
   * @generated from field: string name = 3;
   */
  name: string;

  /**
   * Deduplication key (the workflow id when none was given).
   *
   * @generated from field: string idempotency_key = 4;
   */
  idempotencyKey: string;

  /**
   * Upstream failure policy.
   *
   * @generated from field: tickwheel.v1.UpstreamPolicy on_upstream_failure = 5;
   */
  onUpstreamFailure: UpstreamPolicy;

  /**
   * Number of nodes.
   *
   * @generated from field: uint32 node_count = 6;
   */
  nodeCount: number;

  /**
   * Creation time.
   *
   * @generated from field: google.protobuf.Timestamp created_at = 7;
   */
  createdAt?: Timestamp | undefined;
};

/**
 * Describes the message tickwheel.v1.Workflow.
 * Use `create(WorkflowSchema)` to create a new message.
 */
export const WorkflowSchema: GenMessage<Workflow> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 20);

/**
 * One node of a stored workflow.
 *
 * @generated from message tickwheel.v1.WorkflowNode
 */
export type WorkflowNode = Message<"tickwheel.v1.WorkflowNode"> & {
  /**
   * Node id as submitted.
   *
   * @generated from field: string id = 1;
   */
  id: string;

  /**
   * The node's task; `task.state` is the node's state. A child waiting for its
   * parents is SCHEDULED; one cancelled because a parent failed is CANCELLED with
   * `last_error` "upstream_failed".
   *
   * @generated from field: tickwheel.v1.Task task = 2;
   */
  task?: Task | undefined;
};

/**
 * Describes the message tickwheel.v1.WorkflowNode.
 * Use `create(WorkflowNodeSchema)` to create a new message.
 */
export const WorkflowNodeSchema: GenMessage<WorkflowNode> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 21);

/**
 * @generated from message tickwheel.v1.SubmitWorkflowRequest
 */
export type SubmitWorkflowRequest = Message<"tickwheel.v1.SubmitWorkflowRequest"> & {
  /**
   * Display name, up to 128 characters (may be empty).
   *
   * @generated from field: string name = 1;
   */
  name: string;

  /**
   * The nodes: 1 to 20,000 (the server's limit).
   *
   * @generated from field: repeated tickwheel.v1.WorkflowNodeSpec nodes = 2;
   */
  nodes: WorkflowNodeSpec[];

  /**
   * Parent -> child edges by node id: at most 100,000, no cycle, no self-loop;
   * a repeated edge counts once.
   *
   * @generated from field: repeated tickwheel.v1.WorkflowEdge edges = 3;
   */
  edges: WorkflowEdge[];

  /**
   * Deduplicates the whole workflow per tenant, up to 128 characters: a resubmit with
   * the same key returns the existing workflow and inserts nothing twice. Empty means
   * no deduplication.
   *
   * @generated from field: string idempotency_key = 4;
   */
  idempotencyKey: string;

  /**
   * What a failed or cancelled node does to its descendants.
   *
   * @generated from field: tickwheel.v1.UpstreamPolicy on_upstream_failure = 5;
   */
  onUpstreamFailure: UpstreamPolicy;
};

/**
 * Describes the message tickwheel.v1.SubmitWorkflowRequest.
 * Use `create(SubmitWorkflowRequestSchema)` to create a new message.
 */
export const SubmitWorkflowRequestSchema: GenMessage<SubmitWorkflowRequest> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 22);

/**
 * @generated from message tickwheel.v1.SubmitWorkflowResponse
 */
export type SubmitWorkflowResponse = Message<"tickwheel.v1.SubmitWorkflowResponse"> & {
  /**
   * The workflow (the existing one for an idempotent resubmit).
   *
   * @generated from field: tickwheel.v1.Workflow workflow = 1;
   */
  workflow?: Workflow | undefined;

  /**
   * False when the idempotency key already named a workflow.
   *
   * @generated from field: bool created = 2;
   */
  created: boolean;

  /**
   * Every node with its task, in submission order.
   *
   * @generated from field: repeated tickwheel.v1.WorkflowNode nodes = 3;
   */
  nodes: WorkflowNode[];
};

/**
 * Describes the message tickwheel.v1.SubmitWorkflowResponse.
 * Use `create(SubmitWorkflowResponseSchema)` to create a new message.
 */
export const SubmitWorkflowResponseSchema: GenMessage<SubmitWorkflowResponse> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 23);

/**
 * @generated from message tickwheel.v1.GetWorkflowRequest
 */
export type GetWorkflowRequest = Message<"tickwheel.v1.GetWorkflowRequest"> & {
  /**
   * Workflow id.
   *
   * @generated from field: string workflow_id = 1;
   */
  workflowId: string;
};

/**
 * Describes the message tickwheel.v1.GetWorkflowRequest.
 * Use `create(GetWorkflowRequestSchema)` to create a new message.
 */
export const GetWorkflowRequestSchema: GenMessage<GetWorkflowRequest> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 24);

/**
 * @generated from message tickwheel.v1.GetWorkflowResponse
 */
export type GetWorkflowResponse = Message<"tickwheel.v1.GetWorkflowResponse"> & {
  /**
   * The workflow.
   *
   * @generated from field: tickwheel.v1.Workflow workflow = 1;
   */
  workflow?: Workflow | undefined;

  /**
   * Every node with its task and state.
   *
   * @generated from field: repeated tickwheel.v1.WorkflowNode nodes = 2;
   */
  nodes: WorkflowNode[];

  /**
   * The edges, by node id.
   *
   * @generated from field: repeated tickwheel.v1.WorkflowEdge edges = 3;
   */
  edges: WorkflowEdge[];
};

/**
 * Describes the message tickwheel.v1.GetWorkflowResponse.
 * Use `create(GetWorkflowResponseSchema)` to create a new message.
 */
export const GetWorkflowResponseSchema: GenMessage<GetWorkflowResponse> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 25);

/**
 * A schedule to create. Exactly one of `cron` and `interval_s`.
 *
 * @generated from message tickwheel.v1.ScheduleSpec
 */
export type ScheduleSpec = Message<"tickwheel.v1.ScheduleSpec"> & {
  /**
   * Name, 1-128 characters, unique per tenant (ALREADY_EXISTS otherwise). Also the
   * job id a completion ledger row carries, which expectations match.
   *
   * @generated from field: string name = 1;
   */
  name: string;

  /**
   * Task type of every occurrence, as in TaskSpec.type.
   *
   * @generated from field: string task_type = 2;
   */
  taskType: string;

  /**
   * Payload of every occurrence (at most 1 MiB serialised by default).
   *
   * @generated from field: google.protobuf.Struct payload = 3;
   */
  payload?: JsonObject | undefined;

  /**
   * Cron expression: 5 fields, or 6 with seconds first (`*\/10 * * * * *`), evaluated
   * in `timezone`. Must fire at least once in the next ten years.
   *
   * @generated from field: string cron = 4;
   */
  cron: string;

  /**
   * Fixed interval in seconds, 1 to 315,360,000 (ten years); 0 when `cron` is set.
   *
   * @generated from field: double interval_s = 5;
   */
  intervalS: number;

  /**
   * IANA time zone of the cron expression (`Europe/Berlin`); empty means UTC.
   *
   * @generated from field: string timezone = 6;
   */
  timezone: string;

  /**
   * Priority pool of every occurrence.
   *
   * @generated from field: tickwheel.v1.Pool pool = 7;
   */
  pool: Pool;

  /**
   * Retries per occurrence; as TaskSpec.max_retries (unset means 3).
   *
   * @generated from field: uint32 max_retries = 8;
   */
  maxRetries: number;

  /**
   * Set to allow no retry at all.
   *
   * @generated from field: bool no_retries = 9;
   */
  noRetries: boolean;

  /**
   * Run-time limit per attempt in seconds, 0 to 604,800 (7 days); 0 means no limit
   * beyond the lease.
   *
   * @generated from field: double timeout_s = 10;
   */
  timeoutS: number;

  /**
   * What to do when an occurrence falls due while an earlier one is live.
   *
   * @generated from field: tickwheel.v1.OverlapPolicy overlap_policy = 11;
   */
  overlapPolicy: OverlapPolicy;

  /**
   * After downtime, occurrences older than this many seconds are skipped (the newest
   * inside the window still runs). 0 to 2,592,000 (30 days); unset means 60.
   *
   * @generated from field: optional double catchup_window_s = 12;
   */
  catchupWindowS?: number | undefined;

  /**
   * Late-only jitter per occurrence, deterministic, in [0, jitter_s]; 0 to 3,600.
   * Unset means a tenth of the schedule's period, at most the server's jitter window
   * (120 s): an hourly job spreads over 120 s, a minutely one over 6 s. 0 turns it off.
   * The Schedule answers the bound in force.
   *
   * @generated from field: optional double jitter_s = 13;
   */
  jitterS?: number | undefined;

  /**
   * Create it paused (no occurrences until ResumeSchedule).
   *
   * @generated from field: bool paused = 14;
   */
  paused: boolean;
};

/**
 * Describes the message tickwheel.v1.ScheduleSpec.
 * Use `create(ScheduleSpecSchema)` to create a new message.
 */
export const ScheduleSpecSchema: GenMessage<ScheduleSpec> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 26);

/**
 * A schedule as the scheduler holds it.
 *
 * @generated from message tickwheel.v1.Schedule
 */
export type Schedule = Message<"tickwheel.v1.Schedule"> & {
  /**
   * UUIDv7 schedule id.
   *
   * @generated from field: string id = 1;
   */
  id: string;

  /**
   * Owning tenant id.
   *
   * @generated from field: string tenant_id = 2;
   */
  tenantId: string;

  /**
   * Name (unique per tenant).
   *
   * @generated from field: string name = 3;
   */
  name: string;

  /**
   * Cron expression; empty for an interval schedule.
   *
   * @generated from field: string cron = 4;
   */
  cron: string;

  /**
   * Fixed interval in seconds; 0 for a cron schedule.
   *
   * @generated from field: double interval_s = 5;
   */
  intervalS: number;

  /**
   * IANA time zone.
   *
   * @generated from field: string timezone = 6;
   */
  timezone: string;

  /**
   * Task type of every occurrence.
   *
   * @generated from field: string task_type = 7;
   */
  taskType: string;

  /**
   * Payload of every occurrence.
   *
   * @generated from field: google.protobuf.Struct payload = 8;
   */
  payload?: JsonObject | undefined;

  /**
   * Pool of every occurrence.
   *
   * @generated from field: tickwheel.v1.Pool pool = 9;
   */
  pool: Pool;

  /**
   * Retries per occurrence.
   *
   * @generated from field: uint32 max_retries = 10;
   */
  maxRetries: number;

  /**
   * Run-time limit per attempt in seconds (0: none).
   *
   * @generated from field: double timeout_s = 11;
   */
  timeoutS: number;

  /**
   * Overlap policy.
   *
   * @generated from field: tickwheel.v1.OverlapPolicy overlap_policy = 12;
   */
  overlapPolicy: OverlapPolicy;

  /**
   * Catch-up window in seconds.
   *
   * @generated from field: double catchup_window_s = 13;
   */
  catchupWindowS: number;

  /**
   * Late-only jitter bound in seconds.
   *
   * @generated from field: double jitter_s = 14;
   */
  jitterS: number;

  /**
   * True while paused.
   *
   * @generated from field: bool paused = 15;
   */
  paused: boolean;

  /**
   * The next occurrence (unset when there is none).
   *
   * @generated from field: google.protobuf.Timestamp next_fire_at = 16;
   */
  nextFireAt?: Timestamp | undefined;

  /**
   * The last occurrence turned into a task (unset before the first).
   *
   * @generated from field: google.protobuf.Timestamp last_fired_at = 17;
   */
  lastFiredAt?: Timestamp | undefined;

  /**
   * An occurrence held by OVERLAP_POLICY_BUFFER_ONE until the live task ends.
   *
   * @generated from field: google.protobuf.Timestamp buffered_at = 18;
   */
  bufferedAt?: Timestamp | undefined;

  /**
   * Creation time.
   *
   * @generated from field: google.protobuf.Timestamp created_at = 19;
   */
  createdAt?: Timestamp | undefined;

  /**
   * Last change.
   *
   * @generated from field: google.protobuf.Timestamp updated_at = 20;
   */
  updatedAt?: Timestamp | undefined;

  /**
   * The next occurrences (up to 5, the first is `next_fire_at`; empty when paused or
   * when there is none), before jitter.
   *
   * @generated from field: repeated google.protobuf.Timestamp upcoming_fire_at = 21;
   */
  upcomingFireAt: Timestamp[];
};

/**
 * Describes the message tickwheel.v1.Schedule.
 * Use `create(ScheduleSchema)` to create a new message.
 */
export const ScheduleSchema: GenMessage<Schedule> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 27);

/**
 * @generated from message tickwheel.v1.CreateScheduleRequest
 */
export type CreateScheduleRequest = Message<"tickwheel.v1.CreateScheduleRequest"> & {
  /**
   * The schedule; its first occurrence is the first one after now.
   *
   * @generated from field: tickwheel.v1.ScheduleSpec schedule = 1;
   */
  schedule?: ScheduleSpec | undefined;
};

/**
 * Describes the message tickwheel.v1.CreateScheduleRequest.
 * Use `create(CreateScheduleRequestSchema)` to create a new message.
 */
export const CreateScheduleRequestSchema: GenMessage<CreateScheduleRequest> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 28);

/**
 * @generated from message tickwheel.v1.CreateScheduleResponse
 */
export type CreateScheduleResponse = Message<"tickwheel.v1.CreateScheduleResponse"> & {
  /**
   * The new schedule.
   *
   * @generated from field: tickwheel.v1.Schedule schedule = 1;
   */
  schedule?: Schedule | undefined;
};

/**
 * Describes the message tickwheel.v1.CreateScheduleResponse.
 * Use `create(CreateScheduleResponseSchema)` to create a new message.
 */
export const CreateScheduleResponseSchema: GenMessage<CreateScheduleResponse> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 29);

/**
 * @generated from message tickwheel.v1.GetScheduleRequest
 */
export type GetScheduleRequest = Message<"tickwheel.v1.GetScheduleRequest"> & {
  /**
   * Schedule id.
   *
   * @generated from field: string schedule_id = 1;
   */
  scheduleId: string;
};

/**
 * Describes the message tickwheel.v1.GetScheduleRequest.
 * Use `create(GetScheduleRequestSchema)` to create a new message.
 */
export const GetScheduleRequestSchema: GenMessage<GetScheduleRequest> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 30);

/**
 * @generated from message tickwheel.v1.GetScheduleResponse
 */
export type GetScheduleResponse = Message<"tickwheel.v1.GetScheduleResponse"> & {
  /**
   * The schedule.
   *
   * @generated from field: tickwheel.v1.Schedule schedule = 1;
   */
  schedule?: Schedule | undefined;
};

/**
 * Describes the message tickwheel.v1.GetScheduleResponse.
 * Use `create(GetScheduleResponseSchema)` to create a new message.
 */
export const GetScheduleResponseSchema: GenMessage<GetScheduleResponse> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 31);

/**
 * @generated from message tickwheel.v1.ListSchedulesRequest
 */
export type ListSchedulesRequest = Message<"tickwheel.v1.ListSchedulesRequest"> & {
};

/**
 * Describes the message tickwheel.v1.ListSchedulesRequest.
 * Use `create(ListSchedulesRequestSchema)` to create a new message.
 */
export const ListSchedulesRequestSchema: GenMessage<ListSchedulesRequest> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 32);

/**
 * @generated from message tickwheel.v1.ListSchedulesResponse
 */
export type ListSchedulesResponse = Message<"tickwheel.v1.ListSchedulesResponse"> & {
  /**
   * Every schedule of the tenant, by name.
   *
   * @generated from field: repeated tickwheel.v1.Schedule schedules = 1;
   */
  schedules: Schedule[];
};

/**
 * Describes the message tickwheel.v1.ListSchedulesResponse.
 * Use `create(ListSchedulesResponseSchema)` to create a new message.
 */
export const ListSchedulesResponseSchema: GenMessage<ListSchedulesResponse> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 33);

/**
 * @generated from message tickwheel.v1.PauseScheduleRequest
 */
export type PauseScheduleRequest = Message<"tickwheel.v1.PauseScheduleRequest"> & {
  /**
   * Schedule id.
   *
   * @generated from field: string schedule_id = 1;
   */
  scheduleId: string;
};

/**
 * Describes the message tickwheel.v1.PauseScheduleRequest.
 * Use `create(PauseScheduleRequestSchema)` to create a new message.
 */
export const PauseScheduleRequestSchema: GenMessage<PauseScheduleRequest> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 34);

/**
 * @generated from message tickwheel.v1.PauseScheduleResponse
 */
export type PauseScheduleResponse = Message<"tickwheel.v1.PauseScheduleResponse"> & {
  /**
   * The schedule, paused.
   *
   * @generated from field: tickwheel.v1.Schedule schedule = 1;
   */
  schedule?: Schedule | undefined;
};

/**
 * Describes the message tickwheel.v1.PauseScheduleResponse.
 * Use `create(PauseScheduleResponseSchema)` to create a new message.
 */
export const PauseScheduleResponseSchema: GenMessage<PauseScheduleResponse> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 35);

/**
 * @generated from message tickwheel.v1.ResumeScheduleRequest
 */
export type ResumeScheduleRequest = Message<"tickwheel.v1.ResumeScheduleRequest"> & {
  /**
   * Schedule id.
   *
   * @generated from field: string schedule_id = 1;
   */
  scheduleId: string;
};

/**
 * Describes the message tickwheel.v1.ResumeScheduleRequest.
 * Use `create(ResumeScheduleRequestSchema)` to create a new message.
 */
export const ResumeScheduleRequestSchema: GenMessage<ResumeScheduleRequest> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 36);

/**
 * @generated from message tickwheel.v1.ResumeScheduleResponse
 */
export type ResumeScheduleResponse = Message<"tickwheel.v1.ResumeScheduleResponse"> & {
  /**
   * The schedule, running, with its next occurrence after now.
   *
   * @generated from field: tickwheel.v1.Schedule schedule = 1;
   */
  schedule?: Schedule | undefined;
};

/**
 * Describes the message tickwheel.v1.ResumeScheduleResponse.
 * Use `create(ResumeScheduleResponseSchema)` to create a new message.
 */
export const ResumeScheduleResponseSchema: GenMessage<ResumeScheduleResponse> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 37);

/**
 * @generated from message tickwheel.v1.DeleteScheduleRequest
 */
export type DeleteScheduleRequest = Message<"tickwheel.v1.DeleteScheduleRequest"> & {
  /**
   * Schedule id.
   *
   * @generated from field: string schedule_id = 1;
   */
  scheduleId: string;
};

/**
 * Describes the message tickwheel.v1.DeleteScheduleRequest.
 * Use `create(DeleteScheduleRequestSchema)` to create a new message.
 */
export const DeleteScheduleRequestSchema: GenMessage<DeleteScheduleRequest> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 38);

/**
 * @generated from message tickwheel.v1.DeleteScheduleResponse
 */
export type DeleteScheduleResponse = Message<"tickwheel.v1.DeleteScheduleResponse"> & {
};

/**
 * Describes the message tickwheel.v1.DeleteScheduleResponse.
 * Use `create(DeleteScheduleResponseSchema)` to create a new message.
 */
export const DeleteScheduleResponseSchema: GenMessage<DeleteScheduleResponse> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 39);

/**
 * A job that must complete every `interval_s` (docs/watchdog.md).
 *
 * @generated from message tickwheel.v1.Expectation
 */
export type Expectation = Message<"tickwheel.v1.Expectation"> & {
  /**
   * Expectation id.
   *
   * @generated from field: string id = 1;
   */
  id: string;

  /**
   * Owning tenant id.
   *
   * @generated from field: string tenant_id = 2;
   */
  tenantId: string;

  /**
   * The job: matched against completed tasks' type and schedule name, unless
   * `schedule_id` is set. The key of the expectation per tenant.
   *
   * @generated from field: string job_id = 3;
   */
  jobId: string;

  /**
   * When set, the expectation matches this schedule's tasks.
   *
   * @generated from field: string schedule_id = 4;
   */
  scheduleId: string;

  /**
   * Expected completion interval in seconds.
   *
   * @generated from field: uint32 interval_s = 5;
   */
  intervalS: number;

  /**
   * Extra seconds allowed past the interval before the watchdog alerts.
   *
   * @generated from field: uint32 tolerance_s = 6;
   */
  toleranceS: number;

  /**
   * A running task older than this many seconds counts as stuck (0: no limit).
   *
   * @generated from field: uint32 max_runtime_s = 7;
   */
  maxRuntimeS: number;

  /**
   * Registration time (the watchdog counts from it until the first completion).
   *
   * @generated from field: google.protobuf.Timestamp created_at = 8;
   */
  createdAt?: Timestamp | undefined;

  /**
   * What the watchdog would say now (docs/watchdog.md), by the watchdog's own rule
   * over the same facts it reads.
   *
   * @generated from field: tickwheel.v1.ExpectationStatus status = 9;
   */
  status: ExpectationStatus;

  /**
   * The last matching completion (unset before the first).
   *
   * @generated from field: google.protobuf.Timestamp last_completed_at = 10;
   */
  lastCompletedAt?: Timestamp | undefined;

  /**
   * When the expectation becomes LATE unless a matching task completes first
   * (last completion, or registration, + interval + tolerance).
   *
   * @generated from field: google.protobuf.Timestamp deadline_at = 11;
   */
  deadlineAt?: Timestamp | undefined;
};

/**
 * Describes the message tickwheel.v1.Expectation.
 * Use `create(ExpectationSchema)` to create a new message.
 */
export const ExpectationSchema: GenMessage<Expectation> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 40);

/**
 * @generated from message tickwheel.v1.RegisterExpectationRequest
 */
export type RegisterExpectationRequest = Message<"tickwheel.v1.RegisterExpectationRequest"> & {
  /**
   * The job: a task type or schedule name, 1-128 characters. Required unless
   * `schedule_id` is set (then it defaults to the schedule's name). Registering the
   * same job id again replaces the expectation.
   *
   * @generated from field: string job_id = 1;
   */
  jobId: string;

  /**
   * A schedule of the caller's tenant whose tasks must complete (empty: match by job id).
   *
   * @generated from field: string schedule_id = 2;
   */
  scheduleId: string;

  /**
   * Expected completion interval in seconds, 1 to 31,622,400 (366 days).
   *
   * @generated from field: uint32 interval_s = 3;
   */
  intervalS: number;

  /**
   * Maximum tolerance past the interval in seconds, 0 to 31,622,400.
   *
   * @generated from field: uint32 tolerance_s = 4;
   */
  toleranceS: number;

  /**
   * Optional maximum runtime in seconds, up to 31,622,400; 0 means none.
   *
   * @generated from field: uint32 max_runtime_s = 5;
   */
  maxRuntimeS: number;
};

/**
 * Describes the message tickwheel.v1.RegisterExpectationRequest.
 * Use `create(RegisterExpectationRequestSchema)` to create a new message.
 */
export const RegisterExpectationRequestSchema: GenMessage<RegisterExpectationRequest> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 41);

/**
 * @generated from message tickwheel.v1.RegisterExpectationResponse
 */
export type RegisterExpectationResponse = Message<"tickwheel.v1.RegisterExpectationResponse"> & {
  /**
   * The stored expectation.
   *
   * @generated from field: tickwheel.v1.Expectation expectation = 1;
   */
  expectation?: Expectation | undefined;
};

/**
 * Describes the message tickwheel.v1.RegisterExpectationResponse.
 * Use `create(RegisterExpectationResponseSchema)` to create a new message.
 */
export const RegisterExpectationResponseSchema: GenMessage<RegisterExpectationResponse> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 42);

/**
 * @generated from message tickwheel.v1.ListExpectationsRequest
 */
export type ListExpectationsRequest = Message<"tickwheel.v1.ListExpectationsRequest"> & {
};

/**
 * Describes the message tickwheel.v1.ListExpectationsRequest.
 * Use `create(ListExpectationsRequestSchema)` to create a new message.
 */
export const ListExpectationsRequestSchema: GenMessage<ListExpectationsRequest> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 43);

/**
 * @generated from message tickwheel.v1.ListExpectationsResponse
 */
export type ListExpectationsResponse = Message<"tickwheel.v1.ListExpectationsResponse"> & {
  /**
   * Every expectation of the tenant, by job id.
   *
   * @generated from field: repeated tickwheel.v1.Expectation expectations = 1;
   */
  expectations: Expectation[];
};

/**
 * Describes the message tickwheel.v1.ListExpectationsResponse.
 * Use `create(ListExpectationsResponseSchema)` to create a new message.
 */
export const ListExpectationsResponseSchema: GenMessage<ListExpectationsResponse> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 44);

/**
 * One live node of the cluster.
 *
 * @generated from message tickwheel.v1.Member
 */
export type Member = Message<"tickwheel.v1.Member"> & {
  /**
   * The node's id (unique in the cluster; `serve --node-id`).
   *
   * @generated from field: string node_id = 1;
   */
  nodeId: string;

  /**
   * host:port a worker dials to reach this node (`serve --advertise`, default its
   * listen address). May be empty for a node that did not advertise one: skip it.
   *
   * @generated from field: string address = 2;
   */
  address: string;
};

/**
 * Describes the message tickwheel.v1.Member.
 * Use `create(MemberSchema)` to create a new message.
 */
export const MemberSchema: GenMessage<Member> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 45);

/**
 * The live nodes as one node sees them.
 *
 * @generated from message tickwheel.v1.MemberList
 */
export type MemberList = Message<"tickwheel.v1.MemberList"> & {
  /**
   * Every live node, this one included, ordered by node_id.
   *
   * @generated from field: repeated tickwheel.v1.Member members = 1;
   */
  members: Member[];

  /**
   * Grows whenever the list changes (on this node); compare lists from the same node
   * only. 0: unknown.
   *
   * @generated from field: uint64 revision = 2;
   */
  revision: bigint;

  /**
   * The id of the node that answered.
   *
   * @generated from field: string node_id = 3;
   */
  nodeId: string;
};

/**
 * Describes the message tickwheel.v1.MemberList.
 * Use `create(MemberListSchema)` to create a new message.
 */
export const MemberListSchema: GenMessage<MemberList> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 46);

/**
 * @generated from message tickwheel.v1.MembersRequest
 */
export type MembersRequest = Message<"tickwheel.v1.MembersRequest"> & {
};

/**
 * Describes the message tickwheel.v1.MembersRequest.
 * Use `create(MembersRequestSchema)` to create a new message.
 */
export const MembersRequestSchema: GenMessage<MembersRequest> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 47);

/**
 * @generated from message tickwheel.v1.MembersResponse
 */
export type MembersResponse = Message<"tickwheel.v1.MembersResponse"> & {
  /**
   * The live nodes.
   *
   * @generated from field: tickwheel.v1.MemberList members = 1;
   */
  members?: MemberList | undefined;
};

/**
 * Describes the message tickwheel.v1.MembersResponse.
 * Use `create(MembersResponseSchema)` to create a new message.
 */
export const MembersResponseSchema: GenMessage<MembersResponse> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 48);

/**
 * Identifies a task and the token under which the writer holds it.
 *
 * @generated from message tickwheel.v1.TaskRef
 */
export type TaskRef = Message<"tickwheel.v1.TaskRef"> & {
  /**
   * Task id.
   *
   * @generated from field: string task_id = 1;
   */
  taskId: string;

  /**
   * Fencing token of the assignment.
   *
   * @generated from field: int64 fencing_token = 2;
   */
  fencingToken: bigint;

  /**
   * Scheduled time of the task (from the assignment; lets the store prune).
   *
   * @generated from field: google.protobuf.Timestamp scheduled_at = 3;
   */
  scheduledAt?: Timestamp | undefined;
};

/**
 * Describes the message tickwheel.v1.TaskRef.
 * Use `create(TaskRefSchema)` to create a new message.
 */
export const TaskRefSchema: GenMessage<TaskRef> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 49);

/**
 * First message on a stream.
 *
 * @generated from message tickwheel.v1.Hello
 */
export type Hello = Message<"tickwheel.v1.Hello"> & {
  /**
   * Stable worker identity (host/pid or a name); used in leases and audit.
   *
   * @generated from field: string worker_id = 1;
   */
  workerId: string;

  /**
   * Task types this worker handles (at least one).
   *
   * @generated from field: repeated string task_types = 2;
   */
  taskTypes: string[];

  /**
   * Pools it takes work from (empty: all).
   *
   * @generated from field: repeated tickwheel.v1.Pool pools = 3;
   */
  pools: Pool[];

  /**
   * Free slots: how many tasks the server may push before more credit arrives.
   *
   * @generated from field: uint32 slots = 4;
   */
  slots: number;

  /**
   * False (the default): each task is DISPATCHED when pushed and the worker sends an
   * Ack (DISPATCHED -> RUNNING) before it runs the handler; a push the worker never
   * acknowledged goes back to PRELOADED at once when the stream closes, without using
   * an attempt. True: the worker starts a task the moment it receives it and sends no
   * Ack; the server commits the dispatch as RUNNING (PRELOADED -> RUNNING, token + 1,
   * lease set), which saves a write and two messages per task. A push then counts as
   * an attempt: if the worker never completes it (the stream broke with the push in
   * flight, the worker died), the lease expires and the task is retried
   * (RUNNING -> RETRYING), and the worker may still complete it after a reconnect.
   *
   * @generated from field: bool start_on_delivery = 5;
   */
  startOnDelivery: boolean;

  /**
   * True: every Assignment on this stream carries its payload and checkpoint as UTF-8
   * JSON bytes (`Assignment.payload_json`, `Assignment.checkpoint_json`) and leaves the
   * Structs unset; false (the default): as Structs. The bytes are the stored JSONB's
   * text, passed through without a conversion on the server (see "JSON as bytes" at
   * the top). Whatever this says, the worker may send results and checkpoints in
   * either form.
   *
   * @generated from field: bool json_bytes = 6;
   */
  jsonBytes: boolean;

  /**
   * True: the server sends this stream Backlog messages (how much work waits on this
   * node for it), so a worker with a stream to every node of a cluster can move its
   * free slots (its Credit) toward the nodes that have work. False (the default): no
   * Backlog is sent. Backlog is advisory; a worker that ignores it loses nothing.
   *
   * @generated from field: bool backlog = 7;
   */
  backlog: boolean;
};

/**
 * Describes the message tickwheel.v1.Hello.
 * Use `create(HelloSchema)` to create a new message.
 */
export const HelloSchema: GenMessage<Hello> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 50);

/**
 * More capacity: the server may push `slots` more tasks.
 *
 * @generated from message tickwheel.v1.Credit
 */
export type Credit = Message<"tickwheel.v1.Credit"> & {
  /**
   * Additional free slots.
   *
   * @generated from field: uint32 slots = 1;
   */
  slots: number;
};

/**
 * Describes the message tickwheel.v1.Credit.
 * Use `create(CreditSchema)` to create a new message.
 */
export const CreditSchema: GenMessage<Credit> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 51);

/**
 * Acknowledge receipt: DISPATCHED -> RUNNING (not sent by a worker whose Hello set
 * start_on_delivery). The Result answers each task: ok means the task may run. A server
 * may answer ok for a task it pushed on this stream under this token before the write
 * is durable (`tickwheel serve --ack-linger-ms`, default 500): the write follows within
 * that time, or together with the task's Completion if that comes first (one write for
 * both). Should the store still refuse it (the task was taken back meanwhile), the
 * task's later writes are answered not ok (stale_fencing_token), as for any lost lease.
 * Such an ack is answered the moment it is read, ahead of the Results of earlier
 * messages still being applied (unless one of them names the same task): match Results
 * by request_id, never by their order.
 *
 * @generated from message tickwheel.v1.Ack
 */
export type Ack = Message<"tickwheel.v1.Ack"> & {
  /**
   * Tasks acknowledged.
   *
   * @generated from field: repeated tickwheel.v1.TaskRef tasks = 1;
   */
  tasks: TaskRef[];
};

/**
 * Describes the message tickwheel.v1.Ack.
 * Use `create(AckSchema)` to create a new message.
 */
export const AckSchema: GenMessage<Ack> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 52);

/**
 * Keep leases alive.
 *
 * @generated from message tickwheel.v1.Heartbeat
 */
export type Heartbeat = Message<"tickwheel.v1.Heartbeat"> & {
  /**
   * Tasks still held.
   *
   * @generated from field: repeated tickwheel.v1.TaskRef tasks = 1;
   */
  tasks: TaskRef[];
};

/**
 * Describes the message tickwheel.v1.Heartbeat.
 * Use `create(HeartbeatSchema)` to create a new message.
 */
export const HeartbeatSchema: GenMessage<Heartbeat> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 53);

/**
 * Store progress so another worker can resume.
 *
 * @generated from message tickwheel.v1.Checkpoint
 */
export type Checkpoint = Message<"tickwheel.v1.Checkpoint"> & {
  /**
   * The task.
   *
   * @generated from field: tickwheel.v1.TaskRef task = 1;
   */
  task?: TaskRef | undefined;

  /**
   * Progress data (JSON object).
   *
   * @generated from field: google.protobuf.Struct data = 2;
   */
  data?: JsonObject | undefined;

  /**
   * `data` as UTF-8 JSON bytes: set this or `data`, not both (see "JSON as bytes" at
   * the top). At most 1 MiB.
   *
   * @generated from field: bytes data_json = 3;
   */
  dataJson: Uint8Array;
};

/**
 * Describes the message tickwheel.v1.Checkpoint.
 * Use `create(CheckpointSchema)` to create a new message.
 */
export const CheckpointSchema: GenMessage<Checkpoint> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 54);

/**
 * Successful completion.
 *
 * @generated from message tickwheel.v1.Completion
 */
export type Completion = Message<"tickwheel.v1.Completion"> & {
  /**
   * The task.
   *
   * @generated from field: tickwheel.v1.TaskRef task = 1;
   */
  task?: TaskRef | undefined;

  /**
   * Result (JSON object).
   *
   * @generated from field: google.protobuf.Struct result = 2;
   */
  result?: JsonObject | undefined;

  /**
   * `result` as UTF-8 JSON bytes: set this or `result`, not both (see "JSON as bytes"
   * at the top). At most 1 MiB.
   *
   * @generated from field: bytes result_json = 3;
   */
  resultJson: Uint8Array;
};

/**
 * Describes the message tickwheel.v1.Completion.
 * Use `create(CompletionSchema)` to create a new message.
 */
export const CompletionSchema: GenMessage<Completion> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 55);

/**
 * Several successful completions in one message (a busy worker sends these instead
 * of one Completion per task; the Result carries one TaskResult per item).
 *
 * @generated from message tickwheel.v1.Completions
 */
export type Completions = Message<"tickwheel.v1.Completions"> & {
  /**
   * The completions, each with its own task and token.
   *
   * @generated from field: repeated tickwheel.v1.Completion items = 1;
   */
  items: Completion[];
};

/**
 * Describes the message tickwheel.v1.Completions.
 * Use `create(CompletionsSchema)` to create a new message.
 */
export const CompletionsSchema: GenMessage<Completions> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 56);

/**
 * Failed attempt.
 *
 * @generated from message tickwheel.v1.Failure
 */
export type Failure = Message<"tickwheel.v1.Failure"> & {
  /**
   * The task.
   *
   * @generated from field: tickwheel.v1.TaskRef task = 1;
   */
  task?: TaskRef | undefined;

  /**
   * Error message.
   *
   * @generated from field: string error = 2;
   */
  error: string;

  /**
   * False to dead-letter at once.
   *
   * @generated from field: bool retryable = 3;
   */
  retryable: boolean;

  /**
   * The error's type (e.g. the exception class name), up to 128 characters; a type
   * listed in the task's RetryPolicy.non_retryable_error_types dead-letters at once.
   *
   * @generated from field: string error_type = 4;
   */
  errorType: string;

  /**
   * The error's traceback (the Python SDK sends the formatted exception), up to
   * 16,384 characters; kept as the task's `last_traceback` for the dashboard.
   *
   * @generated from field: string traceback = 5;
   */
  traceback: string;
};

/**
 * Describes the message tickwheel.v1.Failure.
 * Use `create(FailureSchema)` to create a new message.
 */
export const FailureSchema: GenMessage<Failure> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 57);

/**
 * Give a task back without using an attempt (graceful drain): RUNNING or DISPATCHED
 * -> PRELOADED, re-dispatched at once; the next worker finds `checkpoint` in its
 * Assignment. With a cancel pending the task becomes CANCELLED instead.
 *
 * @generated from message tickwheel.v1.Release
 */
export type Release = Message<"tickwheel.v1.Release"> & {
  /**
   * The task.
   *
   * @generated from field: tickwheel.v1.TaskRef task = 1;
   */
  task?: TaskRef | undefined;

  /**
   * Optional checkpoint written with the release.
   *
   * @generated from field: google.protobuf.Struct checkpoint = 2;
   */
  checkpoint?: JsonObject | undefined;

  /**
   * `checkpoint` as UTF-8 JSON bytes: set this or `checkpoint`, not both (see "JSON as
   * bytes" at the top). At most 1 MiB.
   *
   * @generated from field: bytes checkpoint_json = 3;
   */
  checkpointJson: Uint8Array;
};

/**
 * Describes the message tickwheel.v1.Release.
 * Use `create(ReleaseSchema)` to create a new message.
 */
export const ReleaseSchema: GenMessage<Release> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 58);

/**
 * The worker stopped a task after a cancel request.
 *
 * @generated from message tickwheel.v1.CancelConfirmed
 */
export type CancelConfirmed = Message<"tickwheel.v1.CancelConfirmed"> & {
  /**
   * The task.
   *
   * @generated from field: tickwheel.v1.TaskRef task = 1;
   */
  task?: TaskRef | undefined;
};

/**
 * Describes the message tickwheel.v1.CancelConfirmed.
 * Use `create(CancelConfirmedSchema)` to create a new message.
 */
export const CancelConfirmedSchema: GenMessage<CancelConfirmed> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 59);

/**
 * The worker stops taking work (first phase of a graceful drain): the server pushes
 * no more assignments on this stream and ignores later credit. Heartbeats, checkpoints,
 * completions and releases keep working until the worker half-closes the stream.
 *
 * @generated from message tickwheel.v1.Drain
 */
export type Drain = Message<"tickwheel.v1.Drain"> & {
};

/**
 * Describes the message tickwheel.v1.Drain.
 * Use `create(DrainSchema)` to create a new message.
 */
export const DrainSchema: GenMessage<Drain> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 60);

/**
 * A message from a worker on the stream.
 *
 * What a bad message costs. A problem with ONE message is answered in the `Result`
 * for its request_id (`code` != 0, `field` and `message` name the problem) and the
 * stream stays open; nothing of that message was applied. Only a protocol violation
 * ends the stream, with the status below.
 *
 * | the worker sent                                     | answer                          |
 * |-----------------------------------------------------|---------------------------------|
 * | a message with no `kind` set (empty WorkerMessage)  | Result: INVALID_ARGUMENT, "kind"|
 * | `credit.slots` 0 or above the limit                 | Result: INVALID_ARGUMENT        |
 * | a TaskRef without `task_id` (not a UUID),           | Result: INVALID_ARGUMENT, the   |
 * |   `fencing_token` <= 0, or without `scheduled_at`   |   field, e.g. ack.tasks[2].scheduled_at |
 * | a missing `task` (checkpoint, completion, failure,  | Result: INVALID_ARGUMENT        |
 * |   release, cancel_confirmed)                        |                                 |
 * | the same task twice in one message                  | Result: INVALID_ARGUMENT        |
 * | a checkpoint/result/error over its size limit, a    | Result: INVALID_ARGUMENT or     |
 * |   non-object checkpoint                             |   RESOURCE_EXHAUSTED            |
 * | the store briefly unavailable                       | Result: UNAVAILABLE (retry)     |
 * | an unknown task id, another tenant's task           | Result: code 0, TaskResult      |
 * |                                                     |   ok=false reason "not_found"   |
 * | a stale token, a task another worker/stream holds,  | Result: code 0, TaskResult      |
 * |   a task no longer leased                           |   ok=false "stale_fencing_token"|
 * | `drain`; `credit` while draining (ignored)          | nothing                         |
 * | --- protocol violations: the stream ends ---        |                                 |
 * | a first message that is not `hello`                 | INVALID_ARGUMENT "hello: ..."   |
 * | an invalid `hello` (worker_id, task_types, pools,   | INVALID_ARGUMENT naming the     |
 * |   slots)                                            |   field                         |
 * | no `hello` within the hello timeout                 | INVALID_ARGUMENT "hello: ..."   |
 * | a second `hello` on the same stream                 | INVALID_ARGUMENT "hello: sent twice" |
 * | bytes that do not decode as a WorkerMessage         | INVALID_ARGUMENT                |
 * | a bad or revoked API key                            | UNAUTHENTICATED                 |
 *
 * A refused message with request_id 0 is answered too (a Result with request_id 0),
 * so a worker that asked for no Result still learns why.
 *
 * @generated from message tickwheel.v1.WorkerMessage
 */
export type WorkerMessage = Message<"tickwheel.v1.WorkerMessage"> & {
  /**
   * Correlates the server's Result with this message (0: no result wanted; a refusal
   * is still answered, with request_id 0).
   *
   * @generated from field: uint64 request_id = 1;
   */
  requestId: bigint;

  /**
   * @generated from oneof tickwheel.v1.WorkerMessage.kind
   */
  kind: {
    /**
     * @generated from field: tickwheel.v1.Hello hello = 2;
     */
    value: Hello;
    case: "hello";
  } | {
    /**
     * @generated from field: tickwheel.v1.Credit credit = 3;
     */
    value: Credit;
    case: "credit";
  } | {
    /**
     * @generated from field: tickwheel.v1.Ack ack = 4;
     */
    value: Ack;
    case: "ack";
  } | {
    /**
     * @generated from field: tickwheel.v1.Heartbeat heartbeat = 5;
     */
    value: Heartbeat;
    case: "heartbeat";
  } | {
    /**
     * @generated from field: tickwheel.v1.Checkpoint checkpoint = 6;
     */
    value: Checkpoint;
    case: "checkpoint";
  } | {
    /**
     * @generated from field: tickwheel.v1.Completion completion = 7;
     */
    value: Completion;
    case: "completion";
  } | {
    /**
     * @generated from field: tickwheel.v1.Failure failure = 8;
     */
    value: Failure;
    case: "failure";
  } | {
    /**
     * @generated from field: tickwheel.v1.Release release = 9;
     */
    value: Release;
    case: "release";
  } | {
    /**
     * @generated from field: tickwheel.v1.CancelConfirmed cancel_confirmed = 10;
     */
    value: CancelConfirmed;
    case: "cancelConfirmed";
  } | {
    /**
     * @generated from field: tickwheel.v1.Drain drain = 11;
     */
    value: Drain;
    case: "drain";
  } | {
    /**
     * @generated from field: tickwheel.v1.Completions completions = 12;
     */
    value: Completions;
    case: "completions";
  } | { case: undefined; value?: undefined };
};

/**
 * Describes the message tickwheel.v1.WorkerMessage.
 * Use `create(WorkerMessageSchema)` to create a new message.
 */
export const WorkerMessageSchema: GenMessage<WorkerMessage> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 61);

/**
 * One task pushed to a worker.
 *
 * @generated from message tickwheel.v1.Assignment
 */
export type Assignment = Message<"tickwheel.v1.Assignment"> & {
  /**
   * Task id.
   *
   * @generated from field: string task_id = 1;
   */
  taskId: string;

  /**
   * Owning tenant.
   *
   * @generated from field: string tenant_id = 2;
   */
  tenantId: string;

  /**
   * Task type.
   *
   * @generated from field: string type = 3;
   */
  type: string;

  /**
   * Input payload.
   *
   * @generated from field: google.protobuf.Struct payload = 4;
   */
  payload?: JsonObject | undefined;

  /**
   * Fencing token: send it with every write for this task.
   *
   * @generated from field: int64 fencing_token = 5;
   */
  fencingToken: bigint;

  /**
   * 1 for the first attempt.
   *
   * @generated from field: uint32 attempt = 6;
   */
  attempt: number;

  /**
   * Retries allowed.
   *
   * @generated from field: uint32 max_retries = 7;
   */
  maxRetries: number;

  /**
   * Scheduled time (send back in TaskRef).
   *
   * @generated from field: google.protobuf.Timestamp scheduled_at = 8;
   */
  scheduledAt?: Timestamp | undefined;

  /**
   * Effective due time.
   *
   * @generated from field: google.protobuf.Timestamp due_at = 9;
   */
  dueAt?: Timestamp | undefined;

  /**
   * Lease expiry; heartbeat before it.
   *
   * @generated from field: google.protobuf.Timestamp lease_expires_at = 10;
   */
  leaseExpiresAt?: Timestamp | undefined;

  /**
   * Last checkpoint, to resume from.
   *
   * @generated from field: google.protobuf.Struct checkpoint = 11;
   */
  checkpoint?: JsonObject | undefined;

  /**
   * Trace context from submission.
   *
   * @generated from field: tickwheel.v1.TraceContext trace_context = 12;
   */
  traceContext?: TraceContext | undefined;

  /**
   * Pool.
   *
   * @generated from field: tickwheel.v1.Pool pool = 13;
   */
  pool: Pool;

  /**
   * Run-time limit in seconds (0: none).
   *
   * @generated from field: double timeout_s = 14;
   */
  timeoutS: number;

  /**
   * Context of the server's dispatch span for this attempt, when the server records
   * spans (empty otherwise). Workers parent their processing span on it and link it
   * to `trace_context`, so submit, every dispatch and every attempt form one trace.
   *
   * @generated from field: tickwheel.v1.TraceContext dispatch_trace_context = 15;
   */
  dispatchTraceContext?: TraceContext | undefined;

  /**
   * `payload` as UTF-8 JSON bytes, instead of `payload`, on a stream whose Hello set
   * `json_bytes` (the stored JSONB's text; see "JSON as bytes" at the top).
   *
   * @generated from field: bytes payload_json = 16;
   */
  payloadJson: Uint8Array;

  /**
   * `checkpoint` as UTF-8 JSON bytes, instead of `checkpoint`, on a stream whose Hello
   * set `json_bytes`; empty when the task has no checkpoint.
   *
   * @generated from field: bytes checkpoint_json = 17;
   */
  checkpointJson: Uint8Array;
};

/**
 * Describes the message tickwheel.v1.Assignment.
 * Use `create(AssignmentSchema)` to create a new message.
 */
export const AssignmentSchema: GenMessage<Assignment> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 62);

/**
 * Several due tasks in one message.
 *
 * @generated from message tickwheel.v1.Assignments
 */
export type Assignments = Message<"tickwheel.v1.Assignments"> & {
  /**
   * The tasks.
   *
   * @generated from field: repeated tickwheel.v1.Assignment tasks = 1;
   */
  tasks: Assignment[];
};

/**
 * Describes the message tickwheel.v1.Assignments.
 * Use `create(AssignmentsSchema)` to create a new message.
 */
export const AssignmentsSchema: GenMessage<Assignments> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 63);

/**
 * Stop a running task: a client cancelled it. The worker answers with
 * CancelConfirmed (RUNNING -> CANCELLED); if it never does, lease expiry cancels it.
 *
 * @generated from message tickwheel.v1.CancelRequest
 */
export type CancelRequest = Message<"tickwheel.v1.CancelRequest"> & {
  /**
   * The task.
   *
   * @generated from field: tickwheel.v1.TaskRef task = 1;
   */
  task?: TaskRef | undefined;
};

/**
 * Describes the message tickwheel.v1.CancelRequest.
 * Use `create(CancelRequestSchema)` to create a new message.
 */
export const CancelRequestSchema: GenMessage<CancelRequest> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 64);

/**
 * Per-task outcome of a write.
 *
 * @generated from message tickwheel.v1.TaskResult
 */
export type TaskResult = Message<"tickwheel.v1.TaskResult"> & {
  /**
   * Task id.
   *
   * @generated from field: string task_id = 1;
   */
  taskId: string;

  /**
   * True when the write was accepted.
   *
   * @generated from field: bool ok = 2;
   */
  ok: boolean;

  /**
   * Why it was rejected: "stale_fencing_token", "not_found", ...
   *
   * @generated from field: string reason = 3;
   */
  reason: string;
};

/**
 * Describes the message tickwheel.v1.TaskResult.
 * Use `create(TaskResultSchema)` to create a new message.
 */
export const TaskResultSchema: GenMessage<TaskResult> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 65);

/**
 * Answer to a worker message that had a request_id (or that was refused).
 *
 * @generated from message tickwheel.v1.Result
 */
export type Result = Message<"tickwheel.v1.Result"> & {
  /**
   * The request_id of the worker message.
   *
   * @generated from field: uint64 request_id = 1;
   */
  requestId: bigint;

  /**
   * One per task in the message (empty when `code` != 0).
   *
   * @generated from field: repeated tickwheel.v1.TaskResult results = 2;
   */
  results: TaskResult[];

  /**
   * 0 (OK): the message was applied and `results` says how each task fared. Otherwise
   * the gRPC status code number (3 INVALID_ARGUMENT, 8 RESOURCE_EXHAUSTED,
   * 14 UNAVAILABLE, ...) of the reason the whole message was refused: nothing of it
   * was applied and the stream stays open (see the table at WorkerMessage).
   *
   * @generated from field: uint32 code = 3;
   */
  code: number;

  /**
   * Human-readable reason when `code` != 0 ("ack.tasks[0].scheduled_at: required").
   *
   * @generated from field: string message = 4;
   */
  message: string;

  /**
   * The offending field's path when `code` != 0 and one field is at fault
   * ("ack.tasks[0].scheduled_at", "credit.slots", "kind"); empty otherwise.
   *
   * @generated from field: string field = 5;
   */
  field: string;
};

/**
 * Describes the message tickwheel.v1.Result.
 * Use `create(ResultSchema)` to create a new message.
 */
export const ResultSchema: GenMessage<Result> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 66);

/**
 * Session accepted.
 *
 * @generated from message tickwheel.v1.Welcome
 */
export type Welcome = Message<"tickwheel.v1.Welcome"> & {
  /**
   * Session id assigned by the server.
   *
   * @generated from field: string session_id = 1;
   */
  sessionId: string;

  /**
   * Lease length in seconds.
   *
   * @generated from field: double lease_ttl_s = 2;
   */
  leaseTtlS: number;

  /**
   * Suggested heartbeat interval in seconds.
   *
   * @generated from field: double heartbeat_interval_s = 3;
   */
  heartbeatIntervalS: number;

  /**
   * The cluster's live nodes, as WorkerService.Members answers: a worker that wants
   * every shard's work opens a stream to each (see Members).
   *
   * @generated from field: tickwheel.v1.MemberList members = 4;
   */
  members?: MemberList | undefined;

  /**
   * True: this server will send Backlog messages on this stream (the Hello asked for
   * them and the node reports backlogs). A worker that shares its slots between
   * several nodes may then keep only one credit on this stream while it reports no
   * waiting work; with False it should give this stream an even share instead.
   *
   * @generated from field: bool backlog = 5;
   */
  backlog: boolean;
};

/**
 * Describes the message tickwheel.v1.Welcome.
 * Use `create(WelcomeSchema)` to create a new message.
 */
export const WelcomeSchema: GenMessage<Welcome> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 67);

/**
 * How much work waits on this node for this stream: tasks due now (in the node's
 * ready queues) of the stream's tenant (every tenant for a shared worker), task types
 * and pools, that the node would push if the stream had credit. Sent only to a stream
 * whose Hello set `backlog`: once after the welcome when work waits, then when the
 * figure changes by at least a tenth (and at least one task), or changes at all and
 * the last report is over a second old; never more often than the node's backlog
 * interval (200 ms by default), from a timer, not per task.
 *
 * Backlog is ADVISORY. It grants nothing and takes nothing: the node still pushes only
 * against Credit, and a worker that ignores Backlog (or a server that never sends it)
 * loses no task and breaks no rule. A worker with a stream to every node of a cluster
 * uses it to decide where its free slots go: each freed slot is granted (as Credit)
 * to the stream whose node reports the most waiting work not already covered by the
 * credit it holds, keeping at least one credit on every stream so every node can
 * always reach it (docs/cluster.md, "How workers reach shards"). The figure is a
 * snapshot: it may be stale by the time it arrives, and it counts tasks another
 * stream of the same worker (or another worker) may take first.
 *
 * @generated from message tickwheel.v1.Backlog
 */
export type Backlog = Message<"tickwheel.v1.Backlog"> & {
  /**
   * Tasks waiting on this node for this session (0: none any more).
   *
   * @generated from field: uint64 waiting = 1;
   */
  waiting: bigint;
};

/**
 * Describes the message tickwheel.v1.Backlog.
 * Use `create(BacklogSchema)` to create a new message.
 */
export const BacklogSchema: GenMessage<Backlog> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 68);

/**
 * A message from the server on the stream.
 *
 * @generated from message tickwheel.v1.ServerMessage
 */
export type ServerMessage = Message<"tickwheel.v1.ServerMessage"> & {
  /**
   * @generated from oneof tickwheel.v1.ServerMessage.kind
   */
  kind: {
    /**
     * @generated from field: tickwheel.v1.Welcome welcome = 1;
     */
    value: Welcome;
    case: "welcome";
  } | {
    /**
     * @generated from field: tickwheel.v1.Assignments assignments = 2;
     */
    value: Assignments;
    case: "assignments";
  } | {
    /**
     * @generated from field: tickwheel.v1.CancelRequest cancel = 3;
     */
    value: CancelRequest;
    case: "cancel";
  } | {
    /**
     * @generated from field: tickwheel.v1.Result result = 4;
     */
    value: Result;
    case: "result";
  } | {
    /**
     * Waiting work on this node for this session (see Backlog).
     *
     * @generated from field: tickwheel.v1.Backlog backlog = 5;
     */
    value: Backlog;
    case: "backlog";
  } | { case: undefined; value?: undefined };
};

/**
 * Describes the message tickwheel.v1.ServerMessage.
 * Use `create(ServerMessageSchema)` to create a new message.
 */
export const ServerMessageSchema: GenMessage<ServerMessage> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 69);

/**
 * @generated from message tickwheel.v1.CompleteTaskRequest
 */
export type CompleteTaskRequest = Message<"tickwheel.v1.CompleteTaskRequest"> & {
  /**
   * The task and token.
   *
   * @generated from field: tickwheel.v1.TaskRef task = 1;
   */
  task?: TaskRef | undefined;

  /**
   * Result: at most 1 MiB serialised, nested at most 32 levels (as every result and
   * checkpoint, on the stream too).
   *
   * @generated from field: google.protobuf.Struct result = 2;
   */
  result?: JsonObject | undefined;

  /**
   * `result` as UTF-8 JSON bytes: set this or `result`, not both (see "JSON as bytes"
   * at the top). At most 1 MiB.
   *
   * @generated from field: bytes result_json = 3;
   */
  resultJson: Uint8Array;
};

/**
 * Describes the message tickwheel.v1.CompleteTaskRequest.
 * Use `create(CompleteTaskRequestSchema)` to create a new message.
 */
export const CompleteTaskRequestSchema: GenMessage<CompleteTaskRequest> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 70);

/**
 * @generated from message tickwheel.v1.CompleteTaskResponse
 */
export type CompleteTaskResponse = Message<"tickwheel.v1.CompleteTaskResponse"> & {
  /**
   * The task after completion.
   *
   * @generated from field: tickwheel.v1.Task task = 1;
   */
  task?: Task | undefined;
};

/**
 * Describes the message tickwheel.v1.CompleteTaskResponse.
 * Use `create(CompleteTaskResponseSchema)` to create a new message.
 */
export const CompleteTaskResponseSchema: GenMessage<CompleteTaskResponse> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 71);

/**
 * @generated from message tickwheel.v1.FailTaskRequest
 */
export type FailTaskRequest = Message<"tickwheel.v1.FailTaskRequest"> & {
  /**
   * The task and token.
   *
   * @generated from field: tickwheel.v1.TaskRef task = 1;
   */
  task?: TaskRef | undefined;

  /**
   * Error message.
   *
   * @generated from field: string error = 2;
   */
  error: string;

  /**
   * False to dead-letter at once.
   *
   * @generated from field: bool retryable = 3;
   */
  retryable: boolean;

  /**
   * As Failure.error_type.
   *
   * @generated from field: string error_type = 4;
   */
  errorType: string;

  /**
   * As Failure.traceback.
   *
   * @generated from field: string traceback = 5;
   */
  traceback: string;
};

/**
 * Describes the message tickwheel.v1.FailTaskRequest.
 * Use `create(FailTaskRequestSchema)` to create a new message.
 */
export const FailTaskRequestSchema: GenMessage<FailTaskRequest> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 72);

/**
 * @generated from message tickwheel.v1.FailTaskResponse
 */
export type FailTaskResponse = Message<"tickwheel.v1.FailTaskResponse"> & {
  /**
   * The task after the failure: RETRYING with `due_at` = the retry time (now plus the
   * backoff) while attempts remain and `retryable` is set, else DEAD_LETTER. A RETRYING
   * task stays RETRYING while its backoff runs; shortly (about a second) before
   * `due_at` the server moves it to PRELOADED and then dispatches it with a new token.
   *
   * @generated from field: tickwheel.v1.Task task = 1;
   */
  task?: Task | undefined;
};

/**
 * Describes the message tickwheel.v1.FailTaskResponse.
 * Use `create(FailTaskResponseSchema)` to create a new message.
 */
export const FailTaskResponseSchema: GenMessage<FailTaskResponse> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 73);

/**
 * The limit of every concurrency key of one task type of a tenant.
 *
 * @generated from message tickwheel.v1.ConcurrencyLimit
 */
export type ConcurrencyLimit = Message<"tickwheel.v1.ConcurrencyLimit"> & {
  /**
   * Tenant id.
   *
   * @generated from field: string tenant_id = 1;
   */
  tenantId: string;

  /**
   * Task type (1-64 characters).
   *
   * @generated from field: string type = 2;
   */
  type: string;

  /**
   * At most this many tasks of one key of `type` are DISPATCHED or RUNNING at once,
   * 1 to 100,000. A type without a limit set: 1 (each key is a mutex).
   *
   * @generated from field: uint32 limit = 3;
   */
  limit: number;
};

/**
 * Describes the message tickwheel.v1.ConcurrencyLimit.
 * Use `create(ConcurrencyLimitSchema)` to create a new message.
 */
export const ConcurrencyLimitSchema: GenMessage<ConcurrencyLimit> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 74);

/**
 * @generated from message tickwheel.v1.SetConcurrencyLimitRequest
 */
export type SetConcurrencyLimitRequest = Message<"tickwheel.v1.SetConcurrencyLimitRequest"> & {
  /**
   * Tenant id (an admin key of a tenant names its own).
   *
   * @generated from field: string tenant_id = 1;
   */
  tenantId: string;

  /**
   * Task type (1-64 characters).
   *
   * @generated from field: string type = 2;
   */
  type: string;

  /**
   * 1 to 100,000; 0 clears the type's limit (back to 1 per key).
   *
   * @generated from field: uint32 limit = 3;
   */
  limit: number;
};

/**
 * Describes the message tickwheel.v1.SetConcurrencyLimitRequest.
 * Use `create(SetConcurrencyLimitRequestSchema)` to create a new message.
 */
export const SetConcurrencyLimitRequestSchema: GenMessage<SetConcurrencyLimitRequest> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 75);

/**
 * @generated from message tickwheel.v1.SetConcurrencyLimitResponse
 */
export type SetConcurrencyLimitResponse = Message<"tickwheel.v1.SetConcurrencyLimitResponse"> & {
  /**
   * The limit in force after the call.
   *
   * @generated from field: tickwheel.v1.ConcurrencyLimit limit = 1;
   */
  limit?: ConcurrencyLimit | undefined;
};

/**
 * Describes the message tickwheel.v1.SetConcurrencyLimitResponse.
 * Use `create(SetConcurrencyLimitResponseSchema)` to create a new message.
 */
export const SetConcurrencyLimitResponseSchema: GenMessage<SetConcurrencyLimitResponse> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 76);

/**
 * @generated from message tickwheel.v1.ListConcurrencyLimitsRequest
 */
export type ListConcurrencyLimitsRequest = Message<"tickwheel.v1.ListConcurrencyLimitsRequest"> & {
  /**
   * Tenant id (an admin key of a tenant names its own).
   *
   * @generated from field: string tenant_id = 1;
   */
  tenantId: string;
};

/**
 * Describes the message tickwheel.v1.ListConcurrencyLimitsRequest.
 * Use `create(ListConcurrencyLimitsRequestSchema)` to create a new message.
 */
export const ListConcurrencyLimitsRequestSchema: GenMessage<ListConcurrencyLimitsRequest> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 77);

/**
 * @generated from message tickwheel.v1.ListConcurrencyLimitsResponse
 */
export type ListConcurrencyLimitsResponse = Message<"tickwheel.v1.ListConcurrencyLimitsResponse"> & {
  /**
   * The limits set, by type.
   *
   * @generated from field: repeated tickwheel.v1.ConcurrencyLimit limits = 1;
   */
  limits: ConcurrencyLimit[];
};

/**
 * Describes the message tickwheel.v1.ListConcurrencyLimitsResponse.
 * Use `create(ListConcurrencyLimitsResponseSchema)` to create a new message.
 */
export const ListConcurrencyLimitsResponseSchema: GenMessage<ListConcurrencyLimitsResponse> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 78);

/**
 * A tenant and its quotas.
 *
 * @generated from message tickwheel.v1.Tenant
 */
export type Tenant = Message<"tickwheel.v1.Tenant"> & {
  /**
   * Tenant id (UUID).
   *
   * @generated from field: string id = 1;
   */
  id: string;

  /**
   * Display name, 1-128 characters.
   *
   * @generated from field: string name = 2;
   */
  name: string;

  /**
   * STANDARD, ENTERPRISE or SYSTEM.
   *
   * @generated from field: string tier = 3;
   */
  tier: string;

  /**
   * Dispatch rate limit, tasks per second.
   *
   * @generated from field: uint32 rate_limit_rps = 4;
   */
  rateLimitRps: number;

  /**
   * Maximum tasks in flight.
   *
   * @generated from field: uint32 max_concurrent_workers = 5;
   */
  maxConcurrentWorkers: number;

  /**
   * Home region: where the tenant's rows are stored and its tasks run (see Regions at
   * the top). On create: empty means the region of the node that creates it; else a
   * region name of the directory (INVALID_ARGUMENT "tenant.home_region: unknown
   * region ..." otherwise), and the call is forwarded there. The tenant's API keys
   * name this region (`tw_<region>.<token>`).
   *
   * @generated from field: string home_region = 6;
   */
  homeRegion: string;
};

/**
 * Describes the message tickwheel.v1.Tenant.
 * Use `create(TenantSchema)` to create a new message.
 */
export const TenantSchema: GenMessage<Tenant> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 79);

/**
 * @generated from message tickwheel.v1.CreateTenantRequest
 */
export type CreateTenantRequest = Message<"tickwheel.v1.CreateTenantRequest"> & {
  /**
   * Name, tier and quotas (id is ignored; zero quotas mean defaults).
   *
   * @generated from field: tickwheel.v1.Tenant tenant = 1;
   */
  tenant?: Tenant | undefined;
};

/**
 * Describes the message tickwheel.v1.CreateTenantRequest.
 * Use `create(CreateTenantRequestSchema)` to create a new message.
 */
export const CreateTenantRequestSchema: GenMessage<CreateTenantRequest> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 80);

/**
 * @generated from message tickwheel.v1.CreateTenantResponse
 */
export type CreateTenantResponse = Message<"tickwheel.v1.CreateTenantResponse"> & {
  /**
   * The new tenant.
   *
   * @generated from field: tickwheel.v1.Tenant tenant = 1;
   */
  tenant?: Tenant | undefined;
};

/**
 * Describes the message tickwheel.v1.CreateTenantResponse.
 * Use `create(CreateTenantResponseSchema)` to create a new message.
 */
export const CreateTenantResponseSchema: GenMessage<CreateTenantResponse> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 81);

/**
 * @generated from message tickwheel.v1.GetTenantRequest
 */
export type GetTenantRequest = Message<"tickwheel.v1.GetTenantRequest"> & {
  /**
   * Tenant id.
   *
   * @generated from field: string tenant_id = 1;
   */
  tenantId: string;
};

/**
 * Describes the message tickwheel.v1.GetTenantRequest.
 * Use `create(GetTenantRequestSchema)` to create a new message.
 */
export const GetTenantRequestSchema: GenMessage<GetTenantRequest> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 82);

/**
 * @generated from message tickwheel.v1.GetTenantResponse
 */
export type GetTenantResponse = Message<"tickwheel.v1.GetTenantResponse"> & {
  /**
   * The tenant.
   *
   * @generated from field: tickwheel.v1.Tenant tenant = 1;
   */
  tenant?: Tenant | undefined;
};

/**
 * Describes the message tickwheel.v1.GetTenantResponse.
 * Use `create(GetTenantResponseSchema)` to create a new message.
 */
export const GetTenantResponseSchema: GenMessage<GetTenantResponse> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 83);

/**
 * @generated from message tickwheel.v1.UpdateTenantRequest
 */
export type UpdateTenantRequest = Message<"tickwheel.v1.UpdateTenantRequest"> & {
  /**
   * Tenant id.
   *
   * @generated from field: string tenant_id = 1;
   */
  tenantId: string;

  /**
   * New tier (empty: unchanged).
   *
   * @generated from field: string tier = 2;
   */
  tier: string;

  /**
   * New rate limit (0: unchanged).
   *
   * @generated from field: uint32 rate_limit_rps = 3;
   */
  rateLimitRps: number;

  /**
   * New concurrency cap (0: unchanged).
   *
   * @generated from field: uint32 max_concurrent_workers = 4;
   */
  maxConcurrentWorkers: number;
};

/**
 * Describes the message tickwheel.v1.UpdateTenantRequest.
 * Use `create(UpdateTenantRequestSchema)` to create a new message.
 */
export const UpdateTenantRequestSchema: GenMessage<UpdateTenantRequest> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 84);

/**
 * @generated from message tickwheel.v1.UpdateTenantResponse
 */
export type UpdateTenantResponse = Message<"tickwheel.v1.UpdateTenantResponse"> & {
  /**
   * The tenant after the change.
   *
   * @generated from field: tickwheel.v1.Tenant tenant = 1;
   */
  tenant?: Tenant | undefined;
};

/**
 * Describes the message tickwheel.v1.UpdateTenantResponse.
 * Use `create(UpdateTenantResponseSchema)` to create a new message.
 */
export const UpdateTenantResponseSchema: GenMessage<UpdateTenantResponse> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 85);

/**
 * @generated from message tickwheel.v1.CreateApiKeyRequest
 */
export type CreateApiKeyRequest = Message<"tickwheel.v1.CreateApiKeyRequest"> & {
  /**
   * Tenant id.
   *
   * @generated from field: string tenant_id = 1;
   */
  tenantId: string;

  /**
   * Label for the key.
   *
   * @generated from field: string name = 2;
   */
  name: string;

  /**
   * What the key may do: any of "submit", "read", "work", "admin" (see ApiKey.scopes).
   * Empty: "submit", "read" and "work" (everything but admin, as keys made before
   * scopes existed).
   *
   * @generated from field: repeated string scopes = 3;
   */
  scopes: string[];

  /**
   * When the key stops working (must be in the future); unset: never.
   *
   * @generated from field: google.protobuf.Timestamp expires_at = 4;
   */
  expiresAt?: Timestamp | undefined;
};

/**
 * Describes the message tickwheel.v1.CreateApiKeyRequest.
 * Use `create(CreateApiKeyRequestSchema)` to create a new message.
 */
export const CreateApiKeyRequestSchema: GenMessage<CreateApiKeyRequest> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 86);

/**
 * @generated from message tickwheel.v1.CreateApiKeyResponse
 */
export type CreateApiKeyResponse = Message<"tickwheel.v1.CreateApiKeyResponse"> & {
  /**
   * Key id.
   *
   * @generated from field: string key_id = 1;
   */
  keyId: string;

  /**
   * The secret to send in `x-api-key`; shown only once, stored hashed. It names the
   * tenant's home region: `tw_<region>.<token>` (see Regions at the top).
   *
   * @generated from field: string secret = 2;
   */
  secret: string;
};

/**
 * Describes the message tickwheel.v1.CreateApiKeyResponse.
 * Use `create(CreateApiKeyResponseSchema)` to create a new message.
 */
export const CreateApiKeyResponseSchema: GenMessage<CreateApiKeyResponse> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 87);

/**
 * An API key's public part (the secret is shown only when the key is made).
 *
 * @generated from message tickwheel.v1.ApiKey
 */
export type ApiKey = Message<"tickwheel.v1.ApiKey"> & {
  /**
   * Key id (UUID).
   *
   * @generated from field: string id = 1;
   */
  id: string;

  /**
   * Owning tenant.
   *
   * @generated from field: string tenant_id = 2;
   */
  tenantId: string;

  /**
   * Label.
   *
   * @generated from field: string name = 3;
   */
  name: string;

  /**
   * What it may do. "submit": SubmitTask(s), CancelTask, RedriveTask, SubmitWorkflow,
   * CancelWorkflow, CreateSchedule, Pause/Resume/DeleteSchedule, RegisterExpectation,
   * DeleteExpectation. "read": every Get and List of SchedulerService (GetTaskHistory
   * and WaitTask included). "work": WorkerService (Connect, CompleteTask,
   * FailTask). "admin": its own tenant's keys on AdminService. A call without the
   * scope it needs answers PERMISSION_DENIED naming the scope.
   *
   * @generated from field: repeated string scopes = 4;
   */
  scopes: string[];

  /**
   * Creation time.
   *
   * @generated from field: google.protobuf.Timestamp created_at = 5;
   */
  createdAt?: Timestamp | undefined;

  /**
   * Expiry (unset: never).
   *
   * @generated from field: google.protobuf.Timestamp expires_at = 6;
   */
  expiresAt?: Timestamp | undefined;

  /**
   * True once revoked.
   *
   * @generated from field: bool revoked = 7;
   */
  revoked: boolean;

  /**
   * When it was revoked (unset when not revoked, or revoked before this was kept).
   *
   * @generated from field: google.protobuf.Timestamp revoked_at = 8;
   */
  revokedAt?: Timestamp | undefined;

  /**
   * Last authentication (written at most once a minute per key and server node).
   *
   * @generated from field: google.protobuf.Timestamp last_used_at = 9;
   */
  lastUsedAt?: Timestamp | undefined;

  /**
   * The key this one replaced by a rotation (empty: none).
   *
   * @generated from field: string rotated_from = 10;
   */
  rotatedFrom: string;
};

/**
 * Describes the message tickwheel.v1.ApiKey.
 * Use `create(ApiKeySchema)` to create a new message.
 */
export const ApiKeySchema: GenMessage<ApiKey> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 88);

/**
 * @generated from message tickwheel.v1.ListApiKeysRequest
 */
export type ListApiKeysRequest = Message<"tickwheel.v1.ListApiKeysRequest"> & {
  /**
   * Tenant id.
   *
   * @generated from field: string tenant_id = 1;
   */
  tenantId: string;
};

/**
 * Describes the message tickwheel.v1.ListApiKeysRequest.
 * Use `create(ListApiKeysRequestSchema)` to create a new message.
 */
export const ListApiKeysRequestSchema: GenMessage<ListApiKeysRequest> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 89);

/**
 * @generated from message tickwheel.v1.ListApiKeysResponse
 */
export type ListApiKeysResponse = Message<"tickwheel.v1.ListApiKeysResponse"> & {
  /**
   * The tenant's keys, oldest first.
   *
   * @generated from field: repeated tickwheel.v1.ApiKey keys = 1;
   */
  keys: ApiKey[];
};

/**
 * Describes the message tickwheel.v1.ListApiKeysResponse.
 * Use `create(ListApiKeysResponseSchema)` to create a new message.
 */
export const ListApiKeysResponseSchema: GenMessage<ListApiKeysResponse> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 90);

/**
 * @generated from message tickwheel.v1.RevokeApiKeyRequest
 */
export type RevokeApiKeyRequest = Message<"tickwheel.v1.RevokeApiKeyRequest"> & {
  /**
   * Key id.
   *
   * @generated from field: string key_id = 1;
   */
  keyId: string;
};

/**
 * Describes the message tickwheel.v1.RevokeApiKeyRequest.
 * Use `create(RevokeApiKeyRequestSchema)` to create a new message.
 */
export const RevokeApiKeyRequestSchema: GenMessage<RevokeApiKeyRequest> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 91);

/**
 * @generated from message tickwheel.v1.RevokeApiKeyResponse
 */
export type RevokeApiKeyResponse = Message<"tickwheel.v1.RevokeApiKeyResponse"> & {
  /**
   * The key after revocation (revoking twice is not an error).
   *
   * @generated from field: tickwheel.v1.ApiKey key = 1;
   */
  key?: ApiKey | undefined;
};

/**
 * Describes the message tickwheel.v1.RevokeApiKeyResponse.
 * Use `create(RevokeApiKeyResponseSchema)` to create a new message.
 */
export const RevokeApiKeyResponseSchema: GenMessage<RevokeApiKeyResponse> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 92);

/**
 * @generated from message tickwheel.v1.RotateApiKeyRequest
 */
export type RotateApiKeyRequest = Message<"tickwheel.v1.RotateApiKeyRequest"> & {
  /**
   * The key to replace (must be neither revoked nor expired).
   *
   * @generated from field: string key_id = 1;
   */
  keyId: string;

  /**
   * How long the old key keeps working, in seconds (0: 3600; at most 30 days).
   *
   * @generated from field: uint32 grace_s = 2;
   */
  graceS: number;

  /**
   * Expiry of the new key (unset: never).
   *
   * @generated from field: google.protobuf.Timestamp expires_at = 3;
   */
  expiresAt?: Timestamp | undefined;
};

/**
 * Describes the message tickwheel.v1.RotateApiKeyRequest.
 * Use `create(RotateApiKeyRequestSchema)` to create a new message.
 */
export const RotateApiKeyRequestSchema: GenMessage<RotateApiKeyRequest> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 93);

/**
 * @generated from message tickwheel.v1.RotateApiKeyResponse
 */
export type RotateApiKeyResponse = Message<"tickwheel.v1.RotateApiKeyResponse"> & {
  /**
   * The old key, with its grace expiry.
   *
   * @generated from field: tickwheel.v1.ApiKey old_key = 1;
   */
  oldKey?: ApiKey | undefined;

  /**
   * The new key.
   *
   * @generated from field: tickwheel.v1.ApiKey new_key = 2;
   */
  newKey?: ApiKey | undefined;

  /**
   * The new key's secret; shown only once.
   *
   * @generated from field: string secret = 3;
   */
  secret: string;
};

/**
 * Describes the message tickwheel.v1.RotateApiKeyResponse.
 * Use `create(RotateApiKeyResponseSchema)` to create a new message.
 */
export const RotateApiKeyResponseSchema: GenMessage<RotateApiKeyResponse> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 94);

/**
 * @generated from message tickwheel.v1.ListTenantsRequest
 */
export type ListTenantsRequest = Message<"tickwheel.v1.ListTenantsRequest"> & {
  /**
   * Tenants per page (0: 100; at most 1000).
   *
   * @generated from field: uint32 page_size = 1;
   */
  pageSize: number;

  /**
   * From the previous response (empty: the first page).
   *
   * @generated from field: string page_token = 2;
   */
  pageToken: string;
};

/**
 * Describes the message tickwheel.v1.ListTenantsRequest.
 * Use `create(ListTenantsRequestSchema)` to create a new message.
 */
export const ListTenantsRequestSchema: GenMessage<ListTenantsRequest> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 95);

/**
 * @generated from message tickwheel.v1.ListTenantsResponse
 */
export type ListTenantsResponse = Message<"tickwheel.v1.ListTenantsResponse"> & {
  /**
   * Tenants in id order.
   *
   * @generated from field: repeated tickwheel.v1.Tenant tenants = 1;
   */
  tenants: Tenant[];

  /**
   * Pass to get the next page (empty: no more).
   *
   * @generated from field: string next_page_token = 2;
   */
  nextPageToken: string;
};

/**
 * Describes the message tickwheel.v1.ListTenantsResponse.
 * Use `create(ListTenantsResponseSchema)` to create a new message.
 */
export const ListTenantsResponseSchema: GenMessage<ListTenantsResponse> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 96);

/**
 * @generated from message tickwheel.v1.GetTaskHistoryRequest
 */
export type GetTaskHistoryRequest = Message<"tickwheel.v1.GetTaskHistoryRequest"> & {
  /**
   * Task id (UUID).
   *
   * @generated from field: string task_id = 1;
   */
  taskId: string;
};

/**
 * Describes the message tickwheel.v1.GetTaskHistoryRequest.
 * Use `create(GetTaskHistoryRequestSchema)` to create a new message.
 */
export const GetTaskHistoryRequestSchema: GenMessage<GetTaskHistoryRequest> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 97);

/**
 * One state change of a task, as the audit recorded it.
 *
 * @generated from message tickwheel.v1.TaskTransition
 */
export type TaskTransition = Message<"tickwheel.v1.TaskTransition"> & {
  /**
   * When the change was written.
   *
   * @generated from field: google.protobuf.Timestamp at = 1;
   */
  at?: Timestamp | undefined;

  /**
   * State before.
   *
   * @generated from field: tickwheel.v1.TaskState from_state = 2;
   */
  fromState: TaskState;

  /**
   * State after.
   *
   * @generated from field: tickwheel.v1.TaskState to_state = 3;
   */
  toState: TaskState;

  /**
   * The task's fencing token after the change (dispatch increments it).
   *
   * @generated from field: uint64 fencing_token = 4;
   */
  fencingToken: bigint;

  /**
   * The epoch of the shard claim under which the node wrote it; 0 when the store does
   * not record it (the embedded SQLite store).
   *
   * @generated from field: uint64 shard_epoch = 5;
   */
  shardEpoch: bigint;

  /**
   * Who wrote it: the worker id for a worker's write, else the node's id.
   *
   * @generated from field: string actor = 6;
   */
  actor: string;

  /**
   * Why, in a few words: "preloaded", "retry due", "dispatched" ("dispatched, started
   * on delivery"), "acked", "completed", "failed: <error> (retry 2 of 5)" (the error
   * cut at 200 characters), "no attempts left" or "not retryable" (on to DEAD_LETTER),
   * "lease expired" (", no attempts left", ", cancel pending"), "released",
   * "cancelled", "cancelled, worker confirmed", "redriven", "dependencies met",
   * "upstream_failed", "set to <STATE>" (an operator's repair); empty for changes
   * recorded before the store kept reasons. A submission is no transition: the
   * history starts with the first move after it.
   *
   * @generated from field: string reason = 7;
   */
  reason: string;

  /**
   * On a dispatch (to DISPATCHED or RUNNING): the due time it was made for. The
   * dispatch commit runs a few tens of ms ahead of it, so `at` is earlier; the worker
   * is handed the task at `due_at` (unset on other rows and on rows written before
   * stores kept it).
   *
   * @generated from field: google.protobuf.Timestamp due_at = 8;
   */
  dueAt?: Timestamp | undefined;
};

/**
 * Describes the message tickwheel.v1.TaskTransition.
 * Use `create(TaskTransitionSchema)` to create a new message.
 */
export const TaskTransitionSchema: GenMessage<TaskTransition> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 98);

/**
 * A worker's write the store refused because its fencing token was not the task's
 * current one (a zombie: a worker that lost its lease and came back), or because the
 * task was held by another session.
 *
 * @generated from message tickwheel.v1.RefusedWrite
 */
export type RefusedWrite = Message<"tickwheel.v1.RefusedWrite"> & {
  /**
   * When the write was refused.
   *
   * @generated from field: google.protobuf.Timestamp at = 1;
   */
  at?: Timestamp | undefined;

  /**
   * The fencing token the write carried.
   *
   * @generated from field: uint64 fencing_token = 2;
   */
  fencingToken: bigint;

  /**
   * The task's fencing token when the write was refused.
   *
   * @generated from field: uint64 current_token = 3;
   */
  currentToken: bigint;

  /**
   * The worker id that sent it ("CompleteTask/FailTask" for the unary RPCs, which
   * carry none).
   *
   * @generated from field: string actor = 4;
   */
  actor: string;

  /**
   * What it tried: "ack", "heartbeat", "checkpoint", "complete", "fail", "release" or
   * "cancel" (a worker's confirmation that it stopped a cancelled task).
   *
   * @generated from field: string write = 5;
   */
  write: string;

  /**
   * The refusal reason sent back to the worker, e.g. "stale_fencing_token".
   *
   * @generated from field: string reason = 6;
   */
  reason: string;
};

/**
 * Describes the message tickwheel.v1.RefusedWrite.
 * Use `create(RefusedWriteSchema)` to create a new message.
 */
export const RefusedWriteSchema: GenMessage<RefusedWrite> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 99);

/**
 * @generated from message tickwheel.v1.GetTaskHistoryResponse
 */
export type GetTaskHistoryResponse = Message<"tickwheel.v1.GetTaskHistoryResponse"> & {
  /**
   * Every change, oldest first.
   *
   * @generated from field: repeated tickwheel.v1.TaskTransition transitions = 1;
   */
  transitions: TaskTransition[];

  /**
   * Every refused write for the task, oldest first (at most the last 1,000).
   *
   * @generated from field: repeated tickwheel.v1.RefusedWrite refused_writes = 2;
   */
  refusedWrites: RefusedWrite[];
};

/**
 * Describes the message tickwheel.v1.GetTaskHistoryResponse.
 * Use `create(GetTaskHistoryResponseSchema)` to create a new message.
 */
export const GetTaskHistoryResponseSchema: GenMessage<GetTaskHistoryResponse> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 100);

/**
 * Which tasks: every field narrows (empty or unset: no narrowing). A bad field
 * answers INVALID_ARGUMENT naming it (`filter.states[0]`, `filter.scheduled_to`, ...).
 *
 * @generated from message tickwheel.v1.TaskFilter
 */
export type TaskFilter = Message<"tickwheel.v1.TaskFilter"> & {
  /**
   * Only these states (TASK_STATE_UNSPECIFIED is refused).
   *
   * @generated from field: repeated tickwheel.v1.TaskState states = 1;
   */
  states: TaskState[];

  /**
   * Only this type (at most 64 characters).
   *
   * @generated from field: string type = 2;
   */
  type: string;

  /**
   * Only these pools (POOL_UNSPECIFIED is refused).
   *
   * @generated from field: repeated tickwheel.v1.Pool pools = 3;
   */
  pools: Pool[];

  /**
   * Scheduled (`scheduled_at`, before jitter) at or after; within the accepted
   * Timestamp range (1970-01-01T00:00:01Z .. 9999-12-30T23:59:59Z).
   *
   * @generated from field: google.protobuf.Timestamp scheduled_from = 4;
   */
  scheduledFrom?: Timestamp | undefined;

  /**
   * Scheduled before (not before `scheduled_from`); same range.
   *
   * @generated from field: google.protobuf.Timestamp scheduled_to = 5;
   */
  scheduledTo?: Timestamp | undefined;
};

/**
 * Describes the message tickwheel.v1.TaskFilter.
 * Use `create(TaskFilterSchema)` to create a new message.
 */
export const TaskFilterSchema: GenMessage<TaskFilter> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 101);

/**
 * @generated from message tickwheel.v1.CountTasksRequest
 */
export type CountTasksRequest = Message<"tickwheel.v1.CountTasksRequest"> & {
  /**
   * Which tasks to count (empty: all of the tenant's).
   *
   * @generated from field: tickwheel.v1.TaskFilter filter = 1;
   */
  filter?: TaskFilter | undefined;
};

/**
 * Describes the message tickwheel.v1.CountTasksRequest.
 * Use `create(CountTasksRequestSchema)` to create a new message.
 */
export const CountTasksRequestSchema: GenMessage<CountTasksRequest> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 102);

/**
 * The number of tasks in one (tenant, state, type, pool) group.
 *
 * @generated from message tickwheel.v1.TaskCount
 */
export type TaskCount = Message<"tickwheel.v1.TaskCount"> & {
  /**
   * The tenant (set only when the admin token asks for every tenant).
   *
   * @generated from field: string tenant_id = 1;
   */
  tenantId: string;

  /**
   * The state of the group's tasks.
   *
   * @generated from field: tickwheel.v1.TaskState state = 2;
   */
  state: TaskState;

  /**
   * Their task type.
   *
   * @generated from field: string type = 3;
   */
  type: string;

  /**
   * Their pool.
   *
   * @generated from field: tickwheel.v1.Pool pool = 4;
   */
  pool: Pool;

  /**
   * How many tasks are in the group.
   *
   * @generated from field: uint64 count = 5;
   */
  count: bigint;
};

/**
 * Describes the message tickwheel.v1.TaskCount.
 * Use `create(TaskCountSchema)` to create a new message.
 */
export const TaskCountSchema: GenMessage<TaskCount> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 103);

/**
 * @generated from message tickwheel.v1.CountTasksResponse
 */
export type CountTasksResponse = Message<"tickwheel.v1.CountTasksResponse"> & {
  /**
   * One entry per non-empty group, by state, then type, then pool (at most 10,000
   * groups; `truncated` says when there were more).
   *
   * @generated from field: repeated tickwheel.v1.TaskCount counts = 1;
   */
  counts: TaskCount[];

  /**
   * The sum over every group (exact even when truncated).
   *
   * @generated from field: uint64 total = 2;
   */
  total: bigint;

  /**
   * True when some groups were left out of `counts`.
   *
   * @generated from field: bool truncated = 3;
   */
  truncated: boolean;

  /**
   * When the counts were taken (the node's clock as it asked the store). Counts come
   * from a cache: `as_of` may be up to the TTL (`--count-cache-s`, default 5 s) in the
   * past, or up to 60 s while a background refresh runs; with `--count-cache-s 0`, now.
   *
   * @generated from field: google.protobuf.Timestamp as_of = 4;
   */
  asOf?: Timestamp | undefined;
};

/**
 * Describes the message tickwheel.v1.CountTasksResponse.
 * Use `create(CountTasksResponseSchema)` to create a new message.
 */
export const CountTasksResponseSchema: GenMessage<CountTasksResponse> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 104);

/**
 * @generated from message tickwheel.v1.GetForecastRequest
 */
export type GetForecastRequest = Message<"tickwheel.v1.GetForecastRequest"> & {
  /**
   * Start of the window; unset means now. Within the accepted Timestamp range, and the
   * window (start + bucket_s * buckets) must end by 9999-12-30 ("start: ..." else).
   *
   * @generated from field: google.protobuf.Timestamp start = 1;
   */
  start?: Timestamp | undefined;

  /**
   * Bucket width in seconds: 1 or 60; 0 means 60.
   *
   * @generated from field: uint32 bucket_s = 2;
   */
  bucketS: number;

  /**
   * Number of buckets, 1-3600; 0 means 60 (with 60 s buckets: the next hour).
   *
   * @generated from field: uint32 buckets = 3;
   */
  buckets: number;

  /**
   * Only these pools (empty: all; POOL_UNSPECIFIED is refused).
   *
   * @generated from field: repeated tickwheel.v1.Pool pools = 4;
   */
  pools: Pool[];
};

/**
 * Describes the message tickwheel.v1.GetForecastRequest.
 * Use `create(GetForecastRequestSchema)` to create a new message.
 */
export const GetForecastRequestSchema: GenMessage<GetForecastRequest> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 105);

/**
 * The tasks of one pool that fall in one bucket.
 *
 * @generated from message tickwheel.v1.ForecastBucket
 */
export type ForecastBucket = Message<"tickwheel.v1.ForecastBucket"> & {
  /**
   * Start of the bucket (start + i * bucket_s).
   *
   * @generated from field: google.protobuf.Timestamp start = 1;
   */
  start?: Timestamp | undefined;

  /**
   * The pool counted.
   *
   * @generated from field: tickwheel.v1.Pool pool = 2;
   */
  pool: Pool;

  /**
   * Tasks whose nominal time (`scheduled_at`, before jitter) falls in the bucket.
   *
   * @generated from field: uint64 nominal = 3;
   */
  nominal: bigint;

  /**
   * Tasks whose fire time (`due_at`, after jitter) falls in the bucket: what the
   * scheduler will actually dispatch then.
   *
   * @generated from field: uint64 firing = 4;
   */
  firing: bigint;
};

/**
 * Describes the message tickwheel.v1.ForecastBucket.
 * Use `create(ForecastBucketSchema)` to create a new message.
 */
export const ForecastBucketSchema: GenMessage<ForecastBucket> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 106);

/**
 * @generated from message tickwheel.v1.GetForecastResponse
 */
export type GetForecastResponse = Message<"tickwheel.v1.GetForecastResponse"> & {
  /**
   * The window's start as used.
   *
   * @generated from field: google.protobuf.Timestamp start = 1;
   */
  start?: Timestamp | undefined;

  /**
   * Bucket width in seconds as used.
   *
   * @generated from field: uint32 bucket_s = 2;
   */
  bucketS: number;

  /**
   * Every (bucket, pool) pair, zeros included: buckets in time order, and within a
   * bucket the pools CRITICAL, STANDARD, BULK (or the requested ones).
   *
   * @generated from field: repeated tickwheel.v1.ForecastBucket buckets = 3;
   */
  buckets: ForecastBucket[];

  /**
   * Tasks already due before `start` and not yet dispatched (SCHEDULED, PRELOADED or
   * RETRYING with `due_at` before `start`), per pool in the same order: `start` is the
   * window's start, `firing` the count, `nominal` 0.
   *
   * @generated from field: repeated tickwheel.v1.ForecastBucket overdue = 4;
   */
  overdue: ForecastBucket[];
};

/**
 * Describes the message tickwheel.v1.GetForecastResponse.
 * Use `create(GetForecastResponseSchema)` to create a new message.
 */
export const GetForecastResponseSchema: GenMessage<GetForecastResponse> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 107);

/**
 * @generated from message tickwheel.v1.ListWorkersRequest
 */
export type ListWorkersRequest = Message<"tickwheel.v1.ListWorkersRequest"> & {
};

/**
 * Describes the message tickwheel.v1.ListWorkersRequest.
 * Use `create(ListWorkersRequestSchema)` to create a new message.
 */
export const ListWorkersRequestSchema: GenMessage<ListWorkersRequest> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 108);

/**
 * One worker stream connected to the answering node.
 *
 * @generated from message tickwheel.v1.WorkerInfo
 */
export type WorkerInfo = Message<"tickwheel.v1.WorkerInfo"> & {
  /**
   * The worker's `Hello.worker_id`.
   *
   * @generated from field: string worker_id = 1;
   */
  workerId: string;

  /**
   * Its tenant.
   *
   * @generated from field: string tenant_id = 2;
   */
  tenantId: string;

  /**
   * Task types it takes (empty: any).
   *
   * @generated from field: repeated string task_types = 3;
   */
  taskTypes: string[];

  /**
   * Pools it takes (empty: any).
   *
   * @generated from field: repeated tickwheel.v1.Pool pools = 4;
   */
  pools: Pool[];

  /**
   * Slots it announced (its concurrency).
   *
   * @generated from field: uint32 slots = 5;
   */
  slots: number;

  /**
   * Tasks it holds now (dispatched or running).
   *
   * @generated from field: uint32 slots_used = 6;
   */
  slotsUsed: number;

  /**
   * Credit it has left: tasks the server may still push to it (slots - used, once the
   * worker has granted back the slots of the tasks it finished).
   *
   * @generated from field: uint32 slots_free = 7;
   */
  slotsFree: number;

  /**
   * True for a start-on-delivery worker (`Hello.start_on_delivery`).
   *
   * @generated from field: bool start_on_delivery = 8;
   */
  startOnDelivery: boolean;

  /**
   * When the stream connected.
   *
   * @generated from field: google.protobuf.Timestamp connected_at = 9;
   */
  connectedAt?: Timestamp | undefined;

  /**
   * The last message received on the stream (the hello before any other).
   *
   * @generated from field: google.protobuf.Timestamp last_seen = 10;
   */
  lastSeen?: Timestamp | undefined;

  /**
   * The node that answered (where this stream is connected).
   *
   * @generated from field: string node_id = 11;
   */
  nodeId: string;
};

/**
 * Describes the message tickwheel.v1.WorkerInfo.
 * Use `create(WorkerInfoSchema)` to create a new message.
 */
export const WorkerInfoSchema: GenMessage<WorkerInfo> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 109);

/**
 * @generated from message tickwheel.v1.ListWorkersResponse
 */
export type ListWorkersResponse = Message<"tickwheel.v1.ListWorkersResponse"> & {
  /**
   * By worker id.
   *
   * @generated from field: repeated tickwheel.v1.WorkerInfo workers = 1;
   */
  workers: WorkerInfo[];

  /**
   * The node that answered.
   *
   * @generated from field: string node_id = 2;
   */
  nodeId: string;

  /**
   * Overdue tasks no worker can take: per (tenant, type, pool), the SCHEDULED,
   * PRELOADED and RETRYING tasks due before now whose type and pool no worker stream
   * connected to the answering node takes (its tenant's streams, or a shared worker's;
   * a pool a broker outlet publishes counts as served for every type). In a cluster
   * each node answers for the streams connected to it. At most 1,000 groups, the
   * oldest first; the overdue tasks are read from a cache like CountTasks' (up to the
   * count cache's TTL old).
   *
   * @generated from field: repeated tickwheel.v1.UnservedTasks unserved = 3;
   */
  unserved: UnservedTasks[];
};

/**
 * Describes the message tickwheel.v1.ListWorkersResponse.
 * Use `create(ListWorkersResponseSchema)` to create a new message.
 */
export const ListWorkersResponseSchema: GenMessage<ListWorkersResponse> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 110);

/**
 * Overdue tasks of one (tenant, type, pool) that no connected worker takes.
 *
 * @generated from message tickwheel.v1.UnservedTasks
 */
export type UnservedTasks = Message<"tickwheel.v1.UnservedTasks"> & {
  /**
   * The tasks' tenant.
   *
   * @generated from field: string tenant_id = 1;
   */
  tenantId: string;

  /**
   * Their task type.
   *
   * @generated from field: string type = 2;
   */
  type: string;

  /**
   * Their pool.
   *
   * @generated from field: tickwheel.v1.Pool pool = 3;
   */
  pool: Pool;

  /**
   * How many are overdue.
   *
   * @generated from field: uint64 count = 4;
   */
  count: bigint;

  /**
   * The earliest `due_at` among them.
   *
   * @generated from field: google.protobuf.Timestamp oldest_due_at = 5;
   */
  oldestDueAt?: Timestamp | undefined;
};

/**
 * Describes the message tickwheel.v1.UnservedTasks.
 * Use `create(UnservedTasksSchema)` to create a new message.
 */
export const UnservedTasksSchema: GenMessage<UnservedTasks> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 111);

/**
 * @generated from message tickwheel.v1.GetActivityRequest
 */
export type GetActivityRequest = Message<"tickwheel.v1.GetActivityRequest"> & {
  /**
   * How far back in seconds, 60-86,400; 0 means 900 (15 minutes).
   *
   * @generated from field: uint32 window_s = 1;
   */
  windowS: number;

  /**
   * Bucket width in seconds, 1-3,600, at most window_s; 0 means 60.
   *
   * @generated from field: uint32 bucket_s = 2;
   */
  bucketS: number;
};

/**
 * Describes the message tickwheel.v1.GetActivityRequest.
 * Use `create(GetActivityRequestSchema)` to create a new message.
 */
export const GetActivityRequestSchema: GenMessage<GetActivityRequest> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 112);

/**
 * What happened in one bucket of time.
 *
 * @generated from message tickwheel.v1.ActivityBucket
 */
export type ActivityBucket = Message<"tickwheel.v1.ActivityBucket"> & {
  /**
   * Start of the bucket.
   *
   * @generated from field: google.protobuf.Timestamp start = 1;
   */
  start?: Timestamp | undefined;

  /**
   * Dispatches (first dispatch and retries).
   *
   * @generated from field: uint64 dispatched = 2;
   */
  dispatched: bigint;

  /**
   * Completions.
   *
   * @generated from field: uint64 completed = 3;
   */
  completed: bigint;

  /**
   * Failed attempts (retried or dead-lettered).
   *
   * @generated from field: uint64 failed = 4;
   */
  failed: bigint;

  /**
   * Median dispatch lateness (dispatch time minus due time) in seconds; 0 when
   * nothing was dispatched.
   *
   * @generated from field: double lateness_p50_s = 5;
   */
  latenessP50S: number;

  /**
   * 99th percentile of dispatch lateness in seconds.
   *
   * @generated from field: double lateness_p99_s = 6;
   */
  latenessP99S: number;
};

/**
 * Describes the message tickwheel.v1.ActivityBucket.
 * Use `create(ActivityBucketSchema)` to create a new message.
 */
export const ActivityBucketSchema: GenMessage<ActivityBucket> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 113);

/**
 * @generated from message tickwheel.v1.GetActivityResponse
 */
export type GetActivityResponse = Message<"tickwheel.v1.GetActivityResponse"> & {
  /**
   * Oldest first, the last bucket ends now: window_s rounded up to whole buckets
   * (every bucket listed, empty ones with zeros). At most 3,600 buckets: a smaller
   * bucket_s answers INVALID_ARGUMENT "bucket_s: too small".
   *
   * @generated from field: repeated tickwheel.v1.ActivityBucket buckets = 1;
   */
  buckets: ActivityBucket[];

  /**
   * Bucket width in seconds as used.
   *
   * @generated from field: uint32 bucket_s = 2;
   */
  bucketS: number;
};

/**
 * Describes the message tickwheel.v1.GetActivityResponse.
 * Use `create(GetActivityResponseSchema)` to create a new message.
 */
export const GetActivityResponseSchema: GenMessage<GetActivityResponse> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 114);

/**
 * @generated from message tickwheel.v1.PlanBulkActionRequest
 */
export type PlanBulkActionRequest = Message<"tickwheel.v1.PlanBulkActionRequest"> & {
  /**
   * What to do (required).
   *
   * @generated from field: tickwheel.v1.BulkAction action = 1;
   */
  action: BulkAction;

  /**
   * Which tasks. The states the action applies to are added by the server (a
   * redrive plan counts only DEAD_LETTER tasks, a cancel plan only non-terminal ones).
   *
   * @generated from field: tickwheel.v1.TaskFilter filter = 2;
   */
  filter?: TaskFilter | undefined;
};

/**
 * Describes the message tickwheel.v1.PlanBulkActionRequest.
 * Use `create(PlanBulkActionRequestSchema)` to create a new message.
 */
export const PlanBulkActionRequestSchema: GenMessage<PlanBulkActionRequest> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 115);

/**
 * @generated from message tickwheel.v1.PlanBulkActionResponse
 */
export type PlanBulkActionResponse = Message<"tickwheel.v1.PlanBulkActionResponse"> & {
  /**
   * How many tasks the run would act on now.
   *
   * @generated from field: uint64 count = 1;
   */
  count: bigint;

  /**
   * Pass this, and only this, to RunBulkAction.
   *
   * @generated from field: string plan_token = 2;
   */
  planToken: string;

  /**
   * The action and filter the token carries, as the server understood them (show
   * these to the person confirming): the action,
   *
   * @generated from field: tickwheel.v1.BulkAction action = 3;
   */
  action: BulkAction;

  /**
   * and the filter, with the action's states added.
   *
   * @generated from field: tickwheel.v1.TaskFilter filter = 4;
   */
  filter?: TaskFilter | undefined;

  /**
   * The plan's time: the run acts only on tasks created at or before it.
   *
   * @generated from field: google.protobuf.Timestamp planned_at = 5;
   */
  plannedAt?: Timestamp | undefined;

  /**
   * After this the token answers FAILED_PRECONDITION "plan_token: expired".
   *
   * @generated from field: google.protobuf.Timestamp expires_at = 6;
   */
  expiresAt?: Timestamp | undefined;
};

/**
 * Describes the message tickwheel.v1.PlanBulkActionResponse.
 * Use `create(PlanBulkActionResponseSchema)` to create a new message.
 */
export const PlanBulkActionResponseSchema: GenMessage<PlanBulkActionResponse> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 116);

/**
 * @generated from message tickwheel.v1.RunBulkActionRequest
 */
export type RunBulkActionRequest = Message<"tickwheel.v1.RunBulkActionRequest"> & {
  /**
   * From PlanBulkAction (required; opaque, at most 4,096 characters). Malformed:
   * INVALID_ARGUMENT "plan_token: malformed"; another tenant's: PERMISSION_DENIED;
   * expired: FAILED_PRECONDITION "plan_token: expired; plan again".
   *
   * @generated from field: string plan_token = 1;
   */
  planToken: string;
};

/**
 * Describes the message tickwheel.v1.RunBulkActionRequest.
 * Use `create(RunBulkActionRequestSchema)` to create a new message.
 */
export const RunBulkActionRequestSchema: GenMessage<RunBulkActionRequest> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 117);

/**
 * @generated from message tickwheel.v1.RunBulkActionResponse
 */
export type RunBulkActionResponse = Message<"tickwheel.v1.RunBulkActionResponse"> & {
  /**
   * The action that ran.
   *
   * @generated from field: tickwheel.v1.BulkAction action = 1;
   */
  action: BulkAction;

  /**
   * The filter it ran with (the plan's).
   *
   * @generated from field: tickwheel.v1.TaskFilter filter = 2;
   */
  filter?: TaskFilter | undefined;

  /**
   * Tasks that matched when the run started.
   *
   * @generated from field: uint64 matched = 3;
   */
  matched: bigint;

  /**
   * Tasks the run changed (a task that finished in between is matched, not changed).
   *
   * @generated from field: uint64 changed = 4;
   */
  changed: bigint;
};

/**
 * Describes the message tickwheel.v1.RunBulkActionResponse.
 * Use `create(RunBulkActionResponseSchema)` to create a new message.
 */
export const RunBulkActionResponseSchema: GenMessage<RunBulkActionResponse> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 118);

/**
 * @generated from message tickwheel.v1.ListWorkflowsRequest
 */
export type ListWorkflowsRequest = Message<"tickwheel.v1.ListWorkflowsRequest"> & {
  /**
   * At most this many, 1-1000; 0 means 100.
   *
   * @generated from field: uint32 limit = 1;
   */
  limit: number;
};

/**
 * Describes the message tickwheel.v1.ListWorkflowsRequest.
 * Use `create(ListWorkflowsRequestSchema)` to create a new message.
 */
export const ListWorkflowsRequestSchema: GenMessage<ListWorkflowsRequest> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 119);

/**
 * @generated from message tickwheel.v1.ListWorkflowsResponse
 */
export type ListWorkflowsResponse = Message<"tickwheel.v1.ListWorkflowsResponse"> & {
  /**
   * Newest first.
   *
   * @generated from field: repeated tickwheel.v1.Workflow workflows = 1;
   */
  workflows: Workflow[];
};

/**
 * Describes the message tickwheel.v1.ListWorkflowsResponse.
 * Use `create(ListWorkflowsResponseSchema)` to create a new message.
 */
export const ListWorkflowsResponseSchema: GenMessage<ListWorkflowsResponse> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 120);

/**
 * @generated from message tickwheel.v1.CancelWorkflowRequest
 */
export type CancelWorkflowRequest = Message<"tickwheel.v1.CancelWorkflowRequest"> & {
  /**
   * Workflow id (UUID).
   *
   * @generated from field: string workflow_id = 1;
   */
  workflowId: string;
};

/**
 * Describes the message tickwheel.v1.CancelWorkflowRequest.
 * Use `create(CancelWorkflowRequestSchema)` to create a new message.
 */
export const CancelWorkflowRequestSchema: GenMessage<CancelWorkflowRequest> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 121);

/**
 * @generated from message tickwheel.v1.CancelWorkflowResponse
 */
export type CancelWorkflowResponse = Message<"tickwheel.v1.CancelWorkflowResponse"> & {
  /**
   * The workflow after the cancel, with every node's task.
   *
   * @generated from field: tickwheel.v1.GetWorkflowResponse workflow = 1;
   */
  workflow?: GetWorkflowResponse | undefined;

  /**
   * How many nodes this call cancelled (or asked to stop, when running).
   *
   * @generated from field: uint32 cancelled = 2;
   */
  cancelled: number;
};

/**
 * Describes the message tickwheel.v1.CancelWorkflowResponse.
 * Use `create(CancelWorkflowResponseSchema)` to create a new message.
 */
export const CancelWorkflowResponseSchema: GenMessage<CancelWorkflowResponse> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 122);

/**
 * @generated from message tickwheel.v1.DeleteExpectationRequest
 */
export type DeleteExpectationRequest = Message<"tickwheel.v1.DeleteExpectationRequest"> & {
  /**
   * The job id the expectation was registered for.
   *
   * @generated from field: string job_id = 1;
   */
  jobId: string;
};

/**
 * Describes the message tickwheel.v1.DeleteExpectationRequest.
 * Use `create(DeleteExpectationRequestSchema)` to create a new message.
 */
export const DeleteExpectationRequestSchema: GenMessage<DeleteExpectationRequest> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 123);

/**
 * @generated from message tickwheel.v1.DeleteExpectationResponse
 */
export type DeleteExpectationResponse = Message<"tickwheel.v1.DeleteExpectationResponse"> & {
};

/**
 * Describes the message tickwheel.v1.DeleteExpectationResponse.
 * Use `create(DeleteExpectationResponseSchema)` to create a new message.
 */
export const DeleteExpectationResponseSchema: GenMessage<DeleteExpectationResponse> = /*@__PURE__*/
  messageDesc(file_tickwheel_v1_tickwheel, 124);

/**
 * The lifecycle state of a task (see docs/architecture.md for the transition table).
 *
 * @generated from enum tickwheel.v1.TaskState
 */
export enum TaskState {
  /**
   * @generated from enum value: TASK_STATE_UNSPECIFIED = 0;
   */
  UNSPECIFIED = 0,

  /**
   * @generated from enum value: TASK_STATE_SCHEDULED = 1;
   */
  SCHEDULED = 1,

  /**
   * @generated from enum value: TASK_STATE_PRELOADED = 2;
   */
  PRELOADED = 2,

  /**
   * @generated from enum value: TASK_STATE_DISPATCHED = 3;
   */
  DISPATCHED = 3,

  /**
   * @generated from enum value: TASK_STATE_RUNNING = 4;
   */
  RUNNING = 4,

  /**
   * @generated from enum value: TASK_STATE_RETRYING = 5;
   */
  RETRYING = 5,

  /**
   * @generated from enum value: TASK_STATE_COMPLETED = 6;
   */
  COMPLETED = 6,

  /**
   * @generated from enum value: TASK_STATE_CANCELLED = 7;
   */
  CANCELLED = 7,

  /**
   * @generated from enum value: TASK_STATE_DEAD_LETTER = 8;
   */
  DEAD_LETTER = 8,
}

/**
 * Describes the enum tickwheel.v1.TaskState.
 */
export const TaskStateSchema: GenEnum<TaskState> = /*@__PURE__*/
  enumDesc(file_tickwheel_v1_tickwheel, 0);

/**
 * Priority pool of a task. Unspecified means standard.
 *
 * @generated from enum tickwheel.v1.Pool
 */
export enum Pool {
  /**
   * @generated from enum value: POOL_UNSPECIFIED = 0;
   */
  UNSPECIFIED = 0,

  /**
   * @generated from enum value: POOL_CRITICAL = 1;
   */
  CRITICAL = 1,

  /**
   * @generated from enum value: POOL_STANDARD = 2;
   */
  STANDARD = 2,

  /**
   * @generated from enum value: POOL_BULK = 3;
   */
  BULK = 3,
}

/**
 * Describes the enum tickwheel.v1.Pool.
 */
export const PoolSchema: GenEnum<Pool> = /*@__PURE__*/
  enumDesc(file_tickwheel_v1_tickwheel, 1);

/**
 * How the effective due time (Task.due_at) may move away from the time the submitter
 * asked for (TaskSpec.scheduled_at), to smooth stampedes at round instants. The offset
 * is deterministic per task (a stable hash of tenant and task id), so a task always
 * gets the same one. W below is the server's jitter window (120 s by default).
 *
 * The rule: a task is never dispatched before the time its submitter asked for unless
 * it opted into JITTER_MODE_SYMMETRIC.
 *   - Unspecified (the default): a task asked for a round instant (a whole minute:
 *     seconds and fraction zero, e.g. 12:00:00 or 12:30:00) is spread late-only over
 *     [0, +W]; any other instant (a delay such as `now + 30 s`, or no time at all)
 *     runs at that instant, with no offset.
 *   - strict_timing: no offset, whatever jitter_mode says.
 * The mode the server applied is the one stored with the task; Task.due_at is the
 * effective time a worker receives the task at (never before it, give or take the
 * dispatch lead of a few milliseconds).
 *
 * @generated from enum tickwheel.v1.JitterMode
 */
export enum JitterMode {
  /**
   * The default rule above: late-only [0, +W] on a round instant, none otherwise.
   *
   * @generated from enum value: JITTER_MODE_UNSPECIFIED = 0;
   */
  UNSPECIFIED = 0,

  /**
   * Offset in [-W, +W] (millisecond steps): may run up to W BEFORE the asked time.
   * Only for tasks whose submitter accepts that (e.g. "around midnight").
   *
   * @generated from enum value: JITTER_MODE_SYMMETRIC = 1;
   */
  SYMMETRIC = 1,

  /**
   * Offset in [0, +W] (millisecond steps) whatever the instant: never earlier than asked.
   *
   * @generated from enum value: JITTER_MODE_LATE_ONLY = 2;
   */
  LATE_ONLY = 2,

  /**
   * No offset (the same as strict_timing).
   *
   * @generated from enum value: JITTER_MODE_NONE = 3;
   */
  NONE = 3,
}

/**
 * Describes the enum tickwheel.v1.JitterMode.
 */
export const JitterModeSchema: GenEnum<JitterMode> = /*@__PURE__*/
  enumDesc(file_tickwheel_v1_tickwheel, 2);

/**
 * What a workflow does to the descendants of a task that dead-letters or is cancelled.
 * Unspecified means cancel.
 *
 * @generated from enum tickwheel.v1.UpstreamPolicy
 */
export enum UpstreamPolicy {
  /**
   * @generated from enum value: UPSTREAM_POLICY_UNSPECIFIED = 0;
   */
  UNSPECIFIED = 0,

  /**
   * Cancel every waiting descendant; their `last_error` is "upstream_failed".
   *
   * @generated from enum value: UPSTREAM_POLICY_CANCEL = 1;
   */
  CANCEL = 1,

  /**
   * Count the failed parent as resolved: its children run as if it had completed.
   *
   * @generated from enum value: UPSTREAM_POLICY_CONTINUE = 2;
   */
  CONTINUE = 2,
}

/**
 * Describes the enum tickwheel.v1.UpstreamPolicy.
 */
export const UpstreamPolicySchema: GenEnum<UpstreamPolicy> = /*@__PURE__*/
  enumDesc(file_tickwheel_v1_tickwheel, 3);

/**
 * What a schedule does when an occurrence falls due while a task it created earlier
 * is still live. Unspecified means skip.
 *
 * @generated from enum tickwheel.v1.OverlapPolicy
 */
export enum OverlapPolicy {
  /**
   * @generated from enum value: OVERLAP_POLICY_UNSPECIFIED = 0;
   */
  UNSPECIFIED = 0,

  /**
   * Drop the occurrence.
   *
   * @generated from enum value: OVERLAP_POLICY_SKIP = 1;
   */
  SKIP = 1,

  /**
   * Start it anyway (runs overlap).
   *
   * @generated from enum value: OVERLAP_POLICY_ALLOW = 2;
   */
  ALLOW = 2,

  /**
   * Hold one occurrence and start it as soon as nothing is live; drop the rest.
   *
   * @generated from enum value: OVERLAP_POLICY_BUFFER_ONE = 3;
   */
  BUFFER_ONE = 3,
}

/**
 * Describes the enum tickwheel.v1.OverlapPolicy.
 */
export const OverlapPolicySchema: GenEnum<OverlapPolicy> = /*@__PURE__*/
  enumDesc(file_tickwheel_v1_tickwheel, 4);

/**
 * @generated from enum tickwheel.v1.ExpectationStatus
 */
export enum ExpectationStatus {
  /**
   * @generated from enum value: EXPECTATION_STATUS_UNSPECIFIED = 0;
   */
  UNSPECIFIED = 0,

  /**
   * Completed within its interval, registered and not yet due, or past the deadline
   * while a matching task still runs inside max_runtime_s.
   *
   * @generated from enum value: EXPECTATION_STATUS_OK = 1;
   */
  OK = 1,

  /**
   * No matching completion by the deadline and nothing running (nothing started, or
   * attempts dead-lettered): the watchdog alerts.
   *
   * @generated from enum value: EXPECTATION_STATUS_LATE = 2;
   */
  LATE = 2,

  /**
   * Past the deadline with a matching task running longer than max_runtime_s (or
   * running at all when none is set): the watchdog alerts.
   *
   * @generated from enum value: EXPECTATION_STATUS_STUCK = 3;
   */
  STUCK = 3,
}

/**
 * Describes the enum tickwheel.v1.ExpectationStatus.
 */
export const ExpectationStatusSchema: GenEnum<ExpectationStatus> = /*@__PURE__*/
  enumDesc(file_tickwheel_v1_tickwheel, 5);

/**
 * The order of ListTasks. "Scheduled" is the requested time (`scheduled_at`, before
 * jitter); "created" is the submission order (task ids are UUIDv7, time-ordered).
 *
 * @generated from enum tickwheel.v1.TaskOrder
 */
export enum TaskOrder {
  /**
   * TASK_ORDER_SCHEDULED_ASC.
   *
   * @generated from enum value: TASK_ORDER_UNSPECIFIED = 0;
   */
  UNSPECIFIED = 0,

  /**
   * Earliest requested time first.
   *
   * @generated from enum value: TASK_ORDER_SCHEDULED_ASC = 1;
   */
  SCHEDULED_ASC = 1,

  /**
   * Latest requested time first.
   *
   * @generated from enum value: TASK_ORDER_SCHEDULED_DESC = 2;
   */
  SCHEDULED_DESC = 2,

  /**
   * Oldest submission first.
   *
   * @generated from enum value: TASK_ORDER_CREATED_ASC = 3;
   */
  CREATED_ASC = 3,

  /**
   * Newest submission first (what `tickwheel list` shows by default).
   *
   * @generated from enum value: TASK_ORDER_CREATED_DESC = 4;
   */
  CREATED_DESC = 4,
}

/**
 * Describes the enum tickwheel.v1.TaskOrder.
 */
export const TaskOrderSchema: GenEnum<TaskOrder> = /*@__PURE__*/
  enumDesc(file_tickwheel_v1_tickwheel, 6);

/**
 * @generated from enum tickwheel.v1.BulkAction
 */
export enum BulkAction {
  /**
   * @generated from enum value: BULK_ACTION_UNSPECIFIED = 0;
   */
  UNSPECIFIED = 0,

  /**
   * Cancel every matching task that is not terminal (as CancelTask).
   *
   * @generated from enum value: BULK_ACTION_CANCEL = 1;
   */
  CANCEL = 1,

  /**
   * Redrive every matching DEAD_LETTER task to run now (as RedriveTask).
   *
   * @generated from enum value: BULK_ACTION_REDRIVE = 2;
   */
  REDRIVE = 2,
}

/**
 * Describes the enum tickwheel.v1.BulkAction.
 */
export const BulkActionSchema: GenEnum<BulkAction> = /*@__PURE__*/
  enumDesc(file_tickwheel_v1_tickwheel, 7);

/**
 * Clients submit and manage tasks of their own tenant.
 *
 * Credentials (docs/keys.md): every call carries an API key (`x-api-key` metadata) and
 * acts for the key's tenant, with the key's scopes. Instead of an API key, a call may
 * carry the platform admin token (`x-admin-token`; a call with both is the key's):
 * it then acts for the tenant named in `x-tenant-id` metadata (a tenant id, a UUID),
 * with every scope. A malformed `x-tenant-id` answers INVALID_ARGUMENT
 * "x-tenant-id: ...", an unknown tenant NOT_FOUND, a wrong token UNAUTHENTICATED.
 * Without `x-tenant-id`, CountTasks, GetForecast, ListWorkers and GetActivity answer
 * for every tenant; every other RPC answers INVALID_ARGUMENT "x-tenant-id: required
 * with the admin token".
 *
 * @generated from service tickwheel.v1.SchedulerService
 */
export const SchedulerService: GenService<{
  /**
   * Submit one task. An idempotent resubmit returns the existing task.
   *
   * @generated from rpc tickwheel.v1.SchedulerService.SubmitTask
   */
  submitTask: {
    methodKind: "unary";
    input: typeof SubmitTaskRequestSchema;
    output: typeof SubmitTaskResponseSchema;
  },
  /**
   * Submit many tasks in one call (one batched write).
   *
   * @generated from rpc tickwheel.v1.SchedulerService.SubmitTasks
   */
  submitTasks: {
    methodKind: "unary";
    input: typeof SubmitTasksRequestSchema;
    output: typeof SubmitTasksResponseSchema;
  },
  /**
   * Read one task.
   *
   * @generated from rpc tickwheel.v1.SchedulerService.GetTask
   */
  getTask: {
    methodKind: "unary";
    input: typeof GetTaskRequestSchema;
    output: typeof GetTaskResponseSchema;
  },
  /**
   * Cancel a task in any non-terminal state.
   *
   * @generated from rpc tickwheel.v1.SchedulerService.CancelTask
   */
  cancelTask: {
    methodKind: "unary";
    input: typeof CancelTaskRequestSchema;
    output: typeof CancelTaskResponseSchema;
  },
  /**
   * List tasks with filters, paginated.
   *
   * @generated from rpc tickwheel.v1.SchedulerService.ListTasks
   */
  listTasks: {
    methodKind: "unary";
    input: typeof ListTasksRequestSchema;
    output: typeof ListTasksResponseSchema;
  },
  /**
   * Move a DEAD_LETTER task back to SCHEDULED (operator action, audited).
   *
   * @generated from rpc tickwheel.v1.SchedulerService.RedriveTask
   */
  redriveTask: {
    methodKind: "unary";
    input: typeof RedriveTaskRequestSchema;
    output: typeof RedriveTaskResponseSchema;
  },
  /**
   * Wait for a task to reach a terminal state (COMPLETED, CANCELLED, DEAD_LETTER):
   * answers as soon as it does, or with its current state when `timeout_s` passes
   * (a long poll; call again to wait longer). NOT_FOUND for an unknown task.
   *
   * @generated from rpc tickwheel.v1.SchedulerService.WaitTask
   */
  waitTask: {
    methodKind: "unary";
    input: typeof WaitTaskRequestSchema;
    output: typeof WaitTaskResponseSchema;
  },
  /**
   * Submit a DAG of tasks (nodes plus parent -> child edges) in one batch. A child
   * runs when all its parents completed. Validated whole: no cycle, no unknown or
   * duplicate node id, at most 20,000 nodes and 100,000 edges (INVALID_ARGUMENT
   * naming the problem, e.g. `edges[7].child` or `edges` for a cycle).
   *
   * @generated from rpc tickwheel.v1.SchedulerService.SubmitWorkflow
   */
  submitWorkflow: {
    methodKind: "unary";
    input: typeof SubmitWorkflowRequestSchema;
    output: typeof SubmitWorkflowResponseSchema;
  },
  /**
   * Read a workflow with every node's task (and so its state) and the edges.
   *
   * @generated from rpc tickwheel.v1.SchedulerService.GetWorkflow
   */
  getWorkflow: {
    methodKind: "unary";
    input: typeof GetWorkflowRequestSchema;
    output: typeof GetWorkflowResponseSchema;
  },
  /**
   * Create a cron or fixed-interval schedule; each occurrence becomes one task.
   *
   * @generated from rpc tickwheel.v1.SchedulerService.CreateSchedule
   */
  createSchedule: {
    methodKind: "unary";
    input: typeof CreateScheduleRequestSchema;
    output: typeof CreateScheduleResponseSchema;
  },
  /**
   * Read one schedule.
   *
   * @generated from rpc tickwheel.v1.SchedulerService.GetSchedule
   */
  getSchedule: {
    methodKind: "unary";
    input: typeof GetScheduleRequestSchema;
    output: typeof GetScheduleResponseSchema;
  },
  /**
   * The tenant's schedules, by name.
   *
   * @generated from rpc tickwheel.v1.SchedulerService.ListSchedules
   */
  listSchedules: {
    methodKind: "unary";
    input: typeof ListSchedulesRequestSchema;
    output: typeof ListSchedulesResponseSchema;
  },
  /**
   * Stop creating occurrences (a buffered occurrence is dropped).
   *
   * @generated from rpc tickwheel.v1.SchedulerService.PauseSchedule
   */
  pauseSchedule: {
    methodKind: "unary";
    input: typeof PauseScheduleRequestSchema;
    output: typeof PauseScheduleResponseSchema;
  },
  /**
   * Create occurrences again, from the first one after now (the pause is not caught up).
   *
   * @generated from rpc tickwheel.v1.SchedulerService.ResumeSchedule
   */
  resumeSchedule: {
    methodKind: "unary";
    input: typeof ResumeScheduleRequestSchema;
    output: typeof ResumeScheduleResponseSchema;
  },
  /**
   * Delete a schedule; tasks it already created stay.
   *
   * @generated from rpc tickwheel.v1.SchedulerService.DeleteSchedule
   */
  deleteSchedule: {
    methodKind: "unary";
    input: typeof DeleteScheduleRequestSchema;
    output: typeof DeleteScheduleResponseSchema;
  },
  /**
   * Register (or replace) a dead man's switch expectation that `tickwheel watchdog`
   * checks: the job or schedule must complete every interval, give or take a tolerance.
   *
   * @generated from rpc tickwheel.v1.SchedulerService.RegisterExpectation
   */
  registerExpectation: {
    methodKind: "unary";
    input: typeof RegisterExpectationRequestSchema;
    output: typeof RegisterExpectationResponseSchema;
  },
  /**
   * The tenant's expectations, by job id.
   *
   * @generated from rpc tickwheel.v1.SchedulerService.ListExpectations
   */
  listExpectations: {
    methodKind: "unary";
    input: typeof ListExpectationsRequestSchema;
    output: typeof ListExpectationsResponseSchema;
  },
  /**
   * Every state change of one task, oldest first, from the append-only audit
   * (task_transitions): NOT_FOUND for another tenant's task.
   *
   * @generated from rpc tickwheel.v1.SchedulerService.GetTaskHistory
   */
  getTaskHistory: {
    methodKind: "unary";
    input: typeof GetTaskHistoryRequestSchema;
    output: typeof GetTaskHistoryResponseSchema;
  },
  /**
   * The tenant's workflows, newest first (headers only; GetWorkflow has the nodes).
   *
   * @generated from rpc tickwheel.v1.SchedulerService.ListWorkflows
   */
  listWorkflows: {
    methodKind: "unary";
    input: typeof ListWorkflowsRequestSchema;
    output: typeof ListWorkflowsResponseSchema;
  },
  /**
   * Cancel every node of a workflow that has not finished (each as CancelTask does: a
   * running one is marked cancel_requested and its worker told); finished nodes stay.
   *
   * @generated from rpc tickwheel.v1.SchedulerService.CancelWorkflow
   */
  cancelWorkflow: {
    methodKind: "unary";
    input: typeof CancelWorkflowRequestSchema;
    output: typeof CancelWorkflowResponseSchema;
  },
  /**
   * Delete the tenant's expectation for a job id: the watchdog stops checking it.
   * NOT_FOUND when the tenant has none for that job id.
   *
   * @generated from rpc tickwheel.v1.SchedulerService.DeleteExpectation
   */
  deleteExpectation: {
    methodKind: "unary";
    input: typeof DeleteExpectationRequestSchema;
    output: typeof DeleteExpectationResponseSchema;
  },
  /**
   * How many tasks match a filter, grouped by state, type and pool (with the admin
   * token and no `x-tenant-id`: by tenant too). Counted exactly, but served from a
   * short-lived cache per (tenant, filter) on the node: an answer may be up to the
   * node's `--count-cache-s` (default 5 s) old, and up to 60 s old while a refresh runs
   * in the background; `as_of` says when it was taken.
   *
   * @generated from rpc tickwheel.v1.SchedulerService.CountTasks
   */
  countTasks: {
    methodKind: "unary";
    input: typeof CountTasksRequestSchema;
    output: typeof CountTasksResponseSchema;
  },
  /**
   * How many tasks will fire in each second or minute of the coming window (by default
   * the next hour by minute), by pool, with and without the jitter offset applied:
   * from the store's SCHEDULED, PRELOADED and RETRYING rows.
   *
   * @generated from rpc tickwheel.v1.SchedulerService.GetForecast
   */
  getForecast: {
    methodKind: "unary";
    input: typeof GetForecastRequestSchema;
    output: typeof GetForecastResponseSchema;
  },
  /**
   * The workers connected to the node that answers (each node knows its own streams;
   * a cluster's dashboard asks every node). An API key sees its tenant's workers only.
   *
   * @generated from rpc tickwheel.v1.SchedulerService.ListWorkers
   */
  listWorkers: {
    methodKind: "unary";
    input: typeof ListWorkersRequestSchema;
    output: typeof ListWorkersResponseSchema;
  },
  /**
   * Recent throughput and dispatch lateness, per bucket of the last minutes, from the
   * store's audit (every node's work; the audit is indexed by time, so a window reads
   * only its own rows). A failed attempt is a RUNNING task's failure or lease expiry.
   *
   * @generated from rpc tickwheel.v1.SchedulerService.GetActivity
   */
  getActivity: {
    methodKind: "unary";
    input: typeof GetActivityRequestSchema;
    output: typeof GetActivityResponseSchema;
  },
  /**
   * ---- Bulk actions in two steps, so the caller acts on exactly what it was shown.
   * PlanBulkAction counts the tasks a filter matches now and returns a plan token
   * that carries the action, the filter and the time of the count; RunBulkAction takes
   * only that token (never a filter), so a reloaded page or a lost filter can never
   * widen the action. The run acts on the tasks that match the filter, were created
   * at or before the plan's time and are still in a state the action applies to
   * (cancel: SCHEDULED, PRELOADED, DISPATCHED, RUNNING or RETRYING, as CancelTask;
   * redrive: DEAD_LETTER, as RedriveTask). A plan token is valid for 15 minutes and
   * only for its tenant (scope `submit`). A plan or run covers at most 100,000 tasks:
   * a filter that matches more answers INVALID_ARGUMENT "filter: matches more than
   * 100,000 tasks" (narrow it by type, pools or scheduled time).
   *
   * @generated from rpc tickwheel.v1.SchedulerService.PlanBulkAction
   */
  planBulkAction: {
    methodKind: "unary";
    input: typeof PlanBulkActionRequestSchema;
    output: typeof PlanBulkActionResponseSchema;
  },
  /**
   * Run a planned bulk action (see PlanBulkAction). Writes in pages of 1,000 through
   * the single-task paths: each task's change is audited (reason "cancelled" or
   * "redriven") and its worker told, as CancelTask's or RedriveTask's would be. Safe
   * to repeat: a second run of the same token matches only what still applies.
   *
   * @generated from rpc tickwheel.v1.SchedulerService.RunBulkAction
   */
  runBulkAction: {
    methodKind: "unary";
    input: typeof RunBulkActionRequestSchema;
    output: typeof RunBulkActionResponseSchema;
  },
}> = /*@__PURE__*/
  serviceDesc(file_tickwheel_v1_tickwheel, 0);

/**
 * Workers receive tasks and commit results. Every write carries the fencing token of
 * the assignment; a stale token is rejected (the worker is a zombie).
 *
 * A task belongs to the worker it was dispatched to (its `Hello.worker_id`). On a
 * stream, a write (ack, heartbeat, checkpoint, complete, fail, release, cancel
 * confirmation) for a task this stream was not given is accepted only when the task
 * was dispatched to the same `worker_id` with the same token and is still leased: the
 * worker reconnected mid-task, and its new stream takes the task over (a RUNNING task
 * stays RUNNING; keep the same `worker_id` across reconnects and heartbeat what you
 * still run). A write for a task dispatched to another worker id is rejected with
 * reason "stale_fencing_token". When a stream closes, only the tasks it was given (or
 * took over) and never acknowledged go back to PRELOADED; RUNNING tasks keep their
 * lease until it expires. Shared (SYSTEM-tier) Kafka consumers write the tasks that
 * the broker delivered to them.
 *
 * @generated from service tickwheel.v1.WorkerService
 */
export const WorkerService: GenService<{
  /**
   * One bidirectional stream per worker process. The first message must be `hello`.
   * In a region that is not the tenant's home it ends at once with FAILED_PRECONDITION
   * and the WRONG_REGION detail naming the home's endpoints (see Regions at the top).
   *
   * @generated from rpc tickwheel.v1.WorkerService.Connect
   */
  connect: {
    methodKind: "bidi_streaming";
    input: typeof WorkerMessageSchema;
    output: typeof ServerMessageSchema;
  },
  /**
   * Fenced completion from anywhere (outside a stream).
   *
   * @generated from rpc tickwheel.v1.WorkerService.CompleteTask
   */
  completeTask: {
    methodKind: "unary";
    input: typeof CompleteTaskRequestSchema;
    output: typeof CompleteTaskResponseSchema;
  },
  /**
   * Fenced failure from anywhere (outside a stream).
   *
   * @generated from rpc tickwheel.v1.WorkerService.FailTask
   */
  failTask: {
    methodKind: "unary";
    input: typeof FailTaskRequestSchema;
    output: typeof FailTaskResponseSchema;
  },
  /**
   * The cluster's live nodes and the address a worker should dial for each (scope
   * `work`). A node owns only some shards and pushes only their tasks on the streams
   * connected to it, so a worker that wants every shard's work keeps one Connect stream
   * per member. A single node (no cluster) answers itself alone.
   *
   * @generated from rpc tickwheel.v1.WorkerService.Members
   */
  members: {
    methodKind: "unary";
    input: typeof MembersRequestSchema;
    output: typeof MembersResponseSchema;
  },
}> = /*@__PURE__*/
  serviceDesc(file_tickwheel_v1_tickwheel, 1);

/**
 * Operators manage tenants and API keys. The platform admin token (`x-admin-token`)
 * may call every RPC for every tenant. A tenant's API key with the `admin` scope (in
 * `x-api-key`) may call GetTenant, CreateApiKey, ListApiKeys, RevokeApiKey and
 * RotateApiKey for its own tenant only (PERMISSION_DENIED for another tenant's id,
 * NOT_FOUND for another tenant's key id); CreateTenant, UpdateTenant and ListTenants
 * need the admin token.
 *
 * @generated from service tickwheel.v1.AdminService
 */
export const AdminService: GenService<{
  /**
   * Create a tenant.
   *
   * @generated from rpc tickwheel.v1.AdminService.CreateTenant
   */
  createTenant: {
    methodKind: "unary";
    input: typeof CreateTenantRequestSchema;
    output: typeof CreateTenantResponseSchema;
  },
  /**
   * Read a tenant.
   *
   * @generated from rpc tickwheel.v1.AdminService.GetTenant
   */
  getTenant: {
    methodKind: "unary";
    input: typeof GetTenantRequestSchema;
    output: typeof GetTenantResponseSchema;
  },
  /**
   * Change a tenant's quotas or tier.
   *
   * @generated from rpc tickwheel.v1.AdminService.UpdateTenant
   */
  updateTenant: {
    methodKind: "unary";
    input: typeof UpdateTenantRequestSchema;
    output: typeof UpdateTenantResponseSchema;
  },
  /**
   * Create an API key for a tenant; the secret is returned once.
   *
   * @generated from rpc tickwheel.v1.AdminService.CreateApiKey
   */
  createApiKey: {
    methodKind: "unary";
    input: typeof CreateApiKeyRequestSchema;
    output: typeof CreateApiKeyResponseSchema;
  },
  /**
   * API keys (see "API keys" below for who may call these).
   * Every key of a tenant, revoked and expired ones too; never a secret.
   *
   * @generated from rpc tickwheel.v1.AdminService.ListApiKeys
   */
  listApiKeys: {
    methodKind: "unary";
    input: typeof ListApiKeysRequestSchema;
    output: typeof ListApiKeysResponseSchema;
  },
  /**
   * Revoke a key: new calls with it fail at once on the node that revoked it and
   * within a few seconds (auth cache) elsewhere; open worker streams end within the
   * stream re-check bound (docs/keys.md).
   *
   * @generated from rpc tickwheel.v1.AdminService.RevokeApiKey
   */
  revokeApiKey: {
    methodKind: "unary";
    input: typeof RevokeApiKeyRequestSchema;
    output: typeof RevokeApiKeyResponseSchema;
  },
  /**
   * A new key with the same tenant, name and scopes; the old key keeps working for
   * the grace and then expires (two keys live during a rotation).
   *
   * @generated from rpc tickwheel.v1.AdminService.RotateApiKey
   */
  rotateApiKey: {
    methodKind: "unary";
    input: typeof RotateApiKeyRequestSchema;
    output: typeof RotateApiKeyResponseSchema;
  },
  /**
   * Every tenant, a page at a time (platform admin token only).
   *
   * @generated from rpc tickwheel.v1.AdminService.ListTenants
   */
  listTenants: {
    methodKind: "unary";
    input: typeof ListTenantsRequestSchema;
    output: typeof ListTenantsResponseSchema;
  },
  /**
   * Concurrency keys (docs/flow-control.md): set how many tasks of one key of a task
   * type may run at once, cluster-wide (the admin token, or an admin key of that
   * tenant). Takes effect at the next dispatch; running tasks are never stopped.
   *
   * @generated from rpc tickwheel.v1.AdminService.SetConcurrencyLimit
   */
  setConcurrencyLimit: {
    methodKind: "unary";
    input: typeof SetConcurrencyLimitRequestSchema;
    output: typeof SetConcurrencyLimitResponseSchema;
  },
  /**
   * The concurrency limits set for a tenant's task types.
   *
   * @generated from rpc tickwheel.v1.AdminService.ListConcurrencyLimits
   */
  listConcurrencyLimits: {
    methodKind: "unary";
    input: typeof ListConcurrencyLimitsRequestSchema;
    output: typeof ListConcurrencyLimitsResponseSchema;
  },
}> = /*@__PURE__*/
  serviceDesc(file_tickwheel_v1_tickwheel, 2);

