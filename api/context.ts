import type { FastifyReply, FastifyRequest } from 'fastify';
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';
import type { PipelineStats } from '../pipeline/pipeline.js';
import { authenticate, bindMode, type Need, type Principal } from './auth.js';
import type { AppDeps } from './deps.js';
import { enforce, LoginThrottle, RateLimiter } from './rate-limit.js';

/** This process's pipeline counters, exported as they are (a pipeline's totals since it started). */
const PIPELINE_FIGURES: [string, string, (s: PipelineStats) => number][] = [
  ['svc_pipeline_rows_written_total', 'Rows written to Parquet by this process.', (s) => s.rowsWritten],
  [
    'svc_pipeline_executions_written_total',
    'Executions committed to Parquet (visible to queries) by this process.',
    (s) => s.executionsWritten,
  ],
  ['svc_pipeline_flushes_total', 'Batch flushes by this process.', (s) => s.flushes],
  [
    'svc_pipeline_flush_seconds_total',
    'Summed batch flush durations (mean latency: divide by flushes).',
    (s) => s.flushMsTotal / 1000,
  ],
  ['svc_pipeline_last_flush_seconds', 'Duration of the last batch flush.', (s) => s.lastFlushMs / 1000],
  [
    'svc_compaction_passes_total',
    'Compaction passes this process ran, failed ones included (the process holding the compaction lease runs them).',
    (s) => s.compactionPasses,
  ],
  [
    'svc_compaction_seconds_total',
    'Summed duration of those passes (the compactor runs one DuckDB thread).',
    (s) => s.compactionMsTotal / 1000,
  ],
  [
    'svc_compaction_memory_fallbacks_total',
    "Statements of a running hour's merge that ran out of memory at COMPACTION_RUNNING_MEMORY_MB and ran again at COMPACTION_MEMORY_MB (the service's memory rises while one runs).",
    (s) => s.compactionMemoryFallbacks,
  ],
  ['svc_pipeline_last_flush_rows', 'Rows in the last batch flush.', (s) => s.lastFlushRows],
  [
    'svc_rejected_items_total',
    'Items the pipeline refused (kept for /api/ingest/rejections).',
    (s) => s.rejected,
  ],
  [
    'svc_pipeline_grouped_parses_total',
    'Ingest bodies parsed in groups of items by the cuts the API found while checking them (the rest: whole).',
    (s) => s.groupedParses,
  ],
  [
    'svc_pipeline_moved_bodies_total',
    'Ingest bodies handed to a parse worker in the buffer they arrived in, without a copy (the rest: copied).',
    (s) => s.movedBodies,
  ],
  ['svc_pipeline_failed_messages_total', 'Messages whose processing threw (redelivered).', (s) => s.failed],
  [
    'svc_pipeline_flush_failures_total',
    'Batches that could not be written, e.g. on a full disk (retried; nothing lost).',
    (s) => s.flushFailures,
  ],
  [
    'svc_pipeline_redelivered_skipped_total',
    'Messages whose request was already committed (a redelivery, or a copy a restarted broker stored again): acked, not written again.',
    (s) => s.redeliveredSkipped,
  ],
  [
    'svc_pipeline_claims_contested_total',
    'Messages another pipeline process was committing when this one claimed them (redelivered later).',
    (s) => s.claimsContested,
  ],
  [
    'svc_pipeline_commits_fenced_total',
    'Commits of a stalled or dead pipeline process fenced by this one, which took over their messages.',
    (s) => s.commitsFenced,
  ],
];

/** Durations in seconds: 1 ms to 10 s. */
const SECONDS_BUCKETS = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

/**
 * The service's own figures (CONTRACT §11) on prom-client, with its default process figures (CPU, memory, event
 * loop lag, GC), all named `svc_…`. The pipeline's are read from its counters when scraped.
 */
export function createMetrics(deps: AppDeps) {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: 'svc_' });
  const stats = () => deps.pipeline?.stats();
  let lag = 0;
  for (const [name, help, pick] of PIPELINE_FIGURES) {
    if (name.endsWith('_total')) {
      // A total kept by the pipeline: the counter is moved up to it when scraped.
      let reported = 0;
      new Counter({
        name,
        help,
        registers: [registry],
        collect() {
          const s = stats();
          if (!s) return;
          const now = pick(s);
          if (now > reported) this.inc(now - reported);
          reported = now;
        },
      });
    } else {
      new Gauge({
        name,
        help,
        registers: [registry],
        collect() {
          const s = stats();
          if (s) this.set(pick(s));
        },
      });
    }
  }
  return {
    registry,
    ingestRequests: new Counter({
      name: 'svc_ingest_requests_total',
      help: 'Ingest requests by outcome (HTTP status).',
      labelNames: ['status'] as const,
      registers: [registry],
    }),
    ingestItems: new Counter({
      name: 'svc_ingest_items_total',
      help: 'Items accepted by ingest, by kind.',
      labelNames: ['kind'] as const,
      registers: [registry],
    }),
    publishSeconds: new Histogram({
      name: 'svc_broker_publish_seconds',
      help: 'Time to store a payload: its compression for the stream, then JetStream confirming it.',
      buckets: SECONDS_BUCKETS,
      registers: [registry],
    }),
    querySeconds: new Histogram({
      name: 'svc_query_seconds',
      help: 'Time to answer read routes, by route.',
      labelNames: ['route'] as const,
      buckets: SECONDS_BUCKETS,
      registers: [registry],
    }),
    pipelineLag: new Gauge({
      name: 'svc_pipeline_lag_messages',
      help: 'Ingest messages accepted but not yet committed (all pipelines).',
      registers: [registry],
      collect() {
        if (deps.pipeline) this.set(lag);
      },
    }),
    refreshLag: async () => {
      if (deps.pipeline) lag = await deps.pipeline.lag().catch(() => lag);
    },
  };
}

export type ApiMetrics = ReturnType<typeof createMetrics>;

/** Everything a route plugin needs: the dependencies, the guard, and the figures it records. */
export interface ApiContext extends AppDeps {
  metrics: ApiMetrics;
  loginThrottle: LoginThrottle;
  /**
   * Authenticates, authorizes and rate-limits a request (ingest routes by the ingest rate, others by read), and
   * binds its mode.
   */
  guard(req: FastifyRequest, reply: FastifyReply, need: Need): Promise<Principal>;
}

export function createContext(deps: AppDeps): ApiContext {
  const c = deps.config;
  const ingestLimiter = new RateLimiter({ requestsPerSecond: c.INGEST_RATE_PER_SEC, burst: c.INGEST_BURST });
  const readLimiter = new RateLimiter({ requestsPerSecond: c.READ_RATE_PER_SEC, burst: c.READ_BURST });
  return {
    ...deps,
    metrics: createMetrics(deps),
    loginThrottle: new LoginThrottle(c.LOGIN_MAX_FAILURES, c.LOGIN_FAILURE_WINDOW_MINUTES * 60_000),
    guard: async (req, reply, need) => {
      const p = await authenticate(req, deps.control, need);
      const limiter = need === 'ingest' ? ingestLimiter : readLimiter;
      enforce(reply, limiter.take(`${p.kind}:${p.kind === 'session' ? p.tokenHash : p.id}`));
      bindMode(req, p);
      return p;
    },
  };
}
