import type { QueryEngine } from '../storage/duckdb.js';
import { endpointTemplateSql } from '../storage/rollup.js';
import { bucketSql, slotOf } from '../storage/sketch.js';

/**
 * The time rollups (storage/minutes.ts) the metrics have read, kept in memory as typed arrays, per file and kind:
 * a rollup is never changed once named (a new merge makes a new one), so what was read stays true. Summing a
 * kind's rows here costs a few nanoseconds a row where DuckDB's grouping of the same rows cost 50–150 (the 1.4M
 * sketch rows of 24 h of endpoints: 240 ms). Least recently used first out, past a byte budget.
 */

/** The distinct keys of a rollup file; rows refer to them by index. */
export interface KeyTable {
  service: string[];
  environment: string[];
  endpoint: (string | null)[];
  templated: (boolean | null)[];
  method: (string | null)[];
  /** Null in the rows of kind 5 (per service and environment only). */
  outcome: (string | null)[];
}

/** One kind's rows: minute (epoch ms), key index, sketch bucket (0 for counts kinds), count, duration sum. */
export interface KindRows {
  n: number;
  minute: Float64Array;
  key: Int32Array;
  bucket: Int32Array;
  count: Float64Array;
  dsum: Float64Array;
}

/**
 * A sketch kind's rows as runs, for the quantiles (query/metric-quantiles.ts): per minute (an hour's start for the
 * hour kinds), runs of one key, each its buckets' slots (storage/sketch.ts) ascending with their counts. A point of
 * a chart that is one run (a service's minute, per service and environment) has its quantiles read from the run;
 * the others are added up. 8 bytes a row where KindRows take 32 (24 h of 10M executions: 4.2M rows of kind 5,
 * 34 MB).
 */
export interface SketchRuns {
  /** The minutes (epoch ms) that have rows, ascending. */
  minutes: Float64Array;
  /** Per minute, its first run; one more at the end. */
  minuteRuns: Int32Array;
  /** Per run, its key (as KeyTable numbers them) and first row; one more row at the end. */
  runKey: Int32Array;
  runStart: Int32Array;
  slots: Uint32Array;
  /** Executions in the row's bucket. */
  counts: Uint32Array;
  /** The smallest and largest slot of a positive duration in the rows (+Infinity and -1 when there is none). */
  minSlot: number;
  maxSlot: number;
  /** Per run, its p50, p95 and p99 once worked out (NaN until then): query/metric-quantiles.ts keeps them here. */
  quantiles?: Float64Array;
}

interface Entry {
  keys: Promise<KeyTable>;
  kinds: Map<number, Promise<KindRows>>;
  runs: Map<number, Promise<SketchRuns>>;
  bytes: number;
}

const KEY_COLUMNS = 'service, environment, endpoint, templated, method, outcome';
const KEY_ORDER = 'service, environment, endpoint, templated, method, outcome';
const SAME_KEY = ['service', 'environment', 'endpoint', 'templated', 'method', 'outcome']
  .map((c) => `r.${c} IS NOT DISTINCT FROM k.${c}`)
  .join(' AND ');
const BYTES_PER_ROW = 8 + 4 + 4 + 8 + 8;

/**
 * The rows of an executions file in the rollups' shape, one per execution (kind RAW_KIND, `minute` its start,
 * `count` 1, `dsum` its duration): the file read for the minutes cut by a range's ends, kept like a rollup once its
 * hour is sealed (query/metrics.ts), so a dashboard's sliding window does not decode the hour again each time.
 */
export const RAW_KIND = -1;
const RAW_ROWS = `(
  SELECT ${RAW_KIND} AS kind, started_at AS minute, service, environment, endpoint, endpoint <> sent AS templated,
    method, outcome, ${bucketSql('duration_ms')} AS bucket, 1::DOUBLE AS count, duration_ms AS dsum
  FROM (
    SELECT started_at, service, environment, endpoint AS sent, ${endpointTemplateSql('endpoint')} AS endpoint, method,
      outcome, duration_ms
    FROM read_parquet($file, hive_partitioning = false)
  )
)`;
const SIDECAR_ROWS = 'read_parquet($file, hive_partitioning = false)';

export class MinutesCache {
  readonly #entries = new Map<string, Entry>();
  #bytes = 0;

  constructor(
    readonly engine: QueryEngine,
    readonly budgetBytes: number,
  ) {}

  /** A rollup file's entry, or (kind RAW_KIND) an executions file's, under an id of its own. */
  #entry(file: string, kind: number): { id: string; e: Entry; rows: string } {
    const raw = kind === RAW_KIND;
    const id = raw ? `raw:${file}` : file;
    const rows = raw ? RAW_ROWS : SIDECAR_ROWS;
    let e = this.#entries.get(id);
    if (e) {
      // Most recently used last.
      this.#entries.delete(id);
      this.#entries.set(id, e);
      return { id, e, rows };
    }
    e = { keys: this.#loadKeys(file, rows), kinds: new Map(), runs: new Map(), bytes: 0 };
    // A failed read is not kept: the next query reads again (this entry's, not one made since for the file).
    const made = e;
    made.keys.catch(() => this.#drop(id, made));
    this.#entries.set(id, e);
    return { id, e, rows };
  }

  /** The bytes the kept rows take, and whether a file's are kept: for tests and /metrics. */
  get bytes(): number {
    return this.#bytes;
  }
  holds(file: string): boolean {
    return this.#entries.has(file);
  }

  keys(file: string, kind: number): Promise<KeyTable> {
    return this.#entry(file, kind).e.keys;
  }

  rows(file: string, kind: number): Promise<KindRows> {
    return this.#kept(
      file,
      kind,
      'kinds',
      (from) => this.#loadKind(file, from, kind),
      (r) => r.n * BYTES_PER_ROW,
    );
  }

  /** A sketch kind's rows of a rollup file, packed (SketchRuns). */
  runs(file: string, kind: number): Promise<SketchRuns> {
    return this.#kept(
      file,
      kind,
      'runs',
      () => this.#loadRuns(file, kind),
      // Rows, runs (with their quantiles once worked out) and minutes.
      (r) => r.slots.byteLength * 2 + r.runKey.byteLength * 8 + r.minutes.byteLength * 1.5,
    );
  }

  /** What `load` reads of a file, kept in its entry's `field` under `kind` until the file is evicted. */
  #kept<T>(
    file: string,
    kind: number,
    field: 'kinds' | 'runs',
    load: (from: string) => Promise<T>,
    bytesOf: (value: T) => number,
  ): Promise<T> {
    const { id, e, rows: from } = this.#entry(file, kind);
    const map = e[field] as Map<number, Promise<T>>;
    let value = map.get(kind);
    if (!value) {
      value = load(from).then((v) => {
        // Counted only while the file is still kept (it may have been dropped while this was read).
        if (this.#entries.get(id) === e) {
          const bytes = bytesOf(v);
          e.bytes += bytes;
          this.#bytes += bytes;
          this.#evict(id);
        }
        return v;
      });
      const made = value;
      made.catch(() => {
        if (map.get(kind) === made) map.delete(kind);
      });
      map.set(kind, made);
    }
    return value;
  }

  #drop(file: string, e: Entry): void {
    if (this.#entries.get(file) !== e) return;
    this.#entries.delete(file);
    this.#bytes -= e.bytes;
  }

  /** Drops the least recently used files (never `keep`) until the budget holds. */
  #evict(keep: string): void {
    for (const [file, e] of this.#entries) {
      if (this.#bytes <= this.budgetBytes) return;
      if (file === keep) continue;
      this.#drop(file, e);
    }
  }

  async #loadKeys(file: string, from: string): Promise<KeyTable> {
    const rows = await this.engine.all(`SELECT DISTINCT ${KEY_COLUMNS} FROM ${from} ORDER BY ${KEY_ORDER}`, {
      file,
    });
    return {
      service: rows.map((r) => r.service as string),
      environment: rows.map((r) => r.environment as string),
      endpoint: rows.map((r) => (r.endpoint ?? null) as string | null),
      templated: rows.map((r) => (r.templated ?? null) as boolean | null),
      method: rows.map((r) => (r.method ?? null) as string | null),
      outcome: rows.map((r) => (r.outcome ?? null) as string | null),
    };
  }

  async #loadKind(file: string, from: string, kind: number): Promise<KindRows> {
    // The key index as #loadKeys numbers them: the rank of the key in the same order. Ordered by minute, key and
    // bucket, so a range of minutes is a slice, a run of rows adds to one cell (query/metric-cells.ts), and a run's
    // buckets ascend (SketchRuns).
    const [minute, key, bucket, count, dsum] = await this.engine.numericColumns(
      `WITH rows AS MATERIALIZED (SELECT * FROM ${from} WHERE kind = ${kind}),
      k AS (
        SELECT ${KEY_COLUMNS}, row_number() OVER (ORDER BY ${KEY_ORDER}) - 1 AS key
        FROM (SELECT DISTINCT ${KEY_COLUMNS} FROM ${from})
      )
      SELECT epoch_ms(r.minute)::DOUBLE, k.key::DOUBLE, r.bucket::DOUBLE, r.count, r.dsum
      FROM rows r JOIN k ON ${SAME_KEY}
      ORDER BY 1, 2, 3`,
      { file },
    );
    return {
      n: minute!.length,
      minute: minute!,
      key: Int32Array.from(key!),
      bucket: Int32Array.from(bucket!),
      count: count!,
      dsum: dsum!,
    };
  }

  async #loadRuns(file: string, kind: number): Promise<SketchRuns> {
    const { n, key, minute, bucket, count } = await this.#loadKind(file, SIDECAR_ROWS, kind);
    const minutes: number[] = [];
    const minuteRuns: number[] = [];
    const runKey: number[] = [];
    const runStart: number[] = [];
    const slots = new Uint32Array(n);
    const counts = new Uint32Array(n);
    let sum = 0;
    let minSlot = Number.POSITIVE_INFINITY;
    let maxSlot = -1;
    for (let i = 0; i < n; i++) {
      const newMinute = i === 0 || minute[i] !== minute[i - 1];
      if (newMinute) {
        minutes.push(minute[i]!);
        minuteRuns.push(runKey.length);
      }
      if (newMinute || key[i] !== key[i - 1]) {
        runKey.push(key[i]!);
        runStart.push(i);
        sum = 0;
      }
      const slot = slotOf(bucket[i]!);
      slots[i] = slot;
      // Zero durations (slot 0) are counted apart from the others (query/metric-quantiles.ts).
      if (slot > 0 && slot < minSlot) minSlot = slot;
      if (slot > 0 && slot > maxSlot) maxSlot = slot;
      sum += count[i]!;
      // 2^32 executions of one key in one run (a minute, or an hour) would be 1.2M a second at least.
      if (sum > 0xffff_ffff) throw new Error(`${file}: more executions in a run than it counts`);
      counts[i] = count[i]!;
    }
    minuteRuns.push(runKey.length);
    runStart.push(n);
    return {
      minutes: Float64Array.from(minutes),
      minuteRuns: Int32Array.from(minuteRuns),
      runKey: Int32Array.from(runKey),
      runStart: Int32Array.from(runStart),
      slots,
      counts,
      minSlot,
      maxSlot,
    };
  }
}

const caches = new WeakMap<QueryEngine, MinutesCache>();
/** What the rollups read into memory may take, per query engine, unless configured (METRICS_CACHE_MB). */
const MINUTES_CACHE_BYTES = 256 * 2 ** 20;

/** The engine's cache; `budgetBytes` sets its budget when it is made (the process entry does, from its config). */
export function minutesCacheOf(engine: QueryEngine, budgetBytes = MINUTES_CACHE_BYTES): MinutesCache {
  let c = caches.get(engine);
  if (!c) {
    c = new MinutesCache(engine, budgetBytes);
    caches.set(engine, c);
  }
  return c;
}
