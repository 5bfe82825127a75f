import type { QueryEngine, SqlParam } from '../storage/duckdb.js';
import { listSidecarsAndFiles } from '../storage/layout.js';
import { endpointTemplateSql } from '../storage/rollup.js';
import { bucketSql, SLOTS, slotOf, slotValue } from '../storage/sketch.js';
import { keyPasses, lowerBound } from './metric-cells.js';
import {
  type AggregateQuery,
  filterSql,
  type GroupField,
  planSources,
  rawPart,
  type Sources,
  timeSql,
  union,
} from './metrics.js';
import { type KeyTable, type KindRows, minutesCacheOf, type SketchRuns } from './minutes-cache.js';

/**
 * Latency quantiles (p50, p95, p99) per time bucket under an hour and group, for a timeseries (CONTRACT §8).
 *
 * A chart of 24 h per minute and service has 15,840 points; each is a sketch of its ~350 executions, so the sketches
 * hold nearly as many rows as the executions (4.2M for 10M), and merged as maps they cost seconds. Here they are
 * swept once, in time order, from rollup rows kept in memory as runs (SketchRuns: one minute and key each, slots
 * ascending, cumulative counts). A point that is one run (a service's minute, from the per-minute service sketches,
 * rollup kind 5) has its quantiles found by binary search in the run, nothing added; the others (`__other__`, a
 * 5-minute bucket, several environments) are added into one dense array per group, indexed by slot with a sum per
 * 64 slots, the quantiles read off by walking the sums and then the slots they point into, and the touched part
 * zeroed for the next bucket: about 3 ns a row. Queries by outcome, endpoint or method sweep the per-minute sketches
 * of every key (kind 1).
 *
 * The answer: per group (null without groupBy; `other` for the groups not kept), p50, p95 and p99 of each time bucket
 * (index i at 3i…3i+2), NaN where the bucket has no executions.
 */
export type PointQuantiles = Map<string | null, Float64Array>;

const QUANTILES = [0.5, 0.95, 0.99] as const;
const BLOCK_BITS = 6;
const BLOCK = 2 ** BLOCK_BITS;
const BLOCKS = Math.ceil(SLOTS / BLOCK);

/** The groups of an answer: the kept ones, then `other`; one, null, without groupBy. */
function groupsOf(kept: readonly (string | null)[] | null, other: string): (string | null)[] {
  return kept === null ? [null] : [...kept, other];
}

/**
 * The dense arrays of a sweep, one per group, kept between queries (a sweep runs without awaiting, so one at a
 * time): 1 MB of address space a group, of which a sweep touches the few KB its durations fall in.
 */
let scratch = new Float64Array(0);
let blocks = new Float64Array(0);
let values: Float64Array | null = null;

/** What a group holds in the time bucket being swept. */
const EMPTY = 0;
/** One run, not added anywhere yet: its quantiles are read from its cumulative counts. */
const ONE_RUN = 1;
const DENSE = 2;

/**
 * The groups being added up for one time bucket at a time, and their quantiles read off: from the run itself when a
 * group's bucket is one run of a rollup, else from the group's dense array.
 */
export class Sweep {
  readonly #state: Uint8Array;
  /** Per group in state ONE_RUN, the run: of which rows, which one. */
  readonly #runs: (SketchRuns | null)[];
  readonly #run: Int32Array;
  readonly #lo: Int32Array;
  readonly #hi: Int32Array;
  readonly #total: Float64Array;
  readonly #ranks = new Float64Array(6);
  readonly #found = new Float64Array(6);
  readonly #order = new Int32Array(6);

  constructor(readonly groups: number) {
    if (scratch.length < groups * SLOTS) {
      scratch = new Float64Array(groups * SLOTS);
      blocks = new Float64Array(groups * BLOCKS);
    }
    values ??= Float64Array.from({ length: SLOTS }, (_, s) => slotValue(s));
    this.#state = new Uint8Array(groups);
    this.#runs = new Array<SketchRuns | null>(groups).fill(null);
    this.#run = new Int32Array(groups);
    this.#lo = new Int32Array(groups).fill(SLOTS);
    this.#hi = new Int32Array(groups).fill(-1);
    this.#total = new Float64Array(groups);
  }

  /** Adds `count` executions in slot `slot` to group `g`. */
  add(g: number, slot: number, count: number): void {
    this.#toDense(g);
    scratch[g * SLOTS + slot]! += count;
    blocks[g * BLOCKS + (slot >>> BLOCK_BITS)]! += count;
    this.#total[g]! += count;
    if (slot < this.#lo[g]!) this.#lo[g] = slot;
    if (slot > this.#hi[g]!) this.#hi[g] = slot;
  }

  /** Adds run `r` of a rollup's rows (SketchRuns) to group `g`. */
  addRun(g: number, runs: SketchRuns, r: number): void {
    if (this.#state[g] === EMPTY) {
      this.#state[g] = ONE_RUN;
      this.#runs[g] = runs;
      this.#run[g] = r;
      return;
    }
    this.#toDense(g);
    this.#addDense(g, runs, r);
  }

  /** Moves a group's one run, if it has one, into its dense array. */
  #toDense(g: number): void {
    const state = this.#state[g];
    if (state === DENSE) return;
    this.#state[g] = DENSE;
    if (state === ONE_RUN) {
      this.#addDense(g, this.#runs[g]!, this.#run[g]!);
      this.#runs[g] = null;
    }
  }

  #addDense(g: number, runs: SketchRuns, r: number): void {
    const { slots, cumulative } = runs;
    const start = runs.runStart[r]!;
    const end = runs.runStart[r + 1]!;
    // Locals: the hot loop reads no module binding.
    const dense = scratch;
    const sums = blocks;
    const base = g * SLOTS;
    const blockBase = g * BLOCKS;
    let before = 0;
    for (let j = start; j < end; j++) {
      const slot = slots[j]!;
      const upTo = cumulative[j]!;
      const n = upTo - before;
      before = upTo;
      dense[base + slot]! += n;
      sums[blockBase + (slot >>> BLOCK_BITS)]! += n;
    }
    this.#total[g]! += before;
    const first = slots[start]!;
    const last = slots[end - 1]!;
    if (first < this.#lo[g]!) this.#lo[g] = first;
    if (last > this.#hi[g]!) this.#hi[g] = last;
  }

  /**
   * The ranks whose values the quantiles interpolate between, for `total` executions: each quantile's floor and the
   * next; and their order, ascending, for one walk (p50's next can pass p95's floor when there are few executions).
   */
  #setRanks(total: number): void {
    const ranks = this.#ranks;
    const order = this.#order;
    for (let k = 0; k < 3; k++) {
      const r = Math.floor(QUANTILES[k]! * (total - 1));
      ranks[2 * k] = r;
      ranks[2 * k + 1] = Math.min(r + 1, total - 1);
    }
    for (let k = 0; k < 6; k++) {
      let j = k;
      while (j > 0 && ranks[order[j - 1]!]! > ranks[k]!) {
        order[j] = order[j - 1]!;
        j--;
      }
      order[j] = k;
    }
  }

  /** The quantiles from the found values, as `quantile_cont` interpolates them. */
  #write(into: Float64Array, at: number, total: number): void {
    const found = this.#found;
    for (let q = 0; q < 3; q++) {
      const rank = QUANTILES[q]! * (total - 1);
      const low = found[2 * q]!;
      into[at + q] = low + (rank - this.#ranks[2 * q]!) * (found[2 * q + 1]! - low);
    }
  }

  /**
   * Writes each touched group's quantiles to `out[g]` at `at` (as sketchQuantiles answers them: `quantile_cont`'s
   * interpolation between the two closest ranks' bucket values) and clears the group for the next bucket.
   */
  finish(out: Float64Array[], at: number): void {
    for (let g = 0; g < this.groups; g++) {
      const state = this.#state[g];
      if (state === ONE_RUN) this.#finishRun(g, out[g]!, at);
      else if (state === DENSE) this.#finishDense(g, out[g]!, at);
      this.#state[g] = EMPTY;
    }
  }

  /**
   * A run's quantiles: at each rank, the first row whose cumulative count passes it (by binary search); kept with
   * the runs (SketchRuns.quantiles), so a run is worked out once, whatever the queries that read it.
   */
  #finishRun(g: number, into: Float64Array, at: number): void {
    const runs = this.#runs[g]!;
    const r = this.#run[g]!;
    this.#runs[g] = null;
    runs.quantiles ??= new Float64Array(runs.runKey.length * 3).fill(Number.NaN);
    const kept = runs.quantiles;
    if (Number.isNaN(kept[r * 3])) {
      const { slots, cumulative } = runs;
      const start = runs.runStart[r]!;
      const end = runs.runStart[r + 1]!;
      const total = cumulative[end - 1]!;
      this.#setRanks(total);
      for (let k = 0; k < 6; k++) {
        const rank = this.#ranks[k]!;
        let lo = start;
        let hi = end - 1;
        while (lo < hi) {
          const mid = (lo + hi) >>> 1;
          if (cumulative[mid]! > rank) hi = mid;
          else lo = mid + 1;
        }
        this.#found[k] = values![slots[lo]!]!;
      }
      this.#write(kept, r * 3, total);
    }
    into[at] = kept[r * 3]!;
    into[at + 1] = kept[r * 3 + 1]!;
    into[at + 2] = kept[r * 3 + 2]!;
  }

  /** A dense array's quantiles: the cumulative count a block at a time, into the blocks where a rank falls. */
  #finishDense(g: number, into: Float64Array, at: number): void {
    const dense = scratch;
    const sums = blocks;
    const v = values!;
    const ranks = this.#ranks;
    const found = this.#found;
    const order = this.#order;
    const hi = this.#hi[g]!;
    const lo = this.#lo[g]!;
    const total = this.#total[g]!;
    this.#setRanks(total);
    const base = g * SLOTS;
    const blockBase = g * BLOCKS;
    let k = 0;
    let seen = 0;
    let target = ranks[order[0]!]!;
    for (let b = lo >>> BLOCK_BITS; b <= hi >>> BLOCK_BITS; b++) {
      const after = seen + sums[blockBase + b]!;
      if (after > target) {
        // The block holds the slot of the rank `target` (and maybe of the next ones).
        let s = base + Math.max(lo, b * BLOCK);
        for (;;) {
          seen += dense[s]!;
          while (seen > target) {
            found[order[k++]!] = v[s - base]!;
            if (k === 6) break;
            target = ranks[order[k]!]!;
          }
          if (k === 6 || seen === after) break;
          s++;
        }
        if (k === 6) break;
      }
      seen = after;
    }
    this.#write(into, at, total);
    dense.fill(0, base + lo, base + hi + 1);
    sums.fill(0, blockBase + (lo >>> BLOCK_BITS), blockBase + (hi >>> BLOCK_BITS) + 1);
    this.#lo[g] = SLOTS;
    this.#hi[g] = -1;
    this.#total[g] = 0;
  }
}

/** Per key of a rollup file, its group's index (-1 when the filter leaves it out). */
function keyGroups(
  q: AggregateQuery,
  keys: KeyTable,
  index: ReadonlyMap<string | null, number>,
  other: number,
): Int32Array {
  const field = q.groupBy[0] as GroupField | undefined;
  return Int32Array.from(keys.service, (_, k) => {
    if (!keyPasses(q.filter, keys, k)) return -1;
    if (field === undefined) return 0;
    return index.get((keys[field][k] ?? null) as string | null) ?? other;
  });
}

/**
 * Something swept: `add(from, to)` adds its rows with a time in [from, to) (called with ascending, adjacent
 * ranges, so each keeps a cursor).
 */
interface Source {
  add(sweep: Sweep, from: number, to: number): void;
}

/** A rollup file's packed minute sketches over the minutes [from, to). */
function runsSource(runs: SketchRuns, groupOfKey: Int32Array, from: number, to: number): Source {
  let m = lowerBound(runs.minutes, runs.minutes.length, from);
  return {
    add(sweep, start, end) {
      if (start >= to) return;
      const { minutes, minuteRuns, runKey } = runs;
      while (m < minutes.length && minutes[m]! < start) m++;
      for (; m < minutes.length && minutes[m]! < end && minutes[m]! < to; m++) {
        for (let r = minuteRuns[m]!; r < minuteRuns[m + 1]!; r++) {
          const g = groupOfKey[runKey[r]!]!;
          if (g >= 0) sweep.addRun(g, runs, r);
        }
      }
    },
  };
}

/** An executions file's rows kept in memory (RAW_KIND: `minute` is the start) with a start in [from, to). */
function rowsSource(rows: KindRows, groupOfKey: Int32Array, from: number, to: number): Source {
  let i = lowerBound(rows.minute, rows.n, from);
  return {
    add(sweep, start, end) {
      if (start >= to) return;
      while (i < rows.n && rows.minute[i]! < start) i++;
      for (; i < rows.n && rows.minute[i]! < end && rows.minute[i]! < to; i++) {
        const g = groupOfKey[rows.key[i]!]!;
        if (g >= 0) sweep.add(g, slotOf(rows.bucket[i]!), rows.count[i]!);
      }
    },
  };
}

/** Rows read by a statement: bucket start `t`, group index, sketch bucket, count; ascending by `t`. */
function columnsSource([t, g, bucket, count]: Float64Array[]): Source {
  let i = 0;
  return {
    add(sweep, start, end) {
      while (i < t!.length && t![i]! < start) i++;
      for (; i < t!.length && t![i]! < end; i++) sweep.add(g![i]!, slotOf(bucket![i]!), count![i]!);
    },
  };
}

/** The index in `groups` (the last being `other`) of the group value `g0`, in SQL; its parameters go to `params`. */
function groupIndexSql(groups: (string | null)[], params: Record<string, SqlParam>): string {
  if (groups.length === 1) return '0';
  const other = groups.length - 1;
  const named = groups.flatMap((g, i) => (g === null || i === other ? [] : [{ g, i }]));
  params.groups = named.map((n) => n.g);
  const nullIndex = groups.indexOf(null);
  return `CASE WHEN g0 IS NULL THEN ${nullIndex >= 0 ? nullIndex : other}
    ELSE coalesce([${named.map((n) => n.i).join(', ')}][list_position($groups, g0)], ${other}) END`;
}

/**
 * The quantiles of a query with buckets under an hour, with the groups of `kept` kept and the others one, `other`:
 * swept from the same sources as its counts (planSources); or, when it reads no rollup (none made yet, an issue, an
 * endpoint filter they cannot answer), computed exactly by DuckDB, which is then faster than bringing the rows here.
 */
export async function pointQuantiles(
  engine: QueryEngine,
  dataDir: string,
  q: AggregateQuery,
  kept: readonly (string | null)[] | null,
  other: string,
): Promise<{ exact: boolean; values: PointQuantiles }> {
  const f = q.filter;
  const listed = await listSidecarsAndFiles('minutes', dataDir, f.workspaceId, f.mode, f.from, f.to);
  const plan = planSources(listed, { ...q, sketches: true });
  if (!plan.rollups)
    return {
      exact: true,
      values: await exactQuantiles(engine, [...listed.covered, ...listed.files], q, kept, other),
    };
  return { exact: false, values: await sweepQuantiles(engine, plan, q, kept, other) };
}

/** The sweep over a plan's sources: rollup runs, executions kept in memory, and a statement for the rest. */
async function sweepQuantiles(
  engine: QueryEngine,
  plan: Sources,
  q: AggregateQuery,
  kept: readonly (string | null)[] | null,
  other: string,
): Promise<PointQuantiles> {
  const f = q.filter;
  const interval = q.intervalMs!;
  const groups = groupsOf(kept, other);
  const index = new Map(groups.map((g, i) => [g, i]));
  const cache = minutesCacheOf(engine);
  const groupParams: Record<string, SqlParam> = {};
  const groupIndex = groupIndexSql(groups, groupParams);
  const rawSql =
    plan.raw.length > 0
      ? union(
          plan.raw.map((r) => rawPart(q, r, `${bucketSql('duration_ms')} AS bucket, count(*)::DOUBLE AS n`)),
          (inner) =>
            `SELECT t, ${groupIndex} AS gi, bucket, sum(n)::DOUBLE FROM (${inner}) GROUP BY ALL ORDER BY t`,
        )
      : null;
  if (rawSql) Object.assign(rawSql.params, groupParams);
  const filesOf = (read: { sidecars: string[]; kind: number }) =>
    read.sidecars.map(async (file) => ({ keys: await cache.keys(file, read.kind), file }));
  const [raw, sketchFiles, edgeFiles] = await Promise.all([
    rawSql ? engine.numericColumns(rawSql.sql, rawSql.params) : null,
    Promise.all(
      plan.sketch.flatMap((read) =>
        filesOf(read).map(async (p) => {
          const { keys, file } = await p;
          return runsSource(
            await cache.runs(file, read.kind),
            keyGroups(q, keys, index, groups.length - 1),
            read.minutes?.from ?? f.from,
            read.minutes?.to ?? f.to,
          );
        }),
      ),
    ),
    Promise.all(
      plan.edges.flatMap((read) =>
        filesOf(read).map(async (p) => {
          const { keys, file } = await p;
          return rowsSource(
            await cache.rows(file, read.kind),
            keyGroups(q, keys, index, groups.length - 1),
            read.minutes!.from,
            read.minutes!.to,
          );
        }),
      ),
    ),
  ]);
  const sources: Source[] = [...sketchFiles, ...edgeFiles, ...(raw ? [columnsSource(raw)] : [])];
  const first = Math.floor(f.from / interval) * interval;
  const points = Math.ceil((f.to - first) / interval);
  const out = groups.map(() => new Float64Array(points * 3).fill(Number.NaN));
  const sweep = new Sweep(groups.length);
  for (let p = 0; p < points; p++) {
    const start = first + p * interval;
    for (const s of sources) s.add(sweep, start, start + interval);
    sweep.finish(out, p * 3);
  }
  return new Map(groups.map((g, i) => [g, out[i]!]));
}

/** The same answer computed exactly (`quantile_cont`) over the executions `files`, in DuckDB. */
async function exactQuantiles(
  engine: QueryEngine,
  files: string[],
  q: AggregateQuery,
  kept: readonly (string | null)[] | null,
  other: string,
): Promise<PointQuantiles> {
  const f = q.filter;
  const interval = q.intervalMs!;
  const groups = groupsOf(kept, other);
  const first = Math.floor(f.from / interval) * interval;
  const points = Math.ceil((f.to - first) / interval);
  const out = groups.map(() => new Float64Array(points * 3).fill(Number.NaN));
  if (files.length > 0) {
    const params: Record<string, SqlParam> = { files, from: f.from, to: f.to, interval };
    const where = [
      'started_at >= epoch_ms($from::BIGINT)',
      'started_at < epoch_ms($to::BIGINT)',
      ...filterSql(f, params),
    ];
    const field = q.groupBy[0];
    const g0 =
      field === undefined ? 'NULL::VARCHAR' : field === 'endpoint' ? endpointTemplateSql('endpoint') : field;
    const [t, g, p50, p95, p99] = await engine.numericColumns(
      `SELECT t, gi, q[1], q[2], q[3] FROM (
         SELECT t, ${groupIndexSql(groups, params)} AS gi, quantile_cont(duration_ms, [0.5, 0.95, 0.99]) AS q
         FROM (
           SELECT ${timeSql(q, 'started_at')} AS t, ${g0} AS g0, duration_ms
           FROM read_parquet($files, union_by_name = true, hive_partitioning = false)
           WHERE ${where.join(' AND ')}
         )
         GROUP BY ALL
       )`,
      params,
    );
    for (let i = 0; i < t!.length; i++) {
      const into = out[g![i]!]!;
      const at = ((t![i]! - first) / interval) * 3;
      into[at] = p50![i]!;
      into[at + 1] = p95![i]!;
      into[at + 2] = p99![i]!;
    }
  }
  return new Map(groups.map((g, i) => [g, out[i]!]));
}
