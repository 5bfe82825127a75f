import fs from 'node:fs/promises';
import path from 'node:path';
import {
  endpointTemplate,
  failureTypeOf,
  fingerprintParts,
  issueIdOf,
  issueTitle,
} from '../../pipeline/fingerprint.js';
import { type MessageMeta, toChunks } from '../../pipeline/to-columns.js';
import { type IssueOccurrences, mergeOccurrences } from '../../schemas/issues.js';
import type { ExecutionRecord, LogLevel, LogRecord, Mode } from '../../schemas/records.js';
import { HOUR_MS } from '../../schemas/time.js';
import { encodeUlid } from '../../schemas/ulid.js';
import { BatchWriter, type PartitionBatch } from '../../storage/batch-writer.js';
import { CommitJournal, type Delivery } from '../../storage/commit-journal.js';
import { runCompaction } from '../../storage/compaction.js';
import { QueryEngine } from '../../storage/duckdb.js';
import { ID_FILTER_SUFFIX } from '../../storage/id-filter.js';
import { PARQUET_SUFFIX } from '../../storage/layout.js';
import type { Codec } from '../../storage/parquet-encode.js';
import { rng } from '../traffic.js';

/**
 * A realistic executions dataset for the query benchmark, with their logs (0–5 per execution, 2.5 on average, in
 * its time; a failure adds an error log with the exception), written through the service's own write path
 * (ExecutionRecord → toChunks → BatchWriter + CommitJournal) and then compacted as the service would, so the
 * files queried are the layout the service converges to: one zstd file per hour, sorted by service and time.
 *
 * Failed executions (FAILURE_SHARE of all) go through the fingerprint stage as the pipeline's would
 * (pipeline/fingerprint.ts, for BENCH_WORKSPACE and BENCH_MODE): each gets its failure type, fingerprint and issue
 * id, so toChunks also writes its `failures` row. An endpoint template fails in 25 ways (a bare 5xx, a gateway
 * timeout, or one of EXCEPTION_KINDS exceptions, Zipf-weighted), and traffic is Zipf over services and endpoints,
 * so the failures fall into about 2,000 issues of very different sizes (seed 42, 10M executions: 251,724 failures,
 * 1,971 issues, the biggest 7,885, the median 21). Each issue's occurrences are summed as the
 * pipeline sums a batch's (IssueOccurrences) and saved beside the marker, for the benchmark to create the
 * issues' records in the control plane with.
 *
 * Seeded: the same parameters give the same rows (only the time window moves with the day it was generated),
 * so runs on different days still compare. A marker file in the data directory records the parameters; a
 * later run with the same parameters queries the files already there.
 */

/** Bump whenever the generator writes different rows or columns for the same parameters: old caches must not match. */
const DATASET_VERSION = 8;
const MARKER = 'bench-query-dataset.json';
/** Beside the marker: every issue's IssueOccurrences over the whole dataset, biggest first. */
const ISSUES_FILE = 'bench-query-issues.json';
/** Compressed, unlike the service's default (PARQUET_COMPRESSION): a whole dataset is written before it is compacted. */
const CODEC: Codec = 'zstd';
/** Executions per simulated SDK request: one `toChunks` call, one journal sequence. */
const REQUEST_ROWS = 500;
/** Execution ids kept for the detail queries, spread evenly over the dataset. */
const SAMPLE_IDS = 256;
/** Failed executions over all traffic: issue 12's shape, 250k failures per 10M executions. */
export const FAILURE_SHARE = 0.025;
/** Of the failures: bare 5xx answers, then gateway timeouts (504, no exception); the rest threw an exception. */
const BARE_5XX_SHARE = 0.4;
const BARE_TIMEOUT_SHARE = 0.15;
/**
 * Exception kinds per endpoint template (each its own issue), Zipf-weighted: with a bare 5xx and a timeout, 25
 * ways to fail for each of the 80 (service, template) pairs, 2,000 issues at most.
 */
export const EXCEPTION_KINDS = 23;

export const BENCH_WORKSPACE = 'ws_benchquery';
export const BENCH_MODE: Mode = 'test';
/**
 * The benchmark workspace's `indexedContextKeys`: every context key the generator writes, so each gets its typed
 * columns at ingest (storage/context-columns.ts), as in a workspace that searches by all of them.
 */
export const INDEXED_CONTEXT_KEYS = ['customer.id', 'customer.tier', 'region', 'version', 'flags.beta'];

export interface DatasetParams {
  executions: number;
  hours: number;
  seed: number;
  /**
   * Execution ids: ULIDs (absent, the default: time first, as the service assigns them) or `span`, 16 random hex
   * digits as the Node SDK and OTLP send them (span ids), which every hour's by-id copy has a part in range of.
   */
  ids?: 'span';
}

export interface GenerationStats {
  seconds: number;
  rowsPerSec: number;
  /** Time spent building records and chunks on the main thread (the encoder runs meanwhile). */
  buildSeconds: number;
  /** Time the main thread waited for the writer: when large, encoding (one thread, as in the service) bounds. */
  writeWaitSeconds: number;
  writes: number;
  batchRows: number;
  filesWritten: number;
  bytesWritten: number;
  compaction: { seconds: number; partitions: number; filesIn: number; deleted: number };
  /** After compaction: what the queries read (executions). */
  files: number;
  parquetBytes: number;
  logs: number;
  logParquetBytes: number;
}

export interface DatasetMarker {
  version: number;
  params: DatasetParams;
  /** False while generating: a marker left incomplete means the directory holds a broken dataset of ours. */
  complete: boolean;
  workspaceId: string;
  mode: Mode;
  indexedContextKeys: string[];
  /** Every startedAt is in [fromMs, toMs). */
  fromMs: number;
  toMs: number;
  /** Busiest first. */
  services: { name: string; executions: number }[];
  sampleIds: string[];
  /** Failed executions (each with its failures row) and the distinct issues they fall into. */
  failures: number;
  issues: number;
  generatedAt: string;
  generation: GenerationStats | null;
}

const SERVICES = [
  'checkout-api',
  'orders',
  'payments',
  'search',
  'catalog',
  'auth',
  'users',
  'inventory',
  'shipping',
  'notifications',
  'recommendations',
  'reviews',
  'cart',
  'pricing',
  'billing',
  'gateway',
  'media',
  'analytics-ingest',
  'admin',
  'webhooks',
];

/** Two per service: 20 services × 2 resources × 5 routes = 200 endpoints. */
const RESOURCES = [
  'sessions',
  'carts',
  'orders',
  'order-items',
  'payments',
  'refunds',
  'queries',
  'suggestions',
  'products',
  'variants',
  'tokens',
  'logins',
  'users',
  'profiles',
  'stock',
  'warehouses',
  'shipments',
  'labels',
  'notifications',
  'templates',
  'recommendations',
  'feeds',
  'reviews',
  'ratings',
  'items',
  'coupons',
  'prices',
  'rules',
  'invoices',
  'subscriptions',
  'routes',
  'health',
  'images',
  'videos',
  'events',
  'batches',
  'reports',
  'roles',
  'webhooks',
  'deliveries',
];

const ROUTES = [
  { method: 'GET', suffix: '', withId: false },
  { method: 'GET', suffix: '/:id', withId: true },
  { method: 'POST', suffix: '', withId: false },
  { method: 'PATCH', suffix: '/:id', withId: true },
  { method: 'DELETE', suffix: '/:id', withId: true },
] as const;

const TIERS = ['free', 'pro', 'enterprise'] as const;
const REGIONS = ['us-east-1', 'eu-west-1', 'us-west-2', 'ap-southeast-1', 'sa-east-1'] as const;
/** Cumulative shares of REGIONS among customers. */
const REGION_CUMULATIVE = [40, 70, 85, 95, 100];
const CUSTOMERS = 2_000_000;
const USER_AGENTS = ['sdk-node/3.2.1', 'sdk-python/2.8.0', 'okhttp/4.12.0', 'Mozilla/5.0 (Macintosh)'];
const LOG_TABLES = [
  'orders',
  'customers',
  'sessions',
  'payments',
  'inventory',
  'prices',
  'events',
  'accounts',
];

const CONSTRAINTS = ['orders_pkey', 'payments_idempotency_key', 'users_email_key', 'carts_session_id_key'];
const FIELDS = ['email', 'quantity', 'currency', 'postalCode', 'couponCode'];
const PROPERTIES = ['id', 'items', 'total', 'customer', 'length'];

/** A whole number in [0, below): the message normalizer turns it into `<num>`. */
const int = (r: () => number, below: number) => Math.floor(r() * below);
const oneOf = <T>(r: () => number, list: readonly T[]): T => list[int(r, list.length)]!;
/** A UUID: random ids as hex digits could come out all digits (`<num>`, not `<hex>`), a UUID is always `<uuid>`. */
const uuid = (r: () => number) => {
  const h = hex(r, 32);
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-4${h.slice(13, 16)}-a${h.slice(17, 20)}-${h.slice(20)}`;
};

/**
 * What endpoints throw: a type, a message whose varying parts are all of the kinds the normalizer replaces (numbers,
 * UUIDs, e-mail addresses, quoted strings), so each kind's occurrences share one fingerprint, and where it was
 * thrown (an optional library frame above the in-app one, as a real stack has).
 */
export const EXCEPTIONS: readonly {
  type: string;
  message: (r: () => number) => string;
  fn: string;
  library?: string;
}[] = [
  { type: 'NotFoundError', message: (r) => `order ${int(r, 1e7)} not found`, fn: 'loadOrder' },
  {
    type: 'DatabaseError',
    message: (r) => `duplicate key value violates unique constraint "${oneOf(r, CONSTRAINTS)}"`,
    fn: 'insertRow',
    library: 'Client.query (/app/node_modules/pg/lib/client.js:526:17)',
  },
  {
    type: 'UpstreamError',
    message: (r) => `upstream answered ${oneOf(r, [500, 502, 503])} after ${int(r, 5000)} ms`,
    fn: 'callUpstream',
  },
  {
    type: 'TimeoutError',
    message: (r) => `operation timed out after ${1000 + int(r, 29_000)}ms`,
    fn: 'withDeadline',
  },
  {
    type: 'TypeError',
    message: (r) => `Cannot read properties of undefined (reading '${oneOf(r, PROPERTIES)}')`,
    fn: 'toResponse',
  },
  {
    type: 'ValidationError',
    message: (r) => `field "${oneOf(r, FIELDS)}" is invalid for user${int(r, 1e6)}@example.com`,
    fn: 'validateBody',
  },
  {
    type: 'ConflictError',
    message: (r) => `lock on ${uuid(r)} held by another request for ${int(r, 900)} ms`,
    fn: 'acquireLock',
  },
  {
    type: 'RateLimitError',
    message: (r) => `quota of ${oneOf(r, [60, 600, 6000])} requests per minute exceeded for key ${uuid(r)}`,
    fn: 'checkQuota',
  },
  {
    type: 'Error',
    message: (r) => `connect ECONNREFUSED 10.0.${int(r, 256)}.${int(r, 256)}:5432`,
    fn: 'connectPool',
    library: 'TCPConnectWrap.afterConnect [as oncomplete] (node:net:1607:16)',
  },
];

/** Cumulative weights of an endpoint's exception kinds: its first kind is the common one. */
const KIND_CUMULATIVE = (() => {
  const w = Array.from({ length: EXCEPTION_KINDS }, (_, i) => 1 / (i + 1) ** 1.2);
  const total = w.reduce((a, b) => a + b, 0);
  let acc = 0;
  return w.map((x) => {
    acc += x / total;
    return acc;
  });
})();

/** Where in the code an exception is thrown: the same exception from another layer is another issue. */
const LAYERS = ['routes', 'services', 'repositories'];

/**
 * Exception kind `kind` (0 … EXCEPTION_KINDS - 1) of the endpoint template numbered `scope` across the world (an
 * issue's scope: the service and endpoint template are fingerprint parts, the method is not), as the SDK sends
 * it. The kinds of one scope are distinct (exception, layer) pairs, rotated per scope.
 */
export function exceptionOf(
  scope: number,
  route: string,
  kind: number,
  r: () => number,
): { type: string; message: string; stack: string } {
  const e = EXCEPTIONS[(scope + kind) % EXCEPTIONS.length]!;
  const layer = LAYERS[Math.floor(kind / EXCEPTIONS.length) % LAYERS.length]!;
  const message = e.message(r);
  const frames = [
    ...(e.library ? [e.library] : []),
    `${e.fn} (/app/src/${layer}/${route.split('/')[2]}.ts:${40 + 7 * kind}:${5 + kind})`,
    'handle (/app/src/server.ts:118:9)',
  ];
  return {
    type: e.type,
    message,
    stack: [`${e.type}: ${message}`, ...frames.map((f) => `    at ${f}`)].join('\n'),
  };
}

interface Endpoint {
  /** Its template numbered across the world (routes that differ only by method share one): its exception kinds. */
  scope: number;
  route: string;
  method: string;
  withId: boolean;
  medianMs: number;
  sigma: number;
}

interface ServiceModel {
  name: string;
  /** Cumulative traffic weight, for a skewed pick. */
  cumulative: number;
  failureRate: number;
  endpoints: Endpoint[];
  /** Cumulative weights over `endpoints`: a few routes carry most calls. */
  endpointCumulative: number[];
  version: string;
  previousVersion: string;
}

/** The fixed shape of the world: services, endpoints and their latency, from the seed alone. */
function buildWorld(seed: number): ServiceModel[] {
  const r = rng(seed);
  // Zipf-like traffic: the busiest service gets about a third of all executions, the smallest about 1 %.
  const weights = SERVICES.map((_, i) => 1 / (i + 1) ** 1.1);
  const totalWeight = weights.reduce((s, w) => s + w, 0);
  let acc = 0;
  const world = SERVICES.map((name, s): ServiceModel => {
    acc += weights[s]! / totalWeight;
    const endpoints: Endpoint[] = [];
    for (const resource of [RESOURCES[2 * s]!, RESOURCES[2 * s + 1]!]) {
      for (const route of ROUTES) {
        endpoints.push({
          scope: 2 * (2 * s + (resource === RESOURCES[2 * s] ? 0 : 1)) + (route.withId ? 1 : 0),
          route: `/v1/${resource}${route.suffix}`,
          method: route.method,
          withId: route.withId,
          // Log-uniform medians, 3 ms … 400 ms; sigma sets how long the tail is.
          medianMs: Math.exp(Math.log(3) + r() * (Math.log(400) - Math.log(3))),
          sigma: 0.35 + r() * 0.75,
        });
      }
    }
    let eAcc = 0;
    const eWeights = endpoints.map((_, i) => 1 / (i + 1));
    const eTotal = eWeights.reduce((x, w) => x + w, 0);
    const minor = Math.floor(r() * 10);
    return {
      name,
      cumulative: acc,
      // 1 … 8 % before scaling to FAILURE_SHARE below, not in traffic order: a small service can be the flaky one.
      failureRate: 0.01 + (0.07 * ((s * 7) % 20)) / 19,
      endpoints,
      endpointCumulative: eWeights.map((w) => {
        eAcc += w / eTotal;
        return eAcc;
      }),
      version: `2.${minor + 1}.${Math.floor(r() * 10)}`,
      previousVersion: `2.${minor}.${Math.floor(r() * 10)}`,
    };
  });
  // Scaled so that the traffic-weighted failure rate is FAILURE_SHARE.
  const mean = world.reduce((m, svc, s) => m + svc.failureRate * (weights[s]! / totalWeight), 0);
  for (const svc of world) svc.failureRate *= FAILURE_SHARE / mean;
  return world;
}

/** The index whose cumulative weight first exceeds x. */
function pick(cumulative: readonly number[], x: number): number {
  for (let i = 0; i < cumulative.length; i++) if (x < cumulative[i]!) return i;
  return cumulative.length - 1;
}

/** A 32-bit integer hash: customer attributes are a function of the customer, not of the call. */
function mix(k: number): number {
  let h = Math.imul(k ^ (k >>> 16), 0x45d9f3b);
  h = Math.imul(h ^ (h >>> 16), 0x45d9f3b);
  return (h ^ (h >>> 16)) >>> 0;
}

const HEX_BYTE = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, '0'));

/** `chars` random hex digits; table-driven, since it runs several times per row. */
function hex(r: () => number, chars: number): string {
  let s = '';
  while (s.length < chars) {
    const v = Math.floor(r() * 0x1_0000_0000);
    s += HEX_BYTE[v >>> 24]! + HEX_BYTE[(v >>> 16) & 255]! + HEX_BYTE[(v >>> 8) & 255]! + HEX_BYTE[v & 255]!;
  }
  return s.length === chars ? s : s.slice(0, chars);
}

/** A ULID (time first, then 80 random bits), the shape of the ids the service assigns itself. */
function ulid(timeMs: number, r: () => number): string {
  return encodeUlid(
    timeMs,
    Uint8Array.from({ length: 10 }, () => Math.floor(r() * 256)),
  );
}

function standardNormal(r: () => number): number {
  return Math.sqrt(-2 * Math.log(1 - r())) * Math.cos(2 * Math.PI * r());
}

/** Generates the rows one simulated SDK request at a time, in time order, as the service would receive them. */
export class TrafficGenerator {
  readonly #world: ServiceModel[];
  readonly #serviceCumulative: number[];
  readonly #r: () => number;
  readonly #params: DatasetParams;
  readonly #fromMs: number;
  readonly #stepMs: number;
  readonly #sampleEvery: number;
  #next = 0;
  #seq = 0;
  readonly counts: number[];
  readonly sampleIds: string[] = [];
  logs = 0;
  failures = 0;
  readonly #issues = new Map<string, IssueOccurrences>();

  constructor(params: DatasetParams, fromMs: number) {
    this.#params = params;
    this.#world = buildWorld(params.seed);
    this.#serviceCumulative = this.#world.map((s) => s.cumulative);
    this.#r = rng(params.seed + 1);
    this.#fromMs = fromMs;
    this.#stepMs = (params.hours * HOUR_MS) / params.executions;
    this.#sampleEvery = Math.max(1, Math.floor(params.executions / SAMPLE_IDS));
    this.counts = this.#world.map(() => 0);
  }

  get generated(): number {
    return this.#next;
  }

  get done(): boolean {
    return this.#next >= this.#params.executions;
  }

  /** One request: up to REQUEST_ROWS executions of one service (an SDK batch comes from one process). */
  request(): { records: ExecutionRecord[]; logs: LogRecord[]; meta: MessageMeta } {
    const r = this.#r;
    const s = pick(this.#serviceCumulative, r());
    const svc = this.#world[s]!;
    const n = Math.min(REQUEST_ROWS, this.#params.executions - this.#next);
    const records: ExecutionRecord[] = new Array(n);
    const logs: LogRecord[] = [];
    let newest = 0;
    for (let i = 0; i < n; i++) {
      const index = this.#next + i;
      // Evenly spread over the window with jitter; every startedAt stays inside [fromMs, toMs).
      const startedAt = Math.floor(this.#fromMs + (index + r()) * this.#stepMs);
      const rec = this.#execution(svc, startedAt);
      if (index % this.#sampleEvery === 0 && this.sampleIds.length < SAMPLE_IDS)
        this.sampleIds.push(rec.executionId);
      records[i] = rec;
      this.#logsOf(rec, logs);
      newest = Math.max(newest, startedAt + rec.durationMs);
    }
    this.#next += n;
    this.counts[s]! += n;
    this.#seq++;
    this.logs += logs.length;
    return {
      records,
      logs,
      meta: {
        requestId: `req_${hex(r, 24)}`,
        receivedAt: Math.ceil(newest) + 200 + Math.floor(r() * 1500),
        seq: this.#seq,
      },
    };
  }

  #execution(svc: ServiceModel, startedAt: number): ExecutionRecord {
    const r = this.#r;
    const ep = svc.endpoints[pick(svc.endpointCumulative, r())]!;
    // Heavy customers exist: the top 0.1 % of customer ids make about 10 % of the calls.
    const customer = Math.floor(CUSTOMERS * r() ** 3);
    const h = mix(customer);
    const tierRoll = h % 100;
    const tier = TIERS[tierRoll < 70 ? 0 : tierRoll < 93 ? 1 : 2];
    const regionRoll = (h >>> 8) % 100;
    const region = REGIONS[pick(REGION_CUMULATIVE, regionRoll)]!;
    const beta = (h >>> 16) % 10 === 0;
    const version = r() < 0.8 ? svc.version : svc.previousVersion;
    const failed = r() < svc.failureRate;
    let durationMs = ep.medianMs * Math.exp(ep.sigma * standardNormal(r));
    let statusCode: number;
    let exception: { type: string; message: string; stack: string } | null = null;
    if (failed) {
      const how = r();
      if (how < BARE_5XX_SHARE) statusCode = 500 + int(r, 4);
      else if (how < BARE_5XX_SHARE + BARE_TIMEOUT_SHARE) statusCode = 504;
      else {
        exception = exceptionOf(ep.scope, ep.route, pick(KIND_CUMULATIVE, r()), r);
        statusCode = exception.type === 'TimeoutError' ? 504 : 500;
      }
      if (statusCode === 504) durationMs = 30_000 + r() * 50;
    } else {
      const roll = r();
      if (ep.withId && roll < 0.04) statusCode = 404;
      else if (ep.method !== 'GET' && roll < 0.055) statusCode = 400;
      else if (roll > 0.995) statusCode = 401;
      else statusCode = ep.method === 'POST' ? 201 : ep.method === 'DELETE' ? 204 : 200;
    }
    durationMs = Math.round(durationMs * 1000) / 1000;
    const customerId = `cus_${customer.toString(36).padStart(4, '0')}`;
    const context = { customer: { id: customerId, tier }, region, version, flags: { beta } };
    const id = ep.withId ? `${Math.floor(r() * 1e7)}` : null;
    const request = {
      headers: { 'user-agent': USER_AGENTS[h % USER_AGENTS.length], 'x-request-id': hex(r, 16) },
      ...(id !== null ? { params: { id } } : { query: { limit: '50' } }),
    };
    const response = {
      headers: { 'content-type': 'application/json' },
      bodySize: statusCode === 204 ? 0 : Math.floor(80 + r() * 4000),
    };
    const rec: ExecutionRecord = {
      executionId: this.#params.ids === 'span' ? hex(r, 16) : ulid(startedAt, r),
      traceId: hex(r, 32),
      spanId: hex(r, 16),
      parentSpanId: r() < 0.3 ? hex(r, 16) : null,
      service: svc.name,
      environment: 'production',
      source: 'http',
      // As requested, the id in the path (no request.route): issues group by the template the pipeline makes.
      endpoint: id !== null ? ep.route.replace(':id', id) : ep.route,
      method: ep.method,
      startedAt,
      durationMs,
      statusCode,
      // As the classifier decides without rules (pipeline/classify.ts): exception first, then a 5xx.
      outcome: failed ? 'failed' : 'success',
      outcomeReason: failed ? (exception ? 'exception' : 'status_5xx') : 'status',
      exceptionType: exception?.type ?? null,
      exceptionMessage: exception?.message ?? null,
      context: JSON.stringify(context),
      contextTree: context,
      request: JSON.stringify(request),
      response: JSON.stringify(response),
      exception: exception ? JSON.stringify(exception) : null,
      outcomeEvidence: null,
      fingerprint: null,
      issueId: null,
      failureType: null,
      endpointTemplate: null,
      truncated: false,
    };
    if (failed) this.#fingerprint(rec, exception);
    return rec;
  }

  /** The pipeline's fingerprint stage (pipeline/process-payload.ts) for a failed execution, and its occurrence. */
  #fingerprint(
    rec: ExecutionRecord,
    exception: { type: string; message: string; stack: string } | null,
  ): void {
    const facts = { statusCode: rec.statusCode, outcomeReason: rec.outcomeReason, exception };
    const failureType = failureTypeOf(facts);
    // As the pipeline's stage: the template of a failure only, stored with it.
    const template = endpointTemplate(rec.endpoint);
    rec.endpointTemplate = template;
    const parts = fingerprintParts({ ...facts, service: rec.service, template, custom: null }, failureType);
    const issueId = issueIdOf(BENCH_WORKSPACE, BENCH_MODE, parts);
    rec.failureType = failureType;
    rec.fingerprint = JSON.stringify(parts);
    rec.issueId = issueId;
    this.failures++;
    const occurrence: IssueOccurrences = {
      issueId,
      fingerprintParts: parts,
      title: issueTitle(rec.exceptionType, failureType, rec.method, template),
      service: rec.service,
      endpoint: template,
      method: rec.method,
      failureType,
      exceptionType: rec.exceptionType,
      environments: [rec.environment],
      count: 1,
      firstStartedAt: rec.startedAt,
      lastStartedAt: rec.startedAt,
      lastExecutionId: rec.executionId,
    };
    const seen = this.#issues.get(issueId);
    if (seen) mergeOccurrences(seen, occurrence);
    else this.#issues.set(issueId, occurrence);
  }

  /** Every issue's occurrences so far, biggest first (ties by id). */
  issues(): IssueOccurrences[] {
    return [...this.#issues.values()].sort((a, b) => b.count - a.count || (a.issueId < b.issueId ? -1 : 1));
  }

  /**
   * The execution's logs, as an SDK sends them inside the item (they inherit its ids, service and environment):
   * 0–5 spread over its duration, plus an error log with the exception when it failed with one.
   */
  #logsOf(e: ExecutionRecord, out: LogRecord[]): void {
    const r = this.#r;
    const n = Math.floor(r() * 6);
    const logger = `${e.service}.${e.endpoint.split('/')[2]}`;
    const log = (
      at: number,
      level: LogLevel,
      message: string,
      attributes: string | null,
      exception: string | null,
    ) =>
      out.push({
        timestamp: Math.floor(e.startedAt + at * e.durationMs),
        level,
        message,
        service: e.service,
        environment: e.environment,
        executionId: e.executionId,
        traceId: e.traceId,
        spanId: e.spanId,
        logger,
        attributes,
        exception,
        truncated: false,
      });
    for (let i = 0; i < n; i++) {
      const roll = r();
      const at = (i + r()) / (n + 1);
      if (roll < 0.35) log(at, 'debug', `cache ${r() < 0.7 ? 'hit' : 'miss'} for ${e.endpoint}`, null, null);
      else if (roll < 0.8)
        log(
          at,
          'info',
          `query ${LOG_TABLES[Math.floor(r() * LOG_TABLES.length)]} took ${Math.round(r() * e.durationMs)} ms`,
          `{"rows":${Math.floor(r() * 200)},"db.system":"postgresql"}`,
          null,
        );
      else if (roll < 0.95)
        log(
          at,
          'warn',
          `slow upstream call to ${LOG_TABLES[Math.floor(r() * LOG_TABLES.length)]}-svc, retrying`,
          `{"attempt":${1 + Math.floor(r() * 3)}}`,
          null,
        );
      else log(at, 'info', `${e.method} ${e.endpoint} ${e.statusCode}`, null, null);
    }
    if (e.exception)
      log(1, 'error', `unhandled ${e.exceptionType}: ${e.exceptionMessage}`, null, e.exception);
  }

  services(): { name: string; executions: number }[] {
    return this.#world
      .map((s, i) => ({ name: s.name, executions: this.counts[i]! }))
      .sort((a, b) => b.executions - a.executions);
  }
}

async function readMarker(dataDir: string): Promise<DatasetMarker | null> {
  try {
    return JSON.parse(await fs.readFile(path.join(dataDir, MARKER), 'utf8')) as DatasetMarker;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw err;
  }
}

/** The dataset's issues as the pipeline would have reported them (IssueOccurrences over all of it), biggest first. */
export async function readIssueOccurrences(dataDir: string): Promise<IssueOccurrences[]> {
  return JSON.parse(await fs.readFile(path.join(dataDir, ISSUES_FILE), 'utf8')) as IssueOccurrences[];
}

async function writeMarker(dataDir: string, m: DatasetMarker): Promise<void> {
  const target = path.join(dataDir, MARKER);
  await fs.writeFile(`${target}.tmp`, `${JSON.stringify(m, null, 2)}\n`);
  await fs.rename(`${target}.tmp`, target);
}

const sameParams = (a: DatasetParams, b: DatasetParams) =>
  a.executions === b.executions && a.hours === b.hours && a.seed === b.seed && a.ids === b.ids;

async function parquetFiles(dir: string): Promise<{ files: number; bytes: number }> {
  let files = 0;
  let bytes = 0;
  const entries = await fs.readdir(dir, { recursive: true, withFileTypes: true }).catch(() => []);
  for (const e of entries) {
    if (!e.isFile() || !e.name.endsWith(PARQUET_SUFFIX)) continue;
    files++;
    bytes += (await fs.stat(path.join(e.parentPath, e.name))).size;
  }
  return { files, bytes };
}

/** What a dataset keeps on disk, in bytes, by the part of the layout each file is (storage/manifest.ts, sidecars.ts). */
export interface DiskParts {
  /** The hours' Parquet files. */
  hourFiles: number;
  /** Their by-id copies (`*.ids-NNNN`). */
  byIdCopies: number;
  /** The filters of the executions copies' ids (`*.idfilter`, storage/id-filter.ts). */
  idFilters: number;
  /** The sidecars beside executions files: baseline rollups and per-minute rollups. */
  rollups: number;
  minutes: number;
  /** The partitions' manifests and anything else. */
  other: number;
}

/** All the bytes of a dataset's parts. */
export const totalBytes = (parts: DiskParts) =>
  Object.values(parts).reduce((a: number, b: number) => a + b, 0);

/** The bytes under `<dataDir>/<dataset>`, by part. */
export async function diskParts(dataDir: string, dataset: string): Promise<DiskParts> {
  const out: DiskParts = { hourFiles: 0, byIdCopies: 0, idFilters: 0, rollups: 0, minutes: 0, other: 0 };
  const root = path.join(dataDir, dataset);
  const entries = await fs.readdir(root, { recursive: true, withFileTypes: true }).catch(() => []);
  for (const e of entries) {
    if (!e.isFile()) continue;
    const size = (await fs.stat(path.join(e.parentPath, e.name))).size;
    const part: keyof DiskParts = e.name.endsWith(PARQUET_SUFFIX)
      ? 'hourFiles'
      : /\.ids-\d+$/.test(e.name)
        ? 'byIdCopies'
        : e.name.endsWith(ID_FILTER_SUFFIX)
          ? 'idFilters'
          : e.name.endsWith('.rollup')
            ? 'rollups'
            : /\.minutes(-v\d+)?$/.test(e.name)
              ? 'minutes'
              : 'other';
    out[part] += size;
  }
  return out;
}

/**
 * As the service's compactor, single-threaded; `now` past the newest hour so every hour counts as ended and is
 * merged into one sorted, deduplicated file; no grace period, as no reader is running.
 */
async function compactAsTheService(dataDir: string, toMs: number) {
  const engine = await QueryEngine.open(dataDir, 1);
  try {
    return await runCompaction(engine, dataDir, {
      minFiles: 2,
      graceMs: 0,
      now: Math.floor((toMs - 1) / HOUR_MS) * HOUR_MS + HOUR_MS,
    });
  } finally {
    engine.close();
  }
}

export interface PrepareOptions {
  /** Rows per BatchWriter.write (one commit). */
  batchRows: number;
  onProgress?: (generated: number, total: number, elapsedS: number) => void;
}

/**
 * The dataset in `dataDir`: reused when its marker has the same parameters and is complete, generated
 * otherwise. A directory holding anything else is refused rather than wiped.
 */
export async function prepareDataset(
  dataDir: string,
  params: DatasetParams,
  opts: PrepareOptions,
): Promise<{ marker: DatasetMarker; reused: boolean }> {
  await fs.mkdir(dataDir, { recursive: true });
  const existing = await readMarker(dataDir);
  if (existing?.complete && existing.version === DATASET_VERSION && sameParams(existing.params, params)) {
    // A compaction pass brings a dataset of an earlier build up to this one's (files it adds beside the merged
    // ones, such as rollups); it does nothing to one that is.
    await compactAsTheService(dataDir, existing.toMs);
    return { marker: existing, reused: true };
  }
  if (existing) {
    // Ours (the marker says so) but for other parameters, or left half-written: start over.
    for (const name of await fs.readdir(dataDir))
      await fs.rm(path.join(dataDir, name), { recursive: true, force: true });
  } else if ((await fs.readdir(dataDir)).length > 0) {
    throw new Error(`${dataDir} is not empty and holds no benchmark dataset: give a new or empty directory`);
  }
  const toMs = Date.now();
  const fromMs = toMs - params.hours * HOUR_MS;
  const marker: DatasetMarker = {
    version: DATASET_VERSION,
    params,
    complete: false,
    workspaceId: BENCH_WORKSPACE,
    mode: BENCH_MODE,
    indexedContextKeys: INDEXED_CONTEXT_KEYS,
    fromMs,
    toMs,
    services: [],
    sampleIds: [],
    failures: 0,
    issues: 0,
    generatedAt: new Date(toMs).toISOString(),
    generation: null,
  };
  await writeMarker(dataDir, marker);

  const gen = new TrafficGenerator(params, fromMs);
  const journal = new CommitJournal(dataDir);
  await journal.recover();
  const writer = new BatchWriter({ dataDir, codec: CODEC, journal, encodeThreads: 1 });
  const started = performance.now();
  let buildMs = 0;
  let waitMs = 0;
  let writes = 0;
  let filesWritten = 0;
  let bytesWritten = 0;
  try {
    // One write in flight while the next batch is built: the encoder thread and the main thread both work,
    // and at most two batches are in memory.
    let inFlight: ReturnType<BatchWriter['write']> | null = null;
    /** Waits for the write in flight (one overlaps the next batch's building) and counts what it wrote. */
    const settle = async (write: ReturnType<BatchWriter['write']>) => {
      const waitStart = performance.now();
      const s = await write;
      waitMs += performance.now() - waitStart;
      filesWritten += s.files;
      bytesWritten += s.bytes;
    };
    while (!gen.done) {
      const buildStart = performance.now();
      const parts = new Map<string, PartitionBatch>();
      const deliveries: Delivery[] = [];
      let rows = 0;
      while (rows < opts.batchRows && !gen.done) {
        const { records, logs, meta } = gen.request();
        const chunks = toChunks(
          { executions: records, logs, metrics: [], rejections: [] },
          meta,
          INDEXED_CONTEXT_KEYS,
        ).finish();
        for (const c of chunks) {
          const key = `${c.dataset}/${c.hour}`;
          let part = parts.get(key);
          if (!part) {
            part = {
              dataset: c.dataset,
              workspaceId: BENCH_WORKSPACE,
              mode: BENCH_MODE,
              hour: c.hour,
              chunks: [],
            };
            parts.set(key, part);
          }
          part.chunks.push(c);
        }
        deliveries.push({ seq: meta.seq, id: `generated.${meta.seq}`, storedAt: meta.receivedAt });
        rows += records.length;
      }
      buildMs += performance.now() - buildStart;
      if (inFlight) {
        await settle(inFlight);
        opts.onProgress?.(gen.generated - rows, params.executions, (performance.now() - started) / 1000);
      }
      inFlight = writer.write([...parts.values()], deliveries);
      writes++;
    }
    if (inFlight) await settle(inFlight);
  } finally {
    await writer.close();
  }
  const generationS = (performance.now() - started) / 1000;
  opts.onProgress?.(params.executions, params.executions, generationS);

  const compactionStart = performance.now();
  const compaction = await compactAsTheService(dataDir, toMs);
  const compactionS = (performance.now() - compactionStart) / 1000;
  const after = await parquetFiles(path.join(dataDir, 'executions'));
  const logsAfter = await parquetFiles(path.join(dataDir, 'logs'));
  const issues = gen.issues();
  // Before the marker says complete: a complete marker always has its issues beside it.
  await fs.writeFile(path.join(dataDir, ISSUES_FILE), `${JSON.stringify(issues)}\n`);
  const done: DatasetMarker = {
    ...marker,
    complete: true,
    services: gen.services(),
    sampleIds: gen.sampleIds,
    failures: gen.failures,
    issues: issues.length,
    generation: {
      seconds: generationS,
      rowsPerSec: params.executions / generationS,
      buildSeconds: buildMs / 1000,
      writeWaitSeconds: waitMs / 1000,
      writes,
      batchRows: opts.batchRows,
      filesWritten,
      bytesWritten,
      compaction: { seconds: compactionS, ...compaction },
      files: after.files,
      parquetBytes: after.bytes,
      logs: gen.logs,
      logParquetBytes: logsAfter.bytes,
    },
  };
  await writeMarker(dataDir, done);
  return { marker: done, reused: false };
}
