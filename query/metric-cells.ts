import { MINUTE_KIND } from '../storage/minutes.js';
import type { AggregateQuery, Cell, MetricFilter } from './metrics.js';
import { type KeyTable, type MinutesCache, RAW_KIND } from './minutes-cache.js';

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

/**
 * Latency sketch buckets kept in a dense array per cell while rows are added: durations from 2^-10 ms to 2^27 ms
 * (1 µs to 37 h); a bucket outside (or zero) goes to the cell's map.
 */
const DENSE_FROM = -10 * 64;
const DENSE_SIZE = 37 * 64;
/** At most this many cells get a dense array (19 KB each): an endpoints list's, an overview's. */
const DENSE_CELLS = 512;
/**
 * Dense arrays handed back by finished queries, zeroed, for the next: an endpoints list takes hundreds (5 MB), and
 * allocating them anew each time showed as collector pauses in the p95.
 */
const DENSE_POOL: Float64Array[] = [];

/** The sketch of every cell of a query without sketches: never written (Cells adds buckets only with sketches). */
const NO_SKETCH = new Map<number, number>();

/** A cell being added up, with its sketch's dense part (DENSE_FROM…) once it has one. */
export interface Acc extends Cell {
  dense: Float64Array | null;
}

/**
 * The cells being added up: per group (numbered as met), per time bucket (numbered from the first bucket's start),
 * so that adding a row is two array reads, not a string key per row.
 */
export class Cells {
  readonly #groups = new Map<string, number>();
  readonly #groupValues: (string | null)[][] = [];
  readonly #byGroup: (Acc | undefined)[][] = [];
  readonly #t0: number;

  constructor(
    from: number,
    readonly intervalMs: number | null,
    /** Whether sketches are added: without, every cell shares one empty map (a minute chart has 10k+ cells). */
    readonly sketches: boolean,
  ) {
    this.#t0 = intervalMs === null ? 0 : Math.floor(from / intervalMs) * intervalMs;
  }

  groupId(group: (string | null)[]): number {
    const key = group.map((g) => (g === null ? '\u0000' : `\u0001${g}`)).join('');
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
  at(groupId: number, time: number): Acc {
    const iv = this.intervalMs;
    const index = iv === null ? 0 : Math.floor(time / iv) - this.#t0 / iv;
    const row = this.#byGroup[groupId]!;
    let acc = row[index];
    if (!acc) {
      acc = {
        t: iv === null ? 0 : this.#t0 + index * iv,
        group: this.#groupValues[groupId]!,
        requests: 0,
        failed: 0,
        durationSum: 0,
        sketch: this.sketches ? new Map() : NO_SKETCH,
        dense: null,
      };
      row[index] = acc;
    }
    return acc;
  }

  /** Cells given a dense array so far; past DENSE_CELLS the others add to their maps (memory stays bounded). */
  #denseCells = 0;

  addBucket(acc: Acc, bucket: number, count: number): void {
    const at = bucket - DENSE_FROM;
    if (at >= 0 && at < DENSE_SIZE) {
      if (acc.dense === null && this.#denseCells < DENSE_CELLS) {
        acc.dense = DENSE_POOL.pop() ?? new Float64Array(DENSE_SIZE);
        this.#denseCells++;
      }
      if (acc.dense !== null) {
        acc.dense[at]! += count;
        return;
      }
    }
    acc.sketch.set(bucket, (acc.sketch.get(bucket) ?? 0) + count);
  }

  done(): Cell[] {
    const out: Cell[] = [];
    for (const row of this.#byGroup) {
      for (const acc of row) {
        if (!acc) continue;
        const d = acc.dense;
        if (d) {
          const sketch = acc.sketch;
          for (let i = 0; i < DENSE_SIZE; i++) {
            const n = d[i]!;
            if (n !== 0) sketch.set(i + DENSE_FROM, (sketch.get(i + DENSE_FROM) ?? 0) + n);
          }
          d.fill(0);
          if (DENSE_POOL.length < DENSE_CELLS) DENSE_POOL.push(d);
          acc.dense = null;
        }
        out.push(acc);
      }
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

/**
 * Adds a rollup read's rows to the cells, from the files' rows kept in memory: counts (kinds 0, 2), sketch buckets
 * (1, 3, 4), or both (RAW_KIND, an execution a row).
 */
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
  const raw = read.kind === RAW_KIND;
  const counts = raw || read.kind === MINUTE_KIND.counts || read.kind === MINUTE_KIND.hourCounts;
  const buckets = raw ? q.sketches : !counts;
  for (const { keys, rows } of files) {
    // Per key of the file: its group (-1: filtered out) and whether it counts as failed.
    const groupOf = keys.service.map((_, k) =>
      keyPasses(q.filter, keys, k)
        ? into.groupId(q.groupBy.map((g) => (keys[g][k] ?? null) as string | null))
        : -1,
    );
    const failed = keys.outcome.map((o) => o === 'failed');
    // Rows come sorted by minute (a start, for RAW_KIND) and key: a range is a slice, a run of rows one cell.
    const start = read.minutes ? lowerBound(rows.minute, rows.n, read.minutes.from) : 0;
    const end = read.minutes ? lowerBound(rows.minute, rows.n, read.minutes.to) : rows.n;
    let lastMinute = Number.NaN;
    let lastKey = -1;
    let acc: Acc | null = null;
    for (let i = start; i < end; i++) {
      const k = rows.key[i]!;
      const gid = groupOf[k]!;
      if (gid < 0) continue;
      const m = rows.minute[i]!;
      if (m !== lastMinute || k !== lastKey || acc === null) {
        acc = into.at(gid, m);
        lastMinute = m;
        lastKey = k;
      }
      const n = rows.count[i]!;
      if (buckets) into.addBucket(acc, rows.bucket[i]!, n);
      if (counts) {
        acc.requests += n;
        if (failed[k]) acc.failed += n;
        acc.durationSum += rows.dsum[i]!;
      }
    }
  }
}
