import type { AggregateQuery, Cell, GroupField, MetricFilter } from './metrics.js';
import type { KeyTable, KindRows, MinutesCache } from './minutes-cache.js';

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

/** The groupBy fields' values of a rollup file's key `k`. */
export const groupOfRollupKey = (keys: KeyTable, fields: readonly GroupField[], k: number) =>
  fields.map((f) => (keys[f][k] ?? null) as string | null);

/**
 * The cells being added up: per group (numbered as met), per time bucket (numbered from the first bucket's start),
 * so that adding a row is two array reads, not a string key per row. The figures are kept in typed arrays, a cell
 * a number, until done() makes the cells: adding to an object's number fields boxed a new number each time (2.5 MB
 * of garbage a query).
 */
export class Cells {
  readonly #groups = new Map<string, number>();
  readonly #groupValues: (string | null)[][] = [];
  /** Per group, per time bucket index, the cell's number. */
  readonly #byGroup: (number | undefined)[][] = [];
  readonly #t0: number;
  #n = 0;
  #group = new Int32Array(64);
  #index = new Int32Array(64);
  #requests = new Float64Array(64);
  #failed = new Float64Array(64);
  #durationSum = new Float64Array(64);

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

  /** The index of the time bucket of a time (ms) in range: 0 for the whole range without an interval. */
  bucketIndex(time: number): number {
    const iv = this.intervalMs;
    return iv === null ? 0 : Math.floor(time / iv) - this.#t0 / iv;
  }

  /** The number of the cell of a group and a time (ms) in range. */
  at(groupId: number, time: number): number {
    return this.cellAt(groupId, this.bucketIndex(time));
  }

  /** The number of the cell of a group and a time bucket index. */
  cellAt(groupId: number, index: number): number {
    const row = this.#byGroup[groupId]!;
    let cell = row[index];
    if (cell === undefined) {
      cell = this.#n++;
      if (cell === this.#group.length) this.#grow();
      this.#group[cell] = groupId;
      this.#index[cell] = index;
      row[index] = cell;
    }
    return cell;
  }

  add(cell: number, requests: number, failed: number, durationSum: number): void {
    this.#requests[cell]! += requests;
    this.#failed[cell]! += failed;
    this.#durationSum[cell]! += durationSum;
  }

  #grow(): void {
    const grown = <T extends Int32Array | Float64Array>(a: T): T => {
      const b = new (a.constructor as new (n: number) => T)(a.length * 2);
      b.set(a);
      return b;
    };
    this.#group = grown(this.#group);
    this.#index = grown(this.#index);
    this.#requests = grown(this.#requests);
    this.#failed = grown(this.#failed);
    this.#durationSum = grown(this.#durationSum);
  }

  /** The cells with executions, as made. */
  done(): Cell[] {
    const out: Cell[] = [];
    const iv = this.intervalMs;
    for (let c = 0; c < this.#n; c++) {
      if (this.#requests[c] === 0) continue;
      out.push({
        t: iv === null ? 0 : this.#t0 + this.#index[c]! * iv,
        group: this.#groupValues[this.#group[c]!]!,
        requests: this.#requests[c]!,
        failed: this.#failed[c]!,
        durationSum: this.#durationSum[c]!,
      });
    }
    return out;
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
  for (const { keys, rows } of files) addRows(q, keys, rows, read.minutes, into);
}

/**
 * Adds a file's rows (those of a minute in `minutes`, when given) to the cells. A plain function, apart from the
 * awaiting: its loop is compiled as one, every number in a register (in the async function's loop they were boxed,
 * 2 MB of garbage a query).
 */
function addRows(
  q: AggregateQuery,
  keys: KeyTable,
  rows: KindRows,
  minutes: RollupRead['minutes'],
  into: Cells,
): void {
  // Per key of the file: its group (-1: filtered out), worked out when a row first uses it (a file's table names
  // the keys of every kind, 20k of them: most are not in the kind read). In the shared array, set back after.
  if (keyGroups.length < keys.service.length) keyGroups = new Int32Array(keys.service.length).fill(UNKNOWN);
  const groupOf = keyGroups;
  const used: number[] = [];
  // Rows come sorted by minute (a start, for RAW_KIND) and key: a range is a slice, a run of rows one cell.
  const start = minutes ? lowerBound(rows.minute, rows.n, minutes.from) : 0;
  const end = minutes ? lowerBound(rows.minute, rows.n, minutes.to) : rows.n;
  // The figures of a run of rows of one cell, added to it when the run ends: a call per cell, not per row (a double
  // passed to a call is boxed).
  const iv = into.intervalMs;
  const first = iv === null ? 0 : into.bucketIndex(0);
  let cell = -1;
  let lastGroup = -1;
  let lastIndex = -1;
  let requests = 0;
  let failed = 0;
  let durationSum = 0;
  for (let i = start; i < end; i++) {
    const k = rows.key[i]!;
    let gid = groupOf[k]!;
    if (gid === UNKNOWN) {
      gid = keyPasses(q.filter, keys, k) ? into.groupId(groupOfRollupKey(keys, q.groupBy, k)) : -1;
      groupOf[k] = gid;
      used.push(k);
    }
    if (gid < 0) continue;
    const index = iv === null ? 0 : Math.floor(rows.minute[i]! / iv) + first;
    if (index !== lastIndex || gid !== lastGroup) {
      if (cell >= 0) into.add(cell, requests, failed, durationSum);
      cell = into.cellAt(gid, index);
      lastGroup = gid;
      lastIndex = index;
      requests = 0;
      failed = 0;
      durationSum = 0;
    }
    const n = rows.count[i]!;
    requests += n;
    if (keys.outcome[k] === 'failed') failed += n;
    durationSum += rows.dsum[i]!;
  }
  if (cell >= 0) into.add(cell, requests, failed, durationSum);
  for (const k of used) groupOf[k] = UNKNOWN;
}

/**
 * The keys' groups while a file's rows are added (addRollups), all UNKNOWN between files: one array for every query
 * (the adding of a file runs without awaiting), not one of a file's key count per file and query.
 */
let keyGroups = new Int32Array(0);
