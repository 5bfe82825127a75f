import { describe, expect, it } from 'vitest';
import { RateLimiter } from '../../api/rate-limit.js';

/** The token bucket's arithmetic on a clock the test moves (no waiting). */
describe('rate limiter', () => {
  const limiter = (requestsPerSecond: number, burst: number) => {
    let now = 0;
    const l = new RateLimiter({ requestsPerSecond, burst }, () => now);
    return { l, advance: (ms: number) => (now += ms) };
  };

  it('allows a burst, then refuses with the wait until the next token', () => {
    const { l } = limiter(10, 5);
    for (let i = 0; i < 5; i++) {
      const d = l.take('k');
      expect(d).toMatchObject({ allowed: true, limit: 5, remaining: 4 - i, retryAfterSeconds: 0 });
    }
    const refused = l.take('k');
    expect(refused).toMatchObject({ allowed: false, remaining: 0, retryAfterSeconds: 1 });
    // Empty: full again after burst / rate = 0.5 s, rounded up.
    expect(refused.resetSeconds).toBe(1);
  });

  it('refills at the rate, never past the burst', () => {
    const { l, advance } = limiter(2, 3);
    for (let i = 0; i < 3; i++) l.take('k');
    expect(l.take('k').allowed).toBe(false);
    advance(499);
    expect(l.take('k').allowed).toBe(false); // 0.998 of a token
    advance(1);
    expect(l.take('k').allowed).toBe(true); // one token after 0.5 s at 2/s
    expect(l.take('k').allowed).toBe(false);
    advance(60_000); // a minute idle: full, not 120 tokens
    const taken = Array.from({ length: 5 }, () => l.take('k').allowed);
    expect(taken).toEqual([true, true, true, false, false]);
  });

  it('keeps one bucket per caller', () => {
    const { l } = limiter(1, 1);
    expect(l.take('a').allowed).toBe(true);
    expect(l.take('a').allowed).toBe(false);
    expect(l.take('b').allowed).toBe(true);
  });

  it('at a slow rate, tells the whole wait (seconds, rounded up)', () => {
    const { l, advance } = limiter(0.1, 1);
    expect(l.take('k').allowed).toBe(true);
    const d = l.take('k');
    expect(d).toMatchObject({ allowed: false, retryAfterSeconds: 10, resetSeconds: 10 });
    advance(4000);
    expect(l.take('k').retryAfterSeconds).toBe(6);
  });
});
