import type { ErrorDetail } from '../schemas/records.js';
import { contextColumn, MAX_INDEXED_STRING } from '../storage/context-columns.js';

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

/** A column in the files being read, or NULL when none of them has it (a key indexed after they were written). */
export type ColumnRef = (name: string) => string;

export const columnRef =
  (available?: ReadonlySet<string>): ColumnRef =>
  (name) =>
    !available || available.has(name) ? `"${name}"` : 'NULL';

/**
 * SQL for the filters over the typed indexed-context columns (storage/context-columns.ts): ANDed across keys,
 * ORed across values, each value compared only with the column of its own type. Values are bound parameters;
 * column names come from validated, indexed paths.
 */
export function contextFilterSql(
  filters: ContextFilter[],
  params: Record<string, string | number | boolean | null | string[]>,
  col: ColumnRef = columnRef(),
): string[] {
  return filters.map((f, k) => {
    const alternatives = f.values.map((v, i) => {
      const name = `ctx${k}v${i}`;
      if (typeof v === 'string' && v.length > MAX_INDEXED_STRING) return 'false';
      params[name] = v;
      const kind = typeof v === 'boolean' ? 'b' : typeof v === 'number' ? 'n' : 's';
      return `${col(contextColumn(f.path, kind))} = $${name}`;
    });
    return `(${alternatives.join(' OR ')})`;
  });
}

/** The row's value for a filtered key, whichever type it has: the matched context. */
export const matchedValueSql = (path: string, col: ColumnRef) =>
  `coalesce(to_json(${col(contextColumn(path, 's'))}), to_json(${col(contextColumn(path, 'n'))}), to_json(${col(contextColumn(path, 'b'))}))::VARCHAR`;
