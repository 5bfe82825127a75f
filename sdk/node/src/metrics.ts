import { REDACTED, SENSITIVE_KEY, scrubString } from './scrub.js';

/**
 * Metrics aggregated in memory (CONTRACT §13): per name and tags, a counter's sum, a gauge's last value, a
 * histogram's count, sum, min and max; sent as one point each per interval, stamped with the interval's end.
 */

export type Tags = Record<string, string | number | boolean>;

interface Cell {
  name: string;
  type: 'counter' | 'gauge' | 'histogram';
  tags: Record<string, string> | null;
  value: number;
  count: number;
  sum: number;
  min: number;
  max: number;
}

const NAME = /^[A-Za-z_][A-Za-z0-9_.]*$/;
const MAX_TAGS = 20;

/** Tags as the service takes them: at most 20, string values, scrubbed. */
function tagsOf(tags: Tags | undefined): Record<string, string> | null {
  if (!tags || typeof tags !== 'object') return null;
  const entries = Object.entries(tags).slice(0, MAX_TAGS);
  if (entries.length === 0) return null;
  return Object.fromEntries(
    entries.map(([k, v]) => [k, SENSITIVE_KEY.test(k) ? REDACTED : scrubString(String(v))]),
  );
}

export class MetricAggregator {
  #cells = new Map<string, Cell>();

  record(type: Cell['type'], name: string, value: number, tags?: Tags): boolean {
    if (!NAME.test(name) || name.length > 200 || !Number.isFinite(value)) return false;
    const t = tagsOf(tags);
    const key = `${type}\u0000${name}\u0000${t ? JSON.stringify(Object.entries(t).sort()) : ''}`;
    let cell = this.#cells.get(key);
    if (!cell) {
      cell = { name, type, tags: t, value: 0, count: 0, sum: 0, min: value, max: value };
      this.#cells.set(key, cell);
    }
    if (type === 'counter') cell.value += value;
    else if (type === 'gauge') cell.value = value;
    cell.count++;
    cell.sum += value;
    if (value < cell.min) cell.min = value;
    if (value > cell.max) cell.max = value;
    return true;
  }

  /** The interval's points, and a fresh interval. */
  drain(at: number, resource: { service: string; environment: string }): Record<string, unknown>[] {
    const cells = [...this.#cells.values()];
    this.#cells = new Map();
    return cells.map((c) => ({
      name: c.name,
      type: c.type,
      value: c.type === 'histogram' ? { count: c.count, sum: c.sum, min: c.min, max: c.max } : c.value,
      timestamp: at,
      ...resource,
      ...(c.tags ? { tags: c.tags } : {}),
    }));
  }
}
