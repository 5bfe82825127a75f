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
  /** Byte offsets of the request-number field in each execution id. */
  offsets: number[];
  executions: number;
  logs: number;
}

/** One request body of `batch` executions; ids are `<run>-<request number>-<index>`. */
export function buildTemplate(seed: number, run: string, batch: number, failureRate = 0.03): BodyTemplate {
  const r = rng(seed);
  const now = Date.now();
  let logs = 0;
  const executions = Array.from({ length: batch }, (_, i) => {
    const service = SERVICES[skewed(r, SERVICES.length)]!;
    const endpointNo = skewed(r, 200);
    const failed = r() < failureRate;
    const logCount = Math.floor(r() * 6);
    logs += logCount;
    const startedAt = now - Math.floor(r() * 5000);
    return {
      executionId: `${run}-${ID_MARK}-${i}`,
      traceId: Array.from({ length: 32 }, () => Math.floor(r() * 16).toString(16)).join(''),
      service,
      environment: 'production',
      endpoint: `/api/v1/resource-${endpointNo}/${Math.floor(r() * 100000)}`,
      method: METHODS[Math.floor(r() * METHODS.length)],
      startedAt,
      durationMs: logNormal(r, 20 + (endpointNo % 7) * 15, 0.6),
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
              type: 'UpstreamError',
              message: `upstream ${endpointNo} returned 503 after ${Math.floor(r() * 3000)} ms`,
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
  const text = JSON.stringify({ sdk: { name: 'bench', version: '1.0.0' }, executions });
  const bytes = Buffer.from(text, 'utf8');
  const offsets: number[] = [];
  for (let at = bytes.indexOf(ID_MARK); at !== -1; at = bytes.indexOf(ID_MARK, at + ID_DIGITS))
    offsets.push(at);
  return { bytes, offsets, executions: batch, logs };
}

/** A copy of the template with this request's number in every execution id. */
export function stampBody(t: BodyTemplate, requestNo: number): Buffer {
  const out = Buffer.from(t.bytes);
  const digits = String(requestNo).padStart(ID_DIGITS, '0');
  for (const at of t.offsets) out.write(digits, at, 'latin1');
  return out;
}
