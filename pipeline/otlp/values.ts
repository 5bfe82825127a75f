import { scrubTree } from '../scrub.js';
import { hexId, toNumber } from './proto.js';

/** OTLP attribute values (AnyValue) and key-value lists as plain values, from protobuf or OTLP/JSON. */

export type AttrValue = string | number | boolean | null | AttrValue[] | { [key: string]: AttrValue };
export type Attributes = Record<string, AttrValue>;

export interface PbAnyValue {
  value?: string;
  stringValue?: string;
  boolValue?: boolean;
  intValue?: unknown;
  doubleValue?: number;
  arrayValue?: { values?: PbAnyValue[] };
  kvlistValue?: { values?: PbKeyValue[] };
  bytesValue?: Uint8Array;
}
export interface PbKeyValue {
  key?: string;
  value?: PbAnyValue | null;
}

/** Arrays and maps nested deeper than this are kept as a marker string: every later walk stays bounded. */
export const MAX_VALUE_DEPTH = 8;
const TOO_DEEP = `[nested deeper than ${MAX_VALUE_DEPTH} levels]`;

/**
 * A fresh attribute map. Without a prototype: a key such as `__proto__` is an ordinary key, and a walk by the
 * parts of a dotted key never reaches Object.prototype.
 */
export const newAttributes = (): Attributes => Object.create(null) as Attributes;

/** A double as a value: NaN and the infinities (valid in OTLP) in their string form, as JSON cannot hold them. */
const double = (n: number): number | string => (Number.isFinite(n) ? n : String(n));

/** An AnyValue as protobufjs decodes it: the oneof's virtual `value` names the field that is set. */
export function pbValue(v: PbAnyValue | null | undefined, depth = 0): AttrValue {
  if (!v) return null;
  switch (v.value) {
    case 'stringValue':
      return v.stringValue ?? '';
    case 'boolValue':
      return v.boolValue ?? false;
    case 'intValue':
      return toNumber(v.intValue);
    case 'doubleValue':
      return double(v.doubleValue ?? 0);
    case 'arrayValue':
      if (depth >= MAX_VALUE_DEPTH) return TOO_DEEP;
      return (v.arrayValue?.values ?? []).map((x) => pbValue(x, depth + 1));
    case 'kvlistValue':
      if (depth >= MAX_VALUE_DEPTH) return TOO_DEEP;
      return pbAttributes(v.kvlistValue?.values, depth + 1);
    case 'bytesValue':
      return hexId(v.bytesValue);
    default:
      return null;
  }
}

export function pbAttributes(kvs: PbKeyValue[] | null | undefined, depth = 0): Attributes {
  const out = newAttributes();
  for (const kv of kvs ?? []) if (kv.key) out[kv.key] = pbValue(kv.value, depth);
  return out;
}

/** An AnyValue in OTLP/JSON: one key names the kind; 64-bit integers may come as strings. */
export function jsonValue(v: unknown, depth = 0): AttrValue {
  if (v === null || typeof v !== 'object') return null;
  const o = v as Record<string, unknown>;
  if ('stringValue' in o) return String(o.stringValue ?? '');
  if ('boolValue' in o) return o.boolValue === true;
  if ('intValue' in o) return double(Number(o.intValue));
  if ('doubleValue' in o) return double(Number(o.doubleValue));
  if ('arrayValue' in o || 'kvlistValue' in o) {
    if (depth >= MAX_VALUE_DEPTH) return TOO_DEEP;
    if ('kvlistValue' in o)
      return jsonAttributes((o.kvlistValue as { values?: unknown } | null)?.values, depth + 1);
    const values = (o.arrayValue as { values?: unknown[] } | null)?.values;
    return Array.isArray(values) ? values.map((x) => jsonValue(x, depth + 1)) : [];
  }
  if ('bytesValue' in o) return Buffer.from(String(o.bytesValue ?? ''), 'base64').toString('hex');
  return null;
}

export function jsonAttributes(kvs: unknown, depth = 0): Attributes {
  const out = newAttributes();
  if (!Array.isArray(kvs)) return out;
  for (const kv of kvs as { key?: unknown; value?: unknown }[]) {
    if (kv && typeof kv.key === 'string' && kv.key) out[kv.key] = jsonValue(kv.value, depth);
  }
  return out;
}

export const list = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);
/** OTLP/JSON ids are hex strings (not base64, unlike other bytes). */
export const jsonId = (v: unknown) => (typeof v === 'string' ? v.toLowerCase() : '');
/** OTLP/JSON enums are numbers; names are accepted too. */
export function jsonEnum(v: unknown, names: readonly string[], prefix: string): number {
  if (typeof v === 'number') return v;
  if (typeof v === 'string') {
    const i = names.indexOf(v.replace(prefix, '').toLowerCase());
    return i < 0 ? 0 : i;
  }
  return 0;
}

/**
 * A map or array value as JSON text, scrubbed by key first (a value under a key such as `authorization` or
 * `password` is redacted before its map becomes text the key rule can no longer see).
 */
export function jsonText(value: AttrValue): string {
  return JSON.stringify(scrubTree(value, true, { truncated: false }));
}

/** A non-empty string attribute, or null. */
export const str = (v: AttrValue | undefined): string | null =>
  typeof v === 'string' && v !== '' ? v : null;

/** Nanoseconds as milliseconds, to the microsecond (a double holds no finer at today's epoch). */
export const msOf = (ns: bigint) => Number(ns / 1000n) / 1000;

/** An empty or all-zero trace or span id. */
export const isZeroId = (id: string) => /^0*$/.test(id);

/** The service and environment a resource names (CONTRACT §12), as every signal maps them. */
export function resourceIdentity(resource: Attributes): { service: string; environment: string } {
  return {
    service: str(resource['service.name']) ?? 'unknown_service',
    environment:
      str(resource['deployment.environment.name']) ?? str(resource['deployment.environment']) ?? 'default',
  };
}
