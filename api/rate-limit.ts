import type { FastifyReply } from 'fastify';
import { ServiceError } from '../schemas/errors.js';

export interface RateSpec {
  requestsPerSecond: number;
  burst: number;
}

export interface RateDecision {
  allowed: boolean;
  limit: number;
  remaining: number;
  /** Seconds until the bucket is full again. */
  resetSeconds: number;
  /** Seconds until one more request is allowed (0 when allowed). */
  retryAfterSeconds: number;
}

/**
 * Token buckets, one per caller: `burst` tokens, refilled at `requestsPerSecond`. Per process: behind a load
 * balancer each API process enforces its own buckets (documented in the README).
 */
export class RateLimiter {
  readonly #spec: RateSpec;
  readonly #buckets = new Map<string, { tokens: number; at: number }>();
  readonly #now: () => number;

  constructor(spec: RateSpec, now: () => number = () => performance.now()) {
    this.#spec = spec;
    this.#now = now;
  }

  take(id: string): RateDecision {
    const { requestsPerSecond: rate, burst } = this.#spec;
    const now = this.#now();
    const b = this.#buckets.get(id) ?? { tokens: burst, at: now };
    b.tokens = Math.min(burst, b.tokens + ((now - b.at) / 1000) * rate);
    b.at = now;
    const allowed = b.tokens >= 1;
    if (allowed) b.tokens -= 1;
    this.#buckets.set(id, b);
    // Idle callers' buckets are full anyway: forget them so the map stays small.
    if (this.#buckets.size > 100_000) this.#sweep(now);
    return {
      allowed,
      limit: burst,
      remaining: Math.floor(b.tokens),
      resetSeconds: Math.ceil((burst - b.tokens) / rate),
      retryAfterSeconds: allowed ? 0 : Math.ceil((1 - b.tokens) / rate),
    };
  }

  #sweep(now: number): void {
    const fullAfterMs = (this.#spec.burst / this.#spec.requestsPerSecond) * 1000;
    for (const [id, b] of this.#buckets) if (now - b.at > fullAfterMs) this.#buckets.delete(id);
  }
}

/** Sets the ratelimit-* headers, and refuses with RATE_LIMITED (429, retry-after) when the bucket is empty. */
export function enforce(reply: FastifyReply, d: RateDecision): void {
  reply.header('ratelimit-limit', String(d.limit));
  reply.header('ratelimit-remaining', String(d.remaining));
  reply.header('ratelimit-reset', String(d.resetSeconds));
  if (!d.allowed) {
    throw new ServiceError('RATE_LIMITED', `rate limit exceeded; retry in ${d.retryAfterSeconds} s`, [], {
      'retry-after': String(d.retryAfterSeconds),
    });
  }
}

/**
 * Failed logins per e-mail: after `maxFailures` within the window, further attempts are refused until it ends,
 * so a password cannot be guessed at request speed.
 */
export class LoginThrottle {
  readonly #failures = new Map<string, number[]>();
  constructor(
    readonly maxFailures = 5,
    readonly windowMs = 15 * 60 * 1000,
  ) {}

  check(email: string, now = Date.now()): void {
    const recent = (this.#failures.get(email) ?? []).filter((t) => now - t < this.windowMs);
    if (recent.length >= this.maxFailures) {
      const retry = Math.ceil((recent[0]! + this.windowMs - now) / 1000);
      throw new ServiceError('RATE_LIMITED', 'too many failed logins for this e-mail; try again later', [], {
        'retry-after': String(retry),
      });
    }
  }

  fail(email: string, now = Date.now()): void {
    const recent = (this.#failures.get(email) ?? []).filter((t) => now - t < this.windowMs);
    recent.push(now);
    this.#failures.set(email, recent);
    if (this.#failures.size > 100_000) this.#failures.clear();
  }

  succeed(email: string): void {
    this.#failures.delete(email);
  }
}
