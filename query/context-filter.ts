import type { ErrorDetail } from '../schemas/records.js';

/**
 * Context filters (CONTRACT §6.3): `context.<dotted.path>=<value>`, repeated for OR, matched by type. The value
 * is read as the query language reads it: `"…"` a string (`\"` escapes a quote), `true`/`false` a boolean, a
 * number literal a number, anything else a bare string.
 */

export type ContextValue = string | number | boolean;

export interface ContextFilter {
  path: string;
  values: ContextValue[];
}

export const CONTEXT_PATH = /^[A-Za-z_][A-Za-z0-9_-]*(\.[A-Za-z_][A-Za-z0-9_-]*)*$/;
const NUMBER = /^-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?$/;
/** An indexed string value longer than this is not indexed, so it never matches (CONTRACT §4). */
export const MAX_INDEXED_STRING = 256;

export function parseContextValue(raw: string): ContextValue {
  if (raw.length >= 2 && raw.startsWith('"') && raw.endsWith('"'))
    return raw.slice(1, -1).replace(/\\"/g, '"');
  if (raw === 'true') return true;
  if (raw === 'false') return false;
  if (NUMBER.test(raw)) return Number(raw);
  return raw;
}

/** Splits `context.*` query parameters out; bad paths are details for a VALIDATION_ERROR. */
export function contextFiltersFromQuery(query: Record<string, unknown>): {
  filters: ContextFilter[];
  errors: ErrorDetail[];
} {
  const filters: ContextFilter[] = [];
  const errors: ErrorDetail[] = [];
  for (const [key, value] of Object.entries(query)) {
    if (!key.startsWith('context.')) continue;
    const path = key.slice('context.'.length);
    if (!CONTEXT_PATH.test(path)) {
      errors.push({ path: key, message: 'expected context.<dotted.path>' });
      continue;
    }
    const raws = (Array.isArray(value) ? value : [value]).map(String);
    filters.push({ path, values: raws.map(parseContextValue) });
  }
  return { filters, errors };
}

/**
 * SQL for the filters over the JSON `context` column, ANDed across keys and ORed across values, each value
 * matching only its own JSON type. JSON paths and values are bound parameters.
 */
export function contextFilterSql(
  filters: ContextFilter[],
  params: Record<string, string | number | boolean | null | string[]>,
): string[] {
  return filters.map((f, k) => {
    const p = `ctxPath${k}`;
    params[p] = `$.${f.path}`;
    const alternatives = f.values.map((v, i) => {
      const name = `ctx${k}v${i}`;
      if (typeof v === 'boolean') {
        params[name] = String(v);
        return `(json_type(context, $${p}) = 'BOOLEAN' AND json_extract_string(context, $${p}) = $${name})`;
      }
      if (typeof v === 'number') {
        params[name] = v;
        return `(json_type(context, $${p}) IN ('BIGINT', 'UBIGINT', 'DOUBLE') AND json_extract(context, $${p})::DOUBLE = $${name})`;
      }
      if (v.length > MAX_INDEXED_STRING) return 'false';
      params[name] = v;
      return `(json_type(context, $${p}) = 'VARCHAR' AND json_extract_string(context, $${p}) = $${name})`;
    });
    return `(${alternatives.join(' OR ')})`;
  });
}
