import { describe, expect, it } from 'vitest';
import { rng } from '../../bench/traffic.js';
import {
  bucketOf,
  bucketValue,
  mergeInto,
  RELATIVE_ERROR,
  type Sketch,
  sketchOfMap,
  sketchQuantiles,
  ZERO_BUCKET,
} from '../../storage/sketch.js';

const normal = (r: () => number) => Math.sqrt(-2 * Math.log(1 - r())) * Math.cos(2 * Math.PI * r());

/** quantile_cont over the values. */
function exact(sorted: Float64Array, q: number): number {
  const rank = q * (sorted.length - 1);
  const lo = Math.floor(rank);
  const hi = Math.min(lo + 1, sorted.length - 1);
  return sorted[lo]! + (rank - lo) * (sorted[hi]! - sorted[lo]!);
}

function sketchOf(values: ArrayLike<number>): Sketch {
  const m = new Map<number, number>();
  for (let i = 0; i < values.length; i++) {
    const b = bucketOf(values[i]!);
    m.set(b, (m.get(b) ?? 0) + 1);
  }
  return sketchOfMap(m);
}

const mapOf = (s: Sketch) => new Map(Array.from(s.buckets, (b, i) => [b, s.counts[i]!] as [number, number]));

const QS = [0, 0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 0.999, 1];

function expectWithinBound(values: Float64Array) {
  const sorted = Float64Array.from(values).sort();
  const got = sketchQuantiles(sketchOf(values), QS);
  QS.forEach((q, i) => {
    const e = exact(sorted, q);
    expect(Math.abs(got[i]! - e), `q=${q}: ${got[i]} against ${e}`).toBeLessThanOrEqual(
      RELATIVE_ERROR * Math.abs(e) + 1e-12,
    );
  });
}

const DISTRIBUTIONS: Record<string, (r: () => number) => number> = {
  'log-normal': (r) => 40 * Math.exp(0.9 * normal(r)),
  bimodal: (r) => (r() < 0.7 ? 5 + r() : 2000 + 500 * r()),
  constant: () => 12.5,
  'with zeros': (r) => (r() < 0.2 ? 0 : 3 * r()),
  'sub-millisecond to a day': (r) => 10 ** (-3 + r() * 10.9),
};

describe('the latency sketch', () => {
  it('keeps every bucket value within 0.54 % of every value it holds, at the bounds too', () => {
    expect(RELATIVE_ERROR).toBeLessThan(0.0055);
    const r = rng(7);
    for (let k = 0; k < 100_000; k++) {
      const v = 10 ** (-4 + r() * 12);
      const b = bucketOf(v);
      expect(Math.abs(bucketValue(b) - v) / v).toBeLessThanOrEqual(RELATIVE_ERROR * (1 + 1e-9));
    }
    for (let i = -700; i < 1800; i++) {
      const lower = 2 ** (i / 64);
      for (const v of [lower, lower * (1 + 1e-12), 2 ** ((i + 1) / 64)])
        expect(Math.abs(bucketValue(bucketOf(v)) - v) / v).toBeLessThanOrEqual(RELATIVE_ERROR * (1 + 1e-9));
    }
    expect(bucketOf(0)).toBe(ZERO_BUCKET);
    expect(bucketValue(ZERO_BUCKET)).toBe(0);
  });

  for (const [name, draw] of Object.entries(DISTRIBUTIONS)) {
    it(`answers quantiles within the bound of quantile_cont: ${name}`, () => {
      for (const n of [1, 2, 3, 10, 1000, 100_000]) {
        const r = rng(n);
        expectWithinBound(Float64Array.from({ length: n }, () => draw(r)));
      }
    });
  }

  it('answers nulls for an empty sketch', () => {
    expect(sketchQuantiles({ buckets: [], counts: [] }, [0.5, 0.99])).toEqual([null, null]);
  });

  it('merges in any order to the same answer', () => {
    const r = rng(42);
    const values = Float64Array.from({ length: 20_000 }, () => DISTRIBUTIONS.bimodal!(r));
    const parts = Array.from({ length: 17 }, (_, k) => values.filter((_, i) => i % 17 === k));
    const whole = sketchQuantiles(sketchOf(values), QS);
    for (let round = 0; round < 20; round++) {
      const order = parts.map((p) => ({ p, key: r() })).sort((a, b) => a.key - b.key);
      // Merged pairwise in a random tree, as files, minutes and services are.
      let sketches = order.map(({ p }) => sketchOf(p));
      while (sketches.length > 1) {
        const next: Sketch[] = [];
        for (let i = 0; i < sketches.length; i += 2) {
          const m = new Map<number, number>();
          mergeInto(m, mapOf(sketches[i]!));
          if (sketches[i + 1]) mergeInto(m, mapOf(sketches[i + 1]!));
          next.push(sketchOfMap(m));
        }
        sketches = next.sort(() => r() - 0.5);
      }
      expect(sketchQuantiles(sketches[0]!, QS)).toEqual(whole);
    }
  });
});
