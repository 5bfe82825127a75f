/**
 * Scrubbing before anything leaves the process, as the service does on its side (CONTRACT §5): credentials'
 * headers dropped, values under sensitive keys replaced, anything shaped like a service key replaced, strings cut
 * at 8 KiB (CONTRACT §4).
 */

export const REDACTED = '[redacted]';
const MAX_STRING = 8192;
export const SENSITIVE_KEY = /password|passwd|secret|token|api[-_]?key|authorization|cookie/i;
const SERVICE_KEY = /svc_(?:test|live|sess)_[A-Za-z0-9]{16,}/g;
const DROPPED_HEADERS = new Set([
  'authorization',
  'cookie',
  'set-cookie',
  'x-api-key',
  'proxy-authorization',
]);
const MAX_DEPTH = 8;

export function scrubString(s: string): string {
  const cut = s.length > MAX_STRING ? s.slice(0, MAX_STRING) : s;
  return cut.includes('svc_') ? cut.replace(SERVICE_KEY, REDACTED) : cut;
}

/** A JSON-able copy of `value`, scrubbed: objects and arrays to depth 8, then their JSON text. */
export function scrubValue(value: unknown, depth = 0): unknown {
  if (typeof value === 'string') return scrubString(value);
  if (value === null || typeof value === 'number' || typeof value === 'boolean') return value;
  if (typeof value === 'bigint') return value.toString();
  if (typeof value !== 'object') return value === undefined ? null : String(value);
  if (value instanceof Date) return value.toISOString();
  if (depth >= MAX_DEPTH) return scrubString(safeJson(value));
  if (Array.isArray(value)) return value.map((v) => scrubValue(v, depth + 1));
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) {
    if (v === undefined || typeof v === 'function') continue;
    // defineProperty: `__proto__` stays a key (an assignment would set the copy's prototype).
    Object.defineProperty(out, k, {
      value: SENSITIVE_KEY.test(k) ? REDACTED : scrubValue(v, depth + 1),
      enumerable: true,
      writable: true,
      configurable: true,
    });
  }
  return out;
}

function safeJson(value: unknown): string {
  try {
    return JSON.stringify(value) ?? '';
  } catch {
    return '[unserializable]';
  }
}

/**
 * The request headers asked for (`names`, lower-case; `*`: all), from `rawHeaders` (name, value, …); credentials'
 * headers never. A repeated header keeps its values as a list.
 */
export function pickHeaders(
  raw: readonly string[],
  names: readonly string[],
): Record<string, string | string[]> | null {
  const all = names.includes('*');
  let out: Record<string, string | string[]> | null = null;
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const name = raw[i]!.toLowerCase();
    if ((!all && !names.includes(name)) || DROPPED_HEADERS.has(name)) continue;
    const value = SENSITIVE_KEY.test(name) ? REDACTED : scrubString(raw[i + 1]!);
    out ??= Object.create(null) as Record<string, string | string[]>;
    const seen = out[name];
    out[name] = seen === undefined ? value : Array.isArray(seen) ? [...seen, value] : [seen, value];
  }
  return out;
}
