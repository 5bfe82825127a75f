import { gunzipSync, gzipSync } from 'node:zlib';

/**
 * Seeded, realistic SDK traffic, pre-built so the generator costs little CPU during a run: each request body is
 * a template whose execution ids carry a fixed-width request number, patched in place per request.
 */

/** Small deterministic PRNG (mulberry32): the same seed gives the same traffic. */
export function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const SERVICES = Array.from({ length: 20 }, (_, i) => `service-${String(i).padStart(2, '0')}`);
const METHODS = ['GET', 'GET', 'GET', 'POST', 'PUT', 'DELETE'];
const REGIONS = ['eu-west-1', 'us-east-1', 'ap-south-1'];
const TIERS = ['free', 'pro', 'enterprise'];
/** The context keys every execution of these bodies has (`--index-context` indexes them). */
export const CONTEXT_KEYS = ['customer.id', 'customer.tier', 'region', 'version', 'flags.beta'] as const;

/** A Zipf-like pick: low indexes are far more frequent (skewed service traffic). */
function skewed(r: () => number, n: number): number {
  return Math.min(n - 1, Math.floor(n * r() ** 2.5));
}

function logNormal(r: () => number, medianMs: number, sigma: number): number {
  const z = Math.sqrt(-2 * Math.log(1 - r())) * Math.cos(2 * Math.PI * r());
  return Math.round(medianMs * Math.exp(sigma * z) * 100) / 100;
}

const ID_DIGITS = 9;
const ID_MARK = '#'.repeat(ID_DIGITS);

export interface BodyTemplate {
  bytes: Buffer;
  /** Byte offsets of the request-number field in each execution id (none in a gzip body). */
  offsets: number[];
  gzip: boolean;
  executions: number;
  logs: number;
  metrics: number;
  /** Where the next template's failures outside bursts start (TemplateOptions.firstFingerprint). */
  nextFingerprint: number;
}

export interface TemplateOptions {
  /** Failure rate outside bursts (2 %; with the bursts, 5 % of all executions fail). */
  failureRate?: number;
  /**
   * Distinct failures (5,000 at most): each failed execution is one of these, Zipf-skewed, and each has its own
   * service, endpoint, exception type and message, so the service groups the failures into this many issues.
   */
  fingerprints?: number;
  /**
   * The first of the distinct failures this template's failures outside bursts take, one after the other: a run
   * passes each template the previous one's `nextFingerprint`, so its templates hold every one of `fingerprints`.
   */
  firstFingerprint?: number;
  /** Custom metric points per request. */
  metrics?: number;
  /** No logs inline (by default each execution has 0–5): plain executions. */
  noLogs?: boolean;
  /**
   * gzip-compressed, as SDKs send on slow links. A compressed body cannot be patched per request, so its
   * executions carry no executionId (the service derives one from the request id and position) and the
   * driver makes each request distinct with its idempotency-key.
   */
  gzip?: boolean;
}

/** Lower-case letters for a number: a part of a message that normalization keeps (digits become `<num>`). */
function letters(n: number): string {
  let out = '';
  let k = n;
  do {
    out += String.fromCharCode(97 + (k % 26));
    k = Math.floor(k / 26);
  } while (k > 0);
  return out;
}

const EXCEPTION_TYPES = ['UpstreamError', 'TypeError', 'ValidationError', 'DatabaseError', 'TimeoutError'];

/**
 * One request body of `batch` executions; ids are `<run>-<request number>-<index>`. One template in four is a
 * failure burst: one failure repeating for 12 % of its executions. Outside bursts 2 % fail: 5 % in all, as the
 * issue benchmark asks (issue 12), spread over `fingerprints` distinct failures.
 */
export function buildTemplate(
  seed: number,
  run: string,
  batch: number,
  opts: TemplateOptions = {},
): BodyTemplate {
  const r = rng(seed);
  const now = Date.now();
  const fingerprints = Math.min(5000, opts.fingerprints ?? 2000);
  const burst = seed % 4 === 0 ? skewed(r, fingerprints) : null;
  let nextFingerprint = opts.firstFingerprint ?? 0;
  let logs = 0;
  const executions = Array.from({ length: batch }, (_, i) => {
    const inBurst = burst !== null && r() < 0.12;
    const failed = inBurst || r() < (opts.failureRate ?? 0.02);
    // A failure's shape follows from its number alone: fingerprint k is service k % 20, endpoint k / 20.
    const fp = inBurst ? burst : failed ? nextFingerprint++ % fingerprints : 0;
    const service = failed ? SERVICES[fp % SERVICES.length]! : SERVICES[skewed(r, SERVICES.length)]!;
    const endpointNo = failed ? Math.floor(fp / SERVICES.length) : skewed(r, 200);
    // Drawn either way, so the rest of the body is the same with and without logs.
    const drawnLogs = Math.floor(r() * 6);
    const logCount = opts.noLogs ? 0 : drawnLogs;
    logs += logCount;
    const startedAt = now - Math.floor(r() * 5000);
    return {
      ...(opts.gzip ? {} : { executionId: `${run}-${ID_MARK}-${i}` }),
      traceId: Array.from({ length: 32 }, () => Math.floor(r() * 16).toString(16)).join(''),
      service,
      environment: 'production',
      endpoint: `/api/v1/resource-${endpointNo}/${Math.floor(r() * 100000)}`,
      method: METHODS[Math.floor(r() * METHODS.length)],
      startedAt,
      durationMs: logNormal(r, 20 + (endpointNo % 7) * 15, 0.6) * (inBurst ? 8 : 1),
      statusCode: failed ? 500 + Math.floor(r() * 4) : 200,
      request: { headers: { 'user-agent': 'bench/1.0', 'x-request-id': `r-${i}` }, query: { page: '1' } },
      context: {
        customer: { id: `cus_${Math.floor(r() * 1e6)}`, tier: TIERS[Math.floor(r() * 3)] },
        region: REGIONS[Math.floor(r() * 3)],
        version: `1.${Math.floor(r() * 20)}.0`,
        flags: { beta: r() < 0.1 },
      },
      ...(failed
        ? {
            exception: {
              type: EXCEPTION_TYPES[fp % EXCEPTION_TYPES.length],
              message: `${letters(fp)} failed: upstream ${endpointNo} returned 503 after ${Math.floor(r() * 3000)} ms`,
              stack:
                'UpstreamError: upstream failed\n    at call (src/client.ts:42:11)\n    at handler (src/routes.ts:88:5)',
            },
          }
        : {}),
      logs: Array.from({ length: logCount }, (_, j) => ({
        timestamp: startedAt + j,
        level: failed && j === logCount - 1 ? 'error' : 'info',
        message: `step ${j} of request handled in ${Math.floor(r() * 50)} ms`,
      })),
    };
  });
  const metricCount = opts.metrics ?? 20;
  const metrics = Array.from({ length: metricCount }, (_, i) => {
    const service = SERVICES[skewed(r, SERVICES.length)]!;
    const common = { timestamp: now - i, service, environment: 'production' };
    const tags = { region: REGIONS[Math.floor(r() * 3)]! };
    switch (i % 3) {
      case 0:
        return { ...common, name: 'jobs.processed', type: 'counter', value: Math.floor(r() * 10), tags };
      case 1:
        return { ...common, name: 'queue.depth', type: 'gauge', value: Math.floor(r() * 500), tags };
      default: {
        const count = 1 + Math.floor(r() * 20);
        const min = logNormal(r, 5, 0.5);
        const max = min + logNormal(r, 50, 0.8);
        return {
          ...common,
          name: 'db.query.duration',
          type: 'histogram',
          unit: 'ms',
          value: { count, sum: Math.round(((min + max) / 2) * count * 100) / 100, min, max },
          tags,
        };
      }
    }
  });
  const text = JSON.stringify({ sdk: { name: 'bench', version: '1.0.0' }, executions, metrics });
  const plain = Buffer.from(text, 'utf8');
  if (opts.gzip) {
    const bytes = gzipSync(plain, { level: 6 });
    return { bytes, offsets: [], gzip: true, executions: batch, logs, metrics: metricCount, nextFingerprint };
  }
  const offsets: number[] = [];
  for (let at = plain.indexOf(ID_MARK); at !== -1; at = plain.indexOf(ID_MARK, at + ID_DIGITS))
    offsets.push(at);
  return {
    bytes: plain,
    offsets,
    gzip: false,
    executions: batch,
    logs,
    metrics: metricCount,
    nextFingerprint,
  };
}

/** The body of request `requestNo`: a copy with that number in every execution id (a gzip body as it is). */
export function stampBody(t: BodyTemplate, requestNo: number): Buffer {
  if (t.offsets.length === 0) return t.bytes;
  const out = Buffer.from(t.bytes);
  const digits = String(requestNo).padStart(ID_DIGITS, '0');
  for (const at of t.offsets) out.write(digits, at, 'latin1');
  return out;
}

/** The plain JSON of a template (gunzipped when compressed): what the service parses. */
export function decodedBytes(t: BodyTemplate): Buffer {
  return t.gzip ? gunzipSync(t.bytes) : t.bytes;
}
