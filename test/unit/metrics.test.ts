import { describe, expect, it } from 'vitest';
import { bucketStarts, healthOf, resolveInterval } from '../../query/metric-answers.js';
import { rollupsCanFilter } from '../../query/metrics.js';
import { DEFAULT_HEALTH_THRESHOLDS } from '../../schemas/settings.js';

const HOUR = 3_600_000;

describe('metric answers', () => {
  it('answers endpoint filters from the rollups only where templates select the same executions', () => {
    const eq = (value: string) => rollupsCanFilter({ kind: 'eq', value });
    const prefix = (value: string) => rollupsCanFilter({ kind: 'prefix', value });
    expect(eq('/orders')).toBe(true);
    expect(eq('/orders/:id')).toBe(true); // sent as such: its template, not templated
    expect(eq('/orders/12')).toBe(false);
    expect(eq('/orders/deadbeef')).toBe(false);
    expect(eq('/orders?page=2')).toBe(false);
    expect(prefix('/orders/')).toBe(true);
    expect(prefix('/ord')).toBe(true); // "ord…" is never an id
    expect(prefix('/orders/1')).toBe(false); // could start an id
    expect(prefix('/orders/dead')).toBe(false);
    expect(prefix('/orders/12/items')).toBe(false);
    expect(prefix('/orders/:')).toBe(false);
    expect(prefix('/orders?')).toBe(false);
    expect(prefix('')).toBe(true);
  });

  it('aligns buckets to UTC multiples of the interval, the first holding from', () => {
    const day = Date.UTC(2026, 10, 24);
    expect(bucketStarts(day + 90_000, day + 300_000, 60_000)).toEqual([
      day + 60_000,
      day + 120_000,
      day + 180_000,
      day + 240_000,
    ]);
    expect(bucketStarts(day + 5 * HOUR, day + 6 * HOUR, 86_400_000)).toEqual([day]);
  });

  it('defaults to the finest interval giving at most 300 points, and refuses more than 1,500', () => {
    const to = Date.UTC(2026, 10, 24, 12);
    expect(resolveInterval(to - HOUR, to, undefined)).toBe('1m');
    expect(resolveInterval(to - 24 * HOUR, to, undefined)).toBe('5m');
    expect(resolveInterval(to - 7 * 24 * HOUR, to, undefined)).toBe('1h');
    expect(resolveInterval(to - 400 * 24 * HOUR, to, undefined)).toBe('1d');
    expect(resolveInterval(to - 24 * HOUR, to, '1m')).toBe('1m');
    expect(() => resolveInterval(to - 2 * 24 * HOUR, to, '1m')).toThrow(/use 5m or coarser/);
  });

  it('judges health by either figure reaching a level', () => {
    const t = DEFAULT_HEALTH_THRESHOLDS;
    expect(healthOf(0.01, 200, t)).toBe('healthy');
    expect(healthOf(0.05, 200, t)).toBe('degraded');
    expect(healthOf(0.01, 1000, t)).toBe('degraded');
    expect(healthOf(0.2, null, t)).toBe('critical');
    expect(healthOf(0, 5000, t)).toBe('critical');
  });
});
