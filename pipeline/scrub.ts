import type { ExecutionItem, LogItem, MetricPoint } from '../schemas/ingest-items.js';

/**
 * Scrubbing and string truncation (CONTRACT §4, §5), done in one walk per value.
 *
 * The walk is copy-on-write: a value with nothing to scrub is returned as is, and only the objects on the
 * path to a changed string are copied. The input is never modified, so processing the same parsed payload
 * twice gives the same records.
 */

export const REDACTED = '[redacted]';
/** Longest string kept (UTF-16 code units); longer ones are cut and the record flagged `truncated`. */
export const MAX_STRING_LENGTH = 8192;

// Anything shaped like a service key or session token. Global: every occurrence in a string is replaced.
// Keys carry 32 base62 characters; 16 or more still catches a cut-off key while leaving ordinary names such
// as a metric called svc_live_requests alone.
const SERVICE_KEY_RE = /svc_(?:test|live|sess)_[A-Za-z0-9]{16,}/g;
/**
 * A key holding any of these, in any letter case, is sensitive: its value is redacted whole (context, headers,
 * query, response fields, attributes). The one list: the direct lane (direct-executions.ts) matches it on bytes.
 */
export const SENSITIVE_KEY_WORDS = [
  'password',
  'passwd',
  'secret',
  'token',
  'apikey',
  'api-key',
  'api_key',
  'authorization',
  'cookie',
] as const;
const SENSITIVE_KEY_RE = new RegExp(SENSITIVE_KEY_WORDS.join('|'), 'i');
const DROPPED_HEADERS = new Set([
  'authorization',
  'cookie',
  'set-cookie',
  'x-api-key',
  'proxy-authorization',
]);

/** Collects what the walks did to one record. */
export interface ScrubState {
  truncated: boolean;
}

/** Replaces every service-key-shaped substring; no truncation (for keys and error texts). */
export function redactServiceKeys(text: string): string {
  // indexOf first: nearly no string holds `svc_`, and it is much cheaper than the regex.
  return text.indexOf('svc_') === -1 ? text : text.replace(SERVICE_KEY_RE, REDACTED);
}

export function scrubString(text: string, state: ScrubState): string {
  const clean = redactServiceKeys(text);
  if (clean.length <= MAX_STRING_LENGTH) return clean;
  state.truncated = true;
  // Never split a surrogate pair: half a character is not valid UTF-8 once written out.
  const code = clean.charCodeAt(MAX_STRING_LENGTH - 1);
  const end = code >= 0xd800 && code <= 0xdbff ? MAX_STRING_LENGTH - 1 : MAX_STRING_LENGTH;
  return clean.slice(0, end);
}

export function scrubOptionalString(text: string | null | undefined, state: ScrubState): string | null {
  return text == null ? null : scrubString(text, state);
}

function setField(target: Record<string, unknown>, key: string, value: unknown): void {
  if (key === '__proto__') {
    // A plain assignment would set the prototype instead of a field.
    Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true });
  } else {
    target[key] = value;
  }
}

/**
 * Scrubs every string in `value` (service keys, truncation). With `redactByKey`, a value whose key looks
 * sensitive becomes "[redacted]" whole, at any depth: used for context, headers, query, response fields and
 * log attributes, where the keys are the client's.
 */
export function scrubTree<T>(value: T, redactByKey: boolean, state: ScrubState): T {
  if (typeof value === 'string') return scrubString(value, state) as T;
  if (typeof value !== 'object' || value === null) return value;
  if (Array.isArray(value)) {
    let copy: unknown[] | undefined;
    for (let i = 0; i < value.length; i++) {
      const item: unknown = value[i];
      const clean = scrubTree(item, redactByKey, state);
      if (clean !== item) {
        copy ??= value.slice();
        copy[i] = clean;
      }
    }
    return (copy ?? value) as T;
  }
  const source = value as Record<string, unknown>;
  const keys = Object.keys(source);
  let copy: Record<string, unknown> | undefined;
  for (let i = 0; i < keys.length; i++) {
    const key = keys[i]!;
    const item = source[key];
    const clean = redactByKey && SENSITIVE_KEY_RE.test(key) ? REDACTED : scrubTree(item, redactByKey, state);
    const cleanKey = redactServiceKeys(key);
    if (copy === undefined) {
      if (clean === item && cleanKey === key) continue;
      // Rebuilt rather than spread, so a renamed key keeps its place in the order.
      copy = {};
      for (let j = 0; j < i; j++) setField(copy, keys[j]!, source[keys[j]!]);
    }
    setField(copy, cleanKey, clean);
  }
  return (copy ?? value) as T;
}

/** Drops credential headers (any letter case), then scrubs the rest by key and value. */
export function scrubHeaders<T extends Record<string, unknown>>(headers: T, state: ScrubState): T {
  let kept: Record<string, unknown> | undefined;
  const keys = Object.keys(headers);
  for (let i = 0; i < keys.length; i++) {
    const key = keys[i]!;
    if (!DROPPED_HEADERS.has(key.toLowerCase())) {
      if (kept !== undefined) setField(kept, key, headers[key]);
    } else if (kept === undefined) {
      kept = {};
      for (let j = 0; j < i; j++) setField(kept, keys[j]!, headers[keys[j]!]);
    }
  }
  return scrubTree((kept ?? headers) as T, true, state);
}

/*
 * Per-kind scrubbing. Each takes the validator's own copy of an item (zod, and the fast path of
 * fast-items.ts, build a fresh object for every z.object) and rewrites its fields in place; nested client values (context, attributes…) are still only
 * copied on write, since they may be the parsed payload's own objects.
 */

export function scrubExecutionItem(item: ExecutionItem, state: ScrubState): void {
  if (item.executionId != null) item.executionId = scrubString(item.executionId, state);
  item.traceId = scrubOptionalString(item.traceId, state);
  item.spanId = scrubOptionalString(item.spanId, state);
  item.parentSpanId = scrubOptionalString(item.parentSpanId, state);
  item.service = scrubString(item.service, state);
  item.environment = scrubString(item.environment, state);
  item.endpoint = scrubString(item.endpoint, state);
  item.method = scrubOptionalString(item.method, state);
  const request = item.request;
  if (request != null) {
    if (request.route != null) request.route = scrubString(request.route, state);
    if (request.headers != null) request.headers = scrubHeaders(request.headers, state);
    if (request.query != null) request.query = scrubTree(request.query, true, state);
  }
  const response = item.response;
  if (response != null) {
    if (response.headers != null) response.headers = scrubHeaders(response.headers, state);
    if (response.fields != null) response.fields = scrubTree(response.fields, true, state);
  }
  if (item.context != null) item.context = scrubTree(item.context, true, state);
  if (item.exception != null) item.exception = scrubTree(item.exception, false, state);
  if (item.outcomeEvidence != null) item.outcomeEvidence = scrubTree(item.outcomeEvidence, false, state);
  if (item.fingerprint != null) item.fingerprint = scrubTree(item.fingerprint, false, state);
}

export function scrubLogItem(item: LogItem, state: ScrubState): void {
  item.message = scrubString(item.message, state);
  item.service = scrubString(item.service, state);
  item.environment = scrubString(item.environment, state);
  item.executionId = scrubOptionalString(item.executionId, state);
  item.traceId = scrubOptionalString(item.traceId, state);
  item.spanId = scrubOptionalString(item.spanId, state);
  item.logger = scrubOptionalString(item.logger, state);
  if (item.attributes != null) item.attributes = scrubTree(item.attributes, true, state);
  if (item.exception != null) item.exception = scrubTree(item.exception, false, state);
}

/** Metric records have no `truncated` column: long strings are still cut, the state is just not kept. */
export function scrubMetricPoint(item: MetricPoint, state: ScrubState): void {
  item.name = scrubString(item.name, state);
  item.unit = scrubOptionalString(item.unit, state);
  item.service = scrubString(item.service, state);
  item.environment = scrubString(item.environment, state);
  if (item.tags != null) item.tags = scrubTree(item.tags, false, state);
}
