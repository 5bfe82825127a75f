import type { QueryEngine, Row, SqlParam } from '../storage/duckdb.js';
import { endpointTemplateSql } from '../storage/rollup.js';
import { bucketSql, SLOTS, slotOf, slotValue } from '../storage/sketch.js';
import { groupKeyOf, groupOfRollupKey, keyPasses, lowerBound, UNKNOWN } from './metric-cells.js';
import {
  type AggregateQuery,
  filterSql,
  type Listed,
  planSources,
  rawPart,
  type Sources,
  timeSql,
  union,
} from './metrics.js';
import { type KeyTable, type KindRows, minutesCacheOf, type SketchRuns } from './minutes-cache.js';

/**
 * Latency quantiles (p50, p95, p99) per time bucket and group (CONTRACT §8): an overview's per service, an endpoints
 * list's per endpoint, a timeseries' per point.
 *
 * They come from the rollups' latency sketches (storage/sketch.ts), which for fine buckets hold nearly as many rows
 * as the executions: a chart of 24 h per minute and service has 15,840 points of ~350 executions each, whose
 * sketches are 4.2M rows for 10M executions. So the sketches are swept in time order (once, unless the groups'
 * arrays need several passes), from rollup rows kept in memory as runs (SketchRuns: one minute, or hour, and key each; slots ascending, with their counts):
 * - a point that is one run (a service's minute, from the per-minute service sketches, rollup kind 5) is read from
 *   the run itself, and the answer kept with the run for the next query;
 * - the others (`__other__`, an endpoint's day, a 5-minute bucket) are added into one dense array per group, indexed
 *   by slot over the slots the rows span, with a sum per 64 slots; the quantiles are read off by walking the sums,
 *   then the slots of the blocks where a rank falls, and the touched part is zeroed for the next time bucket:
 *   about 3 ns a row. Groups whose arrays would pass DENSE_BUDGET are swept in several passes.
 * The minutes of a range's cut ends come from the executions kept in memory (RAW_KIND rows), the files no rollup
 * covers from a statement, as for the counts (query/metrics.ts), from the same listing.
 *
 * When no rollup answers (none made yet, an issue, an endpoint filter they cannot answer), DuckDB computes the
 * quantiles exactly (`quantile_cont`): then faster than bringing the rows here.
 */

/** How rows fold into the answer's groups. */
export type Grouping =
  /** Each distinct value (tuple) of the query's groupBy fields its own group. */
  | { kind: 'fields' }
  /** One groupBy field: the `kept` values their own groups (null when not grouped), every other value `other`. */
  | { kind: 'kept'; kept: readonly (string | null)[]; other: string };

export interface Quantiles {
  /** Whether they were computed exactly (else from the sketches, within 0.54 %). */
  exact: boolean;
  /** Per group (as groupKeyOf names its values; `[other]` for the rest): p50, p95, p99 at 3i…3i+2 for bucket i, NaN
   * where it has no executions. */
  byGroup: Map<string, { group: (string | null)[]; values: Float64Array }>;
}

const QUANTILES = [0.5, 0.95, 0.99] as const;
const BLOCK_BITS = 6;
const BLOCK = 2 ** BLOCK_BITS;
/** At most this many slots of dense arrays at once (32 MB); more groups are swept in further passes. */
const DENSE_BUDGET = 4 * 2 ** 20;

/** Dense arrays and block sums, kept between queries (a sweep runs without awaiting, so one at a time). */
let scratch = new Float64Array(0);
let blocks = new Float64Array(0);
let values: Float64Array | null = null;
/** Past this many slots (4 MB), the arrays are let go after the sweep. */
const KEPT_SCRATCH = 2 ** 19;
const releaseScratch = () => {
  scratch = new Float64Array(0);
  blocks = new Float64Array(0);
};

/** What a group holds in the time bucket being swept. */
const EMPTY = 0;
/** One run, not added anywhere yet: its quantiles are read from the run itself. */
const ONE_RUN = 1;
const DENSE = 2;

/**
 * Groups `offset`…`offset + groups − 1` being added up for one time bucket at a time, over slots `minSlot`…
 * `minSlot + width − 1`, and their quantiles read off: from the run itself when a group's bucket is one run of a
 * rollup, else from the group's dense array. Zero durations (slot 0, 68,737 slots below 1 ms) are counted apart,
 * so the window spans the positive durations only.
 */
export class Sweep {
  readonly #blocks: number;
  readonly #state: Uint8Array;
  /** Per group in state ONE_RUN, the run: of which rows, which one. */
  readonly #runs: (SketchRuns | null)[];
  readonly #run: Int32Array;
  /**
   * Per dense group, the lowest and highest slot it holds (relative to minSlot; -1 for the highest when none), its
   * executions, and those of them that took 0 ms.
   */
  readonly #lo: Int32Array;
  readonly #hi: Int32Array;
  readonly #total: Float64Array;
  readonly #zeros: Float64Array;
  readonly #ranks = new Float64Array(6);
  readonly #found = new Float64Array(6);
  readonly #order = new Int32Array(6);

  constructor(
    readonly offset: number,
    readonly groups: number,
    readonly minSlot: number,
    readonly width: number,
  ) {
    this.#blocks = Math.ceil(width / BLOCK);
    if (scratch.length < groups * width) scratch = new Float64Array(groups * width);
    if (blocks.length < groups * this.#blocks) blocks = new Float64Array(groups * this.#blocks);
    values ??= Float64Array.from({ length: SLOTS }, (_, s) => slotValue(s));
    this.#state = new Uint8Array(groups);
    this.#runs = new Array<SketchRuns | null>(groups).fill(null);
    this.#run = new Int32Array(groups);
    this.#lo = new Int32Array(groups).fill(width);
    this.#hi = new Int32Array(groups).fill(-1);
    this.#total = new Float64Array(groups);
    this.#zeros = new Float64Array(groups);
  }

  /** The group of this pass for an answer's group index, or -1. */
  local(group: number): number {
    const g = group - this.offset;
    return g >= 0 && g < this.groups ? g : -1;
  }

  /** Adds `count` executions in slot `slot` to group `g` (of this pass). */
  add(g: number, slot: number, count: number): void {
    this.#toDense(g);
    this.#total[g]! += count;
    if (slot === 0) {
      this.#zeros[g]! += count;
      return;
    }
    const s = slot - this.minSlot;
    scratch[g * this.width + s]! += count;
    blocks[g * this.#blocks + (s >>> BLOCK_BITS)]! += count;
    if (s < this.#lo[g]!) this.#lo[g] = s;
    if (s > this.#hi[g]!) this.#hi[g] = s;
  }

  /** Adds run `r` of a rollup's rows (SketchRuns) to group `g` (of this pass). */
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
    const { slots, counts } = runs;
    let start = runs.runStart[r]!;
    const end = runs.runStart[r + 1]!;
    // Slots ascend: zero durations, if any, are the run's first row.
    if (slots[start] === 0) {
      this.#zeros[g]! += counts[start]!;
      this.#total[g]! += counts[start]!;
      start++;
      if (start === end) return;
    }
    // Locals: the hot loop reads no module binding.
    const dense = scratch;
    const sums = blocks;
    const base = g * this.width - this.minSlot;
    const blockBase = g * this.#blocks;
    const minSlot = this.minSlot;
    let total = 0;
    for (let j = start; j < end; j++) {
      const slot = slots[j]!;
      const n = counts[j]!;
      total += n;
      dense[base + slot]! += n;
      sums[blockBase + ((slot - minSlot) >>> BLOCK_BITS)]! += n;
    }
    this.#total[g]! += total;
    const first = slots[start]! - minSlot;
    const last = slots[end - 1]! - minSlot;
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
   * Writes each touched group's quantiles to `out[offset + g]` at `at` (as sketchQuantiles answers them:
   * `quantile_cont`'s interpolation between the two closest ranks' bucket values) and clears the group for the next
   * time bucket.
   */
  finish(out: Float64Array[], at: number): void {
    for (let g = 0; g < this.groups; g++) {
      const state = this.#state[g];
      if (state === ONE_RUN) this.#finishRun(g, out[this.offset + g]!, at);
      else if (state === DENSE) this.#finishDense(g, out[this.offset + g]!, at);
      this.#state[g] = EMPTY;
    }
  }

  /**
   * A run's quantiles: at each rank, the first row whose cumulative count passes it; kept with the runs
   * (SketchRuns.quantiles), so a run is worked out once, whatever the queries that read it.
   */
  #finishRun(g: number, into: Float64Array, at: number): void {
    const runs = this.#runs[g]!;
    const r = this.#run[g]!;
    this.#runs[g] = null;
    runs.quantiles ??= new Float64Array(runs.runKey.length * 3).fill(Number.NaN);
    const kept = runs.quantiles;
    if (Number.isNaN(kept[r * 3])) {
      const { slots, counts } = runs;
      const start = runs.runStart[r]!;
      const end = runs.runStart[r + 1]!;
      let total = 0;
      for (let j = start; j < end; j++) total += counts[j]!;
      this.#setRanks(total);
      const ranks = this.#ranks;
      const order = this.#order;
      let seen = 0;
      let k = 0;
      for (let j = start; j < end && k < 6; j++) {
        seen += counts[j]!;
        while (k < 6 && seen > ranks[order[k]!]!) this.#found[order[k++]!] = values![slots[j]!]!;
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
    const base = g * this.width;
    const blockBase = g * this.#blocks;
    let k = 0;
    // The zero durations come first.
    let seen = this.#zeros[g]!;
    while (k < 6 && seen > ranks[order[k]!]!) found[order[k++]!] = 0;
    let target = k < 6 ? ranks[order[k]!]! : 0;
    for (let b = lo >>> BLOCK_BITS; k < 6 && hi >= 0 && b <= hi >>> BLOCK_BITS; b++) {
      const after = seen + sums[blockBase + b]!;
      if (after > target) {
        // The block holds the slot of the rank `target` (and maybe of the next ones).
        let s = Math.max(lo, b * BLOCK);
        for (;;) {
          seen += dense[base + s]!;
          while (seen > target) {
            found[order[k++]!] = v[s + this.minSlot]!;
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
    if (hi >= 0) {
      dense.fill(0, base + lo, base + hi + 1);
      sums.fill(0, blockBase + (lo >>> BLOCK_BITS), blockBase + (hi >>> BLOCK_BITS) + 1);
    }
    this.#lo[g] = this.width;
    this.#hi[g] = -1;
    this.#total[g] = 0;
    this.#zeros[g] = 0;
  }
}

/** The groups of an answer, numbered as they are met (the kept ones first, `other` last). */
class Groups {
  readonly #index = new Map<string, number>();
  readonly list: (string | null)[][] = [];
  readonly #other: number;

  constructor(
    readonly q: AggregateQuery,
    readonly grouping: Grouping,
  ) {
    if (q.groupBy.length === 0) this.#other = this.#id([]);
    else if (grouping.kind === 'kept') {
      for (const g of grouping.kept) this.#id([g]);
      this.#other = this.#id([grouping.other]);
    } else this.#other = -1;
  }

  #id(group: (string | null)[]): number {
    const key = groupKeyOf(group);
    let id = this.#index.get(key);
    if (id === undefined) {
      id = this.list.length;
      this.#index.set(key, id);
      this.list.push(group);
    }
    return id;
  }

  /** The group of the groupBy fields' values. */
  of(values: (string | null)[]): number {
    if (this.q.groupBy.length === 0) return 0;
    if (this.grouping.kind === 'fields') return this.#id(values);
    return this.#index.get(groupKeyOf(values)) ?? this.#other;
  }

  /**
   * Per key of a rollup file, its group (-1 when the filter leaves it out): worked out for the keys `used` lists
   * (from `start` to `end`), the only ones read; a file's table names every key of every kind, most of them not
   * in the kind read (a service sketch's 40 keys among 3,000).
   */
  ofKeys(keys: KeyTable, used: Int32Array, start: number, end: number): Int32Array {
    const fields = this.q.groupBy;
    const out = new Int32Array(keys.service.length).fill(UNKNOWN);
    for (let i = start; i < end; i++) {
      const k = used[i]!;
      if (out[k] !== UNKNOWN) continue;
      out[k] = keyPasses(this.q.filter, keys, k) ? this.of(groupOfRollupKey(keys, fields, k)) : -1;
    }
    return out;
  }
}

/**
 * Something swept: `add(sweep, from, to)` adds its rows with a time in [from, to) to the sweep's groups (called
 * with ascending, adjacent ranges, so each keeps a cursor). Made anew for each pass.
 */
interface Source {
  /** The smallest and largest slot of a positive duration it holds (+Infinity and -1 when none). */
  minSlot: number;
  maxSlot: number;
  make(): { add(sweep: Sweep, from: number, to: number): void };
}

/** A rollup file's sketch rows, as runs, over the minutes (or hours) [from, to). */
function runsSource(runs: SketchRuns, groupOfKey: Int32Array, from: number, to: number): Source {
  return {
    minSlot: runs.minSlot,
    maxSlot: runs.maxSlot,
    make() {
      let m = lowerBound(runs.minutes, runs.minutes.length, from);
      return {
        add(sweep, start, end) {
          if (start >= to) return;
          const { minutes, minuteRuns, runKey } = runs;
          while (m < minutes.length && minutes[m]! < start) m++;
          for (; m < minutes.length && minutes[m]! < end && minutes[m]! < to; m++) {
            for (let r = minuteRuns[m]!; r < minuteRuns[m + 1]!; r++) {
              const g = sweep.local(groupOfKey[runKey[r]!]!);
              if (g >= 0) sweep.addRun(g, runs, r);
            }
          }
        },
      };
    },
  };
}

/** Rows of a group index, a slot, a count and a time (ascending), with a time in [from, to). */
function rowsSource(
  time: Float64Array,
  group: Int32Array,
  slot: Int32Array,
  count: Float64Array,
  from: number,
  to: number,
): Source {
  const first = lowerBound(time, time.length, from);
  const last = lowerBound(time, time.length, to);
  let minSlot = Number.POSITIVE_INFINITY;
  let maxSlot = -1;
  for (let i = first; i < last; i++) {
    if (group[i]! < 0 || slot[i] === 0) continue;
    if (slot[i]! < minSlot) minSlot = slot[i]!;
    if (slot[i]! > maxSlot) maxSlot = slot[i]!;
  }
  return {
    minSlot,
    maxSlot,
    make() {
      let i = first;
      return {
        add(sweep, start, end) {
          while (i < last && time[i]! < start) i++;
          for (; i < last && time[i]! < end; i++) {
            const g = sweep.local(group[i]!);
            if (g >= 0) sweep.add(g, slot[i]!, count[i]!);
          }
        },
      };
    },
  };
}

/** An executions file's rows kept in memory (RAW_KIND: `minute` is the start) with a start in [from, to). */
function keptRowsSource(rows: KindRows, groupOfKey: Int32Array, from: number, to: number): Source {
  const first = lowerBound(rows.minute, rows.n, from);
  const last = lowerBound(rows.minute, rows.n, to);
  const n = last - first;
  const group = new Int32Array(n);
  const slot = new Int32Array(n);
  for (let i = 0; i < n; i++) {
    group[i] = groupOfKey[rows.key[first + i]!]!;
    slot[i] = slotOf(rows.bucket[first + i]!);
  }
  return rowsSource(
    rows.minute.subarray(first, last),
    group,
    slot,
    rows.count.subarray(first, last),
    from,
    to,
  );
}

/** The bucket starts of a query: one bucket, [from, to), without an interval. */
function bucketsOf(q: AggregateQuery): { first: number; points: number; length: number } {
  const f = q.filter;
  const iv = q.intervalMs;
  if (iv === null) return { first: f.from, points: 1, length: f.to - f.from };
  const first = Math.floor(f.from / iv) * iv;
  return { first, points: Math.ceil((f.to - first) / iv), length: iv };
}

/**
 * The quantiles of a query, per time bucket (one without an interval) and group of `grouping`; from the files of
 * `listed`, the listing its counts were read from.
 */
export async function quantiles(
  engine: QueryEngine,
  listed: Listed,
  q: AggregateQuery,
  grouping: Grouping,
): Promise<Quantiles> {
  const plan = planSources(listed, q);
  if (!plan.rollups) return exactQuantiles(engine, [...listed.covered, ...listed.files], q, grouping);
  return { exact: false, byGroup: await sweep(engine, plan, q, new Groups(q, grouping)) };
}

/** The sweep over a plan's sources: rollup runs, executions kept in memory, and a statement for the rest. */
async function sweep(engine: QueryEngine, plan: Sources, q: AggregateQuery, groups: Groups) {
  const cache = minutesCacheOf(engine);
  const groupCols = q.groupBy.map((_, i) => `g${i}`);
  const rawSql =
    plan.raw.length > 0
      ? union(
          plan.raw.map((r) => rawPart(q, r, `${bucketSql('duration_ms')} AS bucket, count(*)::DOUBLE AS n`)),
          (inner) =>
            `SELECT ${['t', ...groupCols].join(', ')}, bucket, sum(n)::DOUBLE AS n FROM (${inner})
             GROUP BY ALL ORDER BY t`,
        )
      : null;
  const keyed = (read: { sidecars: string[]; kind: number }) =>
    read.sidecars.map(async (file) => ({ keys: await cache.keys(file, read.kind), file }));
  const [raw, sketches, edges] = await Promise.all([
    rawSql ? engine.all(rawSql.sql, rawSql.params) : ([] as Row[]),
    Promise.all(
      plan.sketch.flatMap((read) =>
        keyed(read).map(async (p) => {
          const { keys, file } = await p;
          return { runs: await cache.runs(file, read.kind), keys, read };
        }),
      ),
    ),
    Promise.all(
      plan.edges.flatMap((read) =>
        keyed(read).map(async (p) => {
          const { keys, file } = await p;
          return { rows: await cache.rows(file, read.kind), keys, read };
        }),
      ),
    ),
  ]);
  // Groups are numbered here, in the order of the files, then of the statement's rows.
  const f = q.filter;
  const sources: Source[] = [
    ...sketches.map(({ runs, keys, read }) => {
      const from = read.minutes?.from ?? f.from;
      const to = read.minutes?.to ?? f.to;
      const m = runs.minuteRuns;
      const runsFrom = m[lowerBound(runs.minutes, runs.minutes.length, from)]!;
      const runsTo = m[lowerBound(runs.minutes, runs.minutes.length, to)]!;
      return runsSource(runs, groups.ofKeys(keys, runs.runKey, runsFrom, runsTo), from, to);
    }),
    ...edges.map(({ rows, keys, read }) => {
      const { from, to } = read.minutes!;
      const groupOfKey = groups.ofKeys(
        keys,
        rows.key,
        lowerBound(rows.minute, rows.n, from),
        lowerBound(rows.minute, rows.n, to),
      );
      return keptRowsSource(rows, groupOfKey, from, to);
    }),
  ];
  if (raw.length > 0) {
    const time = Float64Array.from(raw, (r) => Number(r.t));
    const group = Int32Array.from(raw, (r) =>
      groups.of(groupCols.map((c) => (r[c] ?? null) as string | null)),
    );
    const slot = Int32Array.from(raw, (r) => slotOf(Number(r.bucket)));
    sources.push(
      rowsSource(
        time,
        group,
        slot,
        Float64Array.from(raw, (r) => Number(r.n)),
        -Infinity,
        Infinity,
      ),
    );
  }
  const { first, points, length } = bucketsOf(q);
  const out = groups.list.map(() => new Float64Array(points * 3).fill(Number.NaN));
  // The window: the slots of the positive durations (zeros are counted apart), at least one.
  const minSlot = Math.min(SLOTS, ...sources.map((s) => s.minSlot));
  const width = Math.max(1, ...sources.map((s) => s.maxSlot - minSlot + 1));
  const perPass = Math.max(1, Math.floor(DENSE_BUDGET / width));
  try {
    for (let offset = 0; sources.length > 0 && offset < out.length; offset += perPass) {
      const pass = new Sweep(offset, Math.min(perPass, out.length - offset), minSlot, width);
      const adders = sources.map((s) => s.make());
      for (let p = 0; p < points; p++) {
        const start = q.intervalMs === null ? -Infinity : first + p * length;
        const end = q.intervalMs === null ? Infinity : start + length;
        for (const a of adders) a.add(pass, start, end);
        pass.finish(out, p * 3);
      }
    }
  } catch (err) {
    // The arrays may hold a half-added bucket: made anew for the next query.
    releaseScratch();
    throw err;
  }
  // A rare wide sweep (durations spread over many doublings, thousands of groups) does not keep its memory.
  if (scratch.length > KEPT_SCRATCH) releaseScratch();
  return new Map(groups.list.map((g, i) => [groupKeyOf(g), { group: g, values: out[i]! }]));
}

/** The groupBy fields' values in SQL, each as `g<i>`, the one of a `kept` grouping folded into `other`. */
function foldedGroupSql(q: AggregateQuery, grouping: Grouping, params: Record<string, SqlParam>): string[] {
  return q.groupBy.map((field, i) => {
    const g = field === 'endpoint' ? endpointTemplateSql('endpoint') : field;
    if (grouping.kind === 'fields') return `${g} AS g${i}`;
    params.kept = grouping.kept.filter((k): k is string => k !== null);
    params.other = grouping.other;
    return `CASE WHEN ${g} IS NULL THEN ${grouping.kept.includes(null) ? 'NULL' : '$other'}
      WHEN list_contains($kept, ${g}) THEN ${g} ELSE $other END AS g${i}`;
  });
}

/** The same answer computed exactly (`quantile_cont`) over the executions `files`, in DuckDB. */
async function exactQuantiles(
  engine: QueryEngine,
  files: string[],
  q: AggregateQuery,
  grouping: Grouping,
): Promise<Quantiles> {
  const f = q.filter;
  const { first, points, length } = bucketsOf(q);
  const byGroup: Quantiles['byGroup'] = new Map();
  // Every group of a `kept` grouping has an entry, as the sweep gives it.
  const seeded =
    q.groupBy.length === 0
      ? [[]]
      : grouping.kind === 'kept'
        ? [...grouping.kept, grouping.other].map((g) => [g])
        : [];
  for (const group of seeded)
    byGroup.set(groupKeyOf(group), { group, values: new Float64Array(points * 3).fill(Number.NaN) });
  if (files.length === 0) return { exact: true, byGroup };
  const params: Record<string, SqlParam> = { files, from: f.from, to: f.to };
  if (q.intervalMs !== null) params.interval = q.intervalMs;
  const where = [
    'started_at >= epoch_ms($from::BIGINT)',
    'started_at < epoch_ms($to::BIGINT)',
    ...filterSql(f, params),
  ];
  const rows = await engine.all(
    `SELECT ${[`${timeSql(q, 'started_at')} AS t`, ...foldedGroupSql(q, grouping, params)].join(', ')},
       quantile_cont(duration_ms, [0.5, 0.95, 0.99]) AS q
     FROM read_parquet($files, union_by_name = true, hive_partitioning = false)
     WHERE ${where.join(' AND ')}
     GROUP BY ALL`,
    params,
  );
  for (const r of rows) {
    const group = q.groupBy.map((_, i) => (r[`g${i}`] ?? null) as string | null);
    const key = groupKeyOf(group);
    let entry = byGroup.get(key);
    if (!entry) {
      entry = { group, values: new Float64Array(points * 3).fill(Number.NaN) };
      byGroup.set(key, entry);
    }
    const at = q.intervalMs === null ? 0 : ((Number(r.t) - first) / length) * 3;
    const [p50, p95, p99] = r.q as number[];
    entry.values[at] = p50!;
    entry.values[at + 1] = p95!;
    entry.values[at + 2] = p99!;
  }
  return { exact: true, byGroup };
}
