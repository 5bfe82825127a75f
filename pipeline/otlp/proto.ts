import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import protobuf from 'protobufjs';

/**
 * The OTLP message types, loaded by reflection from the vendored opentelemetry-proto files
 * (vendor/opentelemetry-proto, Apache-2.0), once per thread. Decoding reads the message objects protobufjs makes,
 * without `toObject` (about twice the speed, STACK-NOTES).
 */

const SERVICES = {
  traces: 'opentelemetry/proto/collector/trace/v1/trace_service.proto',
  logs: 'opentelemetry/proto/collector/logs/v1/logs_service.proto',
  metrics: 'opentelemetry/proto/collector/metrics/v1/metrics_service.proto',
} as const;

export type Signal = keyof typeof SERVICES;

const REQUEST_TYPES: Record<Signal, string> = {
  traces: 'opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest',
  logs: 'opentelemetry.proto.collector.logs.v1.ExportLogsServiceRequest',
  metrics: 'opentelemetry.proto.collector.metrics.v1.ExportMetricsServiceRequest',
};

const RESPONSE_TYPES: Record<Signal, string> = {
  traces: 'opentelemetry.proto.collector.trace.v1.ExportTraceServiceResponse',
  logs: 'opentelemetry.proto.collector.logs.v1.ExportLogsServiceResponse',
  metrics: 'opentelemetry.proto.collector.metrics.v1.ExportMetricsServiceResponse',
};

/** The vendored proto tree, found from this file in the source tree or under dist/. */
function protoDir(): string {
  let dir = path.dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const candidate = path.join(dir, 'vendor', 'opentelemetry-proto');
    if (existsSync(candidate)) return candidate;
    const up = path.dirname(dir);
    if (up === dir) throw new Error('vendor/opentelemetry-proto not found above the service code');
    dir = up;
  }
}

let root: protobuf.Root | null = null;

function loadRoot(): protobuf.Root {
  if (root) return root;
  const base = protoDir();
  const r = new protobuf.Root();
  // Imports in the files are relative to the tree's root (`opentelemetry/proto/common/v1/common.proto`).
  r.resolvePath = (_origin, target) => path.join(base, target);
  for (const file of Object.values(SERVICES)) r.loadSync(file);
  r.resolveAll();
  root = r;
  return r;
}

/** The request type of a signal (ExportTraceServiceRequest, …). */
export function requestType(signal: Signal): protobuf.Type {
  return loadRoot().lookupType(REQUEST_TYPES[signal]);
}

/** The response type of a signal (ExportTraceServiceResponse, …). */
export function responseType(signal: Signal): protobuf.Type {
  return loadRoot().lookupType(RESPONSE_TYPES[signal]);
}

/**
 * `google.rpc.Status`, the body of an OTLP/HTTP error (googleapis google/rpc/status.proto): fields 1 and 2 only;
 * its `details` (3, repeated Any) are never sent.
 */
let status: protobuf.Type | null = null;
export function statusType(): protobuf.Type {
  status ??= new protobuf.Type('Status')
    .add(new protobuf.Field('code', 1, 'int32'))
    .add(new protobuf.Field('message', 2, 'string'));
  return status;
}

/** An OTLP `bytes` id as lower-case hex ("" for none). */
export function hexId(bytes: Uint8Array | null | undefined): string {
  if (!bytes || bytes.length === 0) return '';
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('hex');
}

/** A uint64 or int64 as protobufjs gives it (a Long-like, or a number) or OTLP/JSON writes it (a string), exactly. */
export function toBigInt(v: unknown): bigint {
  if (typeof v === 'bigint') return v;
  if (typeof v === 'number') return Number.isFinite(v) ? BigInt(Math.trunc(v)) : 0n;
  if (typeof v === 'string') return /^-?\d+$/.test(v) ? BigInt(v) : 0n;
  if (v && typeof v === 'object' && 'low' in v && 'high' in v) {
    const l = v as { low: number; high: number; unsigned?: boolean };
    const high = BigInt(l.unsigned ? l.high >>> 0 : l.high);
    return (high << 32n) | BigInt(l.low >>> 0);
  }
  return 0n;
}

/** The same as a number (attribute values: exact up to 2^53). */
export const toNumber = (v: unknown): number => Number(toBigInt(v));
