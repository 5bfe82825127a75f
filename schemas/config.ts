import os from 'node:os';
import path from 'node:path';
import { z } from 'zod';

/**
 * The one configuration module: a zod schema over the environment, parsed once at start, typed and frozen.
 * Every knob and limit of the service is here, with its default.
 */

const int = (def: number, min = 0, max = Number.MAX_SAFE_INTEGER) =>
  z.coerce.number().int().min(min).max(max).default(def);
const bool = (def: boolean) =>
  z
    .enum(['true', 'false', '1', '0'])
    .default(def ? 'true' : 'false')
    .transform((v) => v === 'true' || v === '1');

const MiB = 1024 * 1024;

export const configSchema = z.object({
  PORT: int(8080, 0, 65535),
  HOST: z.string().min(1).default('0.0.0.0'),
  DATA_DIR: z.string().min(1).default('./data'),
  /**
   * Unset: launch an embedded nats-server child with its store under DATA_DIR. A cluster: its nodes' URLs,
   * comma-separated (the client fails over between them).
   */
  NATS_URL: z
    .string()
    .refine((v) => v.split(',').every((u) => z.string().url().safeParse(u.trim()).success), {
      message: 'a URL, or several separated by commas',
    })
    .optional(),
  /**
   * Copies JetStream keeps of the ingest stream and of every bucket: 3 on a 3-node cluster (a node may die without
   * losing or stopping anything), 1 on a single server.
   */
  NATS_REPLICAS: int(1, 1, 5),
  NATS_SERVER_BIN: z.string().min(1).optional(),
  /**
   * The embedded nats-server's Go memory limit (GOMEMLIMIT, MiB; 0: none; GOMEMLIMIT in the environment wins). Its
   * heap holds the messages not yet consumed and, by Go's default, as much again of garbage. Under the ingest
   * benchmark's closed loop (a backlog) it peaked at 411–534 MiB without a limit and 265–273 at 256, for more of its
   * CPU per execution (plain executions 0.6–1.2 µs, the default body about 3); at 160 it spent twice its CPU
   * collecting. At a rate the service keeps up with (40k/s offered) the limit is not reached and costs nothing.
   */
  NATS_MEMORY_LIMIT_MB: int(256, 0, 1_048_576),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  /** Unset: the log goes to stdout. Set: appended to this file (the test run greps its logs for secrets). */
  LOG_FILE: z.string().min(1).optional(),

  // Write path knobs.
  /** Rows across all datasets that make a batch flush at once. */
  BATCH_MAX_ROWS: int(100_000, 1),
  /**
   * A batch is flushed at most this long after its first row arrived: bounds time-to-visible. The sweep at
   * 25,000 exec/s: 202 → visible p99 615 ms at 250, 834 at 500, 1,411 at 1000, for 2 % more CPU than 500.
   */
  FLUSH_INTERVAL_MS: int(250, 10, 60_000),
  /**
   * Parse/validate worker threads; 0 means one per core plus one (the sweep on 2 cores: 3 stored as much as 2
   * and drained the backlog sooner, 1 fell behind the API).
   */
  PIPELINE_WORKERS: int(0, 0, 64),
  /**
   * Run V8 with `--single-threaded-gc`: each thread collects its own garbage, without V8's parallel helper
   * threads. auto: on with two cores or fewer, where the helpers compete with the workers for the same cores
   * (measured on 2 cores: 11 % less CPU per execution, 11 % more stored per second). A V8 flag must be given
   * on the command line (set at run time it crashes V8): `npm start` passes it; see `nodeFlags` in main.ts.
   */
  SINGLE_THREADED_GC: z.enum(['auto', 'true', 'false']).default('auto'),
  /**
   * V8's `--initial-old-space-size` (MB; 0: V8's own), for every thread (V8 flags are per process): the old
   * generation may grow this far before V8 sizes it from what survives. V8 set the main thread's limit about 10 %
   * above the ~33 MB it kept live, so under load it marked its whole old space every ~0.35 s (36 full collections
   * in a 20 s run, 2 s of incremental marking); at 128, one in 20 s, about 7 a minute.
   */
  INITIAL_OLD_SPACE_MB: int(128, 0, 4096),
  /** Parquet encoder worker threads (each flush encodes its partitions in parallel up to this many). */
  ENCODE_WORKERS: int(1, 1, 64),
  /** Messages the consumer keeps in flight (fetched, not yet committed). */
  CONSUMER_MAX_MESSAGES: int(256, 1, 10_000),
  /** Unacked messages are redelivered after this long; must cover a slow flush. */
  CONSUMER_ACK_WAIT_MS: int(30_000, 1000),
  /**
   * Codec of the files each flush writes. They live minutes: compaction merges them into compressed files.
   * `uncompressed` is written directly from the columns (storage/parquet-plain.ts); `snappy` and `zstd` go through
   * parquet-wasm. Alternating A/B over 20 s (`npm run bench -- ingest --sweep
   * PARQUET_COMPRESSION=snappy,uncompressed,snappy,uncompressed`): 67.8 / 59.8 µs of CPU per execution with
   * snappy, 50.6 / 49.5 uncompressed (the encoder thread 9.9 / 8.3 against 2.8 / 2.3), 25.3k / 27.5k against
   * 33.7k / 32.5k stored exec/s; for about 4.5× the bytes until the merge (about 710 B per execution with its
   * logs). Snappy encodes in about half ZSTD's CPU (measured: 6.3 against 9–11 µs per execution).
   */
  PARQUET_COMPRESSION: z.enum(['zstd', 'snappy', 'uncompressed']).default('uncompressed'),
  /**
   * Dictionary-encode the columns of the files each flush writes: smaller files for more encoding work. Off:
   * they live until the next merge, which encodes its own. Alternating A/B over 30 s: 50.9k/45.9k stored
   * exec/s with, 53.7k/47.6k without (1.7 µs less CPU per execution).
   */
  PARQUET_DICTIONARY: bool(false),
  /**
   * The fingerprint stage (CONTRACT §9): endpoint templates, fingerprints and issue ids in the parse workers,
   * failures rows and issue upserts. Off only to measure what it costs (`npm run bench -- ingest --sweep
   * FINGERPRINT_STAGE=true,false`): with it off, failed executions are grouped into no issue.
   */
  FINGERPRINT_STAGE: bool(true),
  /**
   * The per-minute rollups of the metrics (storage/minutes.ts), made by the compactor beside each merged
   * executions file. Off only to measure what they cost (`npm run bench -- ingest --sweep
   * METRICS_ROLLUPS=true,false`): without them the metrics scan the executions.
   */
  METRICS_ROLLUPS: bool(true),
  /** How often partitions are compacted (0: never, for benchmarks of the bare write path). */
  COMPACTION_INTERVAL_MS: int(30_000, 0),
  /** While an hour is written, its small files are merged once there are this many. */
  COMPACTION_MIN_FILES: int(16, 2),
  /**
   * Replaced files are deleted this long after a compaction (queries in flight may still read them; the slowest of
   * the query benchmark, a full sort of 6 h of 1M executions, takes 0.2 s). It bounds the disk the flush files
   * hold: at full load on two cores (33k executions/s, uncompressed flush files) the data directory grew by about
   * 21 MiB/s, so a minute of grace holds about 2 GiB of replaced files where 5 minutes held about 7.
   */
  COMPACTION_GRACE_MS: int(60_000, 0),
  /**
   * Codec of compacted files. Over the 10M-execution query benchmark lz4 took the detail from 16.3 to 13.7–16.1
   * ms p50 (within the run-to-run spread) for 1,384 MiB of files against 789: zstd stays the default.
   */
  COMPACTION_COMPRESSION: z.enum(['zstd', 'lz4', 'snappy']).default('zstd'),
  /**
   * Memory the compactor's DuckDB may use before it spills to disk (merging a busy hour sorts millions of rows).
   * An hour's end sorts the whole hour, and that sort failed with out of memory instead of spilling at 256 over the
   * flush files of 950k plain executions, and at 128 over 1.13M (flush files of 16k-row groups: the sort, not the
   * files' row groups); at 512 an hour of 11.4M ended (npm run bench -- hour-end). The service's peak RSS follows
   * it while the running hour is merged: 1,410 MiB at 512, 1,092 at 256, 868 with no merges (90 s of plain
   * executions).
   */
  COMPACTION_MEMORY_MB: int(512, 128),
  /**
   * The lower limit the merges of an hour still being written run at (with the sidecars of their files): an
   * executions merge takes the small files this sorts without spilling, two at least (storage/compaction.ts
   * runningShare), and a statement that runs out of memory here runs again at COMPACTION_MEMORY_MB. Capped at
   * COMPACTION_MEMORY_MB. Over 90 s of 50k plain executions/s: service peak RSS 943–1,077 MiB against 1,281–1,391
   * when these merges ran at 512.
   */
  COMPACTION_RUNNING_MEMORY_MB: int(256, 16),
  /**
   * Memory the metrics' rollups may take once read (query/minutes-cache.ts): the rows of the hours a dashboard
   * looks at stay in memory as typed arrays. 24 h of 10M executions a day: about 80 MiB for its overviews, endpoints and hourly charts.
   */
  METRICS_CACHE_MB: int(256, 16),
  /** Memory the query engine's DuckDB may use before it spills to disk (DuckDB's own default is 80 % of RAM). */
  QUERY_MEMORY_MB: int(1024, 128),
  /** 0: JetStream keeps a payload until the pipeline has committed it, however long that takes. */
  STREAM_MAX_AGE_HOURS: int(0, 0),
  STREAM_MAX_BYTES: int(10 * 1024 * MiB, 1 * MiB),

  // Limits (CONTRACT §4). Rates are per key or session, per API process.
  INGEST_RATE_PER_SEC: int(100, 1),
  INGEST_BURST: int(200, 1),
  READ_RATE_PER_SEC: int(20, 1),
  READ_BURST: int(40, 1),
  RETENTION_DAYS: int(30, 1, 400),
  CONTEXT_MAX_INDEXED_KEYS: int(50, 1, 1000),
  CONTEXT_MAX_KEYS_PER_SEARCH: int(5, 1, 50),
  CONTEXT_MAX_VALUES_PER_KEY: int(10, 1, 100),
  CONTEXT_WINDOW_WITHOUT_SERVICE_HOURS: int(24, 1),
  CONTEXT_WINDOW_WITH_SERVICE_DAYS: int(7, 1),
  METRICS_MAX_POINTS: int(1500, 10),
  /** Failed log-ins for one e-mail within the window before further attempts are refused. */
  LOGIN_MAX_FAILURES: int(5, 1),
  LOGIN_FAILURE_WINDOW_MINUTES: int(15, 1),
  BODY_MAX_BYTES: int(5 * MiB, 1024),
  BODY_MAX_DECODED_BYTES: int(20 * MiB, 1024),
  MAX_EXECUTIONS_PER_REQUEST: int(1000, 1),
  MAX_LOGS_PER_REQUEST: int(5000, 1),
  MAX_METRICS_PER_REQUEST: int(5000, 1),
  PAGE_SIZE_DEFAULT: int(50, 1, 1000),
  PAGE_SIZE_MAX: int(200, 1, 1000),
  MAX_RESULT_WINDOW: int(10_000, 1),
  PUBLISH_TIMEOUT_MS: int(5000, 100),
  /**
   * Ingest bodies sent uncompressed are stored on the stream brotli-compressed (broker/ingest-publisher.ts): a sixth
   * of the bytes for nats-server to copy. Pipelines of builds before it cannot read those messages (they would drop
   * them as malformed): while such pipelines still consume the stream (a rolling upgrade), set it to false, and
   * before going back to such a build, set it to false and let the stream drain.
   */
  STREAM_COMPRESSION: bool(true),
  /** Set: GET /metrics requires `Authorization: Bearer <METRICS_TOKEN>`. */
  METRICS_TOKEN: z.string().min(16).optional(),

  /**
   * Behind a reverse proxy: trust its X-Forwarded-* headers for the client's address and protocol (so session
   * cookies get `Secure` when the proxy serves HTTPS). Off: a client could claim HTTPS by sending the header.
   */
  TRUST_PROXY: bool(false),

  /**
   * Check every answer under 400 against the schema its route declares (api/answer-check.ts): a mismatch is a 500
   * naming it. For tests (on in the suite's configuration); it costs a zod pass over each answer.
   */
  VALIDATE_ANSWERS: bool(false),

  /** On the first start, print how to sign up. Off in tests. */
  PRINT_FIRST_START_HINT: bool(true),
});

export type Config = Readonly<z.infer<typeof configSchema>> & {
  /** Absolute form of DATA_DIR. */
  readonly dataDir: string;
  /** PIPELINE_WORKERS resolved against the core count. */
  readonly pipelineWorkers: number;
  /** SINGLE_THREADED_GC resolved against the core count. */
  readonly singleThreadedGc: boolean;
};

export class ConfigError extends Error {}

/** Parses the environment; a bad value throws a ConfigError that names each bad variable. */
export function loadConfig(env: Record<string, string | undefined> = process.env): Config {
  const picked: Record<string, string> = {};
  for (const key of Object.keys(configSchema.shape)) {
    const value = env[key];
    if (value !== undefined && value !== '') picked[key] = value;
  }
  const parsed = configSchema.safeParse(picked);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `  ${i.path.join('.')}: ${i.message}`);
    throw new ConfigError(`invalid configuration:\n${lines.join('\n')}`);
  }
  const c = parsed.data;
  if (c.PAGE_SIZE_DEFAULT > c.PAGE_SIZE_MAX) {
    throw new ConfigError('invalid configuration:\n  PAGE_SIZE_DEFAULT: must not exceed PAGE_SIZE_MAX');
  }
  if (c.BODY_MAX_DECODED_BYTES < c.BODY_MAX_BYTES) {
    throw new ConfigError(
      'invalid configuration:\n  BODY_MAX_DECODED_BYTES: must be at least BODY_MAX_BYTES',
    );
  }
  return Object.freeze({
    ...c,
    dataDir: path.resolve(c.DATA_DIR),
    pipelineWorkers: c.PIPELINE_WORKERS || os.availableParallelism() + 1,
    singleThreadedGc:
      c.SINGLE_THREADED_GC === 'auto' ? os.availableParallelism() <= 2 : c.SINGLE_THREADED_GC === 'true',
  });
}
