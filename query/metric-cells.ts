import type { AggregateQuery, Cell, MetricFilter } from './metrics.js';
import type { KeyTable, MinutesCache } from './minutes-cache.js';

/**
 * The cells a metrics query adds up (query/metrics.ts), and the adding of rollup rows kept in memory to them: per
 * group and time bucket in arrays, a few nanoseconds a row.
 */

/** The same filter on a rollup file's key `k` (the endpoint there is the template). */
export function keyPasses(f: MetricFilter, keys: KeyTable, k: number): boolean {
  if (f.service !== undefined && keys.service[k] !== f.service) return false;
  if (f.environment !== undefined && keys.environment[k] !== f.environment) return false;
  if (f.method !== undefined && keys.method[k] !== f.method) return false;
  if (f.endpoint) {
    const endpoint = keys.endpoint[k];
    if (endpoint === null || endpoint === undefined) return false;
    if (f.endpoint.kind === 'prefix') return endpoint.startsWith(f.endpoint.value);
    return endpoint === f.endpoint.value && keys.templated[k] === false;
  }
  return true;
}

/** Rollup rows to add: of `kind`, in `sidecars`, with a minute in [mFrom, mTo) when given. */
export interface RollupRead {
  sidecars: string[];
  kind: number;
  minutes?: { from: number; to: number };
}

/** A group's values as one string: a Map key (null and each string told apart). */
export const groupKeyOf = (group: readonly (string | null)[]) =>
  group.map((g) => (g === null ? '\u0000' : `\u0001${g}`)).join('');

/**
 * The cells being added up: per group (numbered as met), per time bucket (numbered from the first bucket's start),
 * so that adding a row is two array reads, not a string key per row.
 */
export class Cells {
  readonly #groups = new Map<string, number>();
  readonly #groupValues: (string | null)[][] = [];
  readonly #byGroup: (Cell | undefined)[][] = [];
  /** Every cell, as made. */
  readonly #cells: Cell[] = [];
  readonly #t0: number;

  constructor(
    from: number,
    readonly intervalMs: number | null,
  ) {
    this.#t0 = intervalMs === null ? 0 : Math.floor(from / intervalMs) * intervalMs;
  }

  groupId(group: (string | null)[]): number {
    const key = groupKeyOf(group);
    let id = this.#groups.get(key);
    if (id === undefined) {
      id = this.#groupValues.length;
      this.#groups.set(key, id);
      this.#groupValues.push(group);
      this.#byGroup.push([]);
    }
    return id;
  }

  /** The cell of a group and a time (ms) in range. */
  at(groupId: number, time: number): Cell {
    const iv = this.intervalMs;
    const index = iv === null ? 0 : Math.floor(time / iv) - this.#t0 / iv;
    const row = this.#byGroup[groupId]!;
    let cell = row[index];
    if (!cell) {
      cell = {
        t: iv === null ? 0 : this.#t0 + index * iv,
        group: this.#groupValues[groupId]!,
        requests: 0,
        failed: 0,
        durationSum: 0,
      };
      row[index] = cell;
      this.#cells.push(cell);
    }
    return cell;
  }

  done(): Cell[] {
    return this.#cells;
  }
}

/** The first index of sorted `values` at or above `v`. */
export function lowerBound(values: Float64Array, n: number, v: number): number {
  let lo = 0;
  let hi = n;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (values[mid]! < v) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** A key's group not worked out yet. */
export const UNKNOWN = -2;

/** Adds a rollup read's counts (kinds 0, 2, 6, and RAW_KIND: an execution a row) to the cells. */
export async function addRollups(
  cache: MinutesCache,
  q: AggregateQuery,
  read: RollupRead,
  into: Cells,
): Promise<void> {
  const files = await Promise.all(
    read.sidecars.map(async (file) => ({
      keys: await cache.keys(file, read.kind),
      rows: await cache.rows(file, read.kind),
    })),
  );
  for (const { keys, rows } of files) {
    // Per key of the file: its group (-1: filtered out), worked out when a row first uses it (a file's table names
    // the keys of every kind: most are not in the kind read).
    const groupOf = new Int32Array(keys.service.length).fill(UNKNOWN);
    const groupOfKey = (k: number) => {
      const g = keyPasses(q.filter, keys, k)
        ? into.groupId(q.groupBy.map((f) => (keys[f][k] ?? null) as string | null))
        : -1;
      groupOf[k] = g;
      return g;
    };
    // Rows come sorted by minute (a start, for RAW_KIND) and key: a range is a slice, a run of rows one cell.
    const start = read.minutes ? lowerBound(rows.minute, rows.n, read.minutes.from) : 0;
    const end = read.minutes ? lowerBound(rows.minute, rows.n, read.minutes.to) : rows.n;
    let lastMinute = Number.NaN;
    let lastKey = -1;
    let cell: Cell | null = null;
    for (let i = start; i < end; i++) {
      const k = rows.key[i]!;
      let gid = groupOf[k]!;
      if (gid === UNKNOWN) gid = groupOfKey(k);
      if (gid < 0) continue;
      const m = rows.minute[i]!;
      if (m !== lastMinute || k !== lastKey || cell === null) {
        cell = into.at(gid, m);
        lastMinute = m;
        lastKey = k;
      }
      const n = rows.count[i]!;
      cell.requests += n;
      if (keys.outcome[k] === 'failed') cell.failed += n;
      cell.durationSum += rows.dsum[i]!;
    }
  }
}
