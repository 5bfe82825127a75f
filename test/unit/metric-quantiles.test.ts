import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Sweep } from '../../query/metric-quantiles.js';
import type { SketchRuns } from '../../query/minutes-cache.js';
import {
  bucketOf,
  SLOTS,
  sketchOfMap,
  sketchQuantiles,
  slotOf,
  slotValue,
  ZERO_BUCKET,
} from '../../storage/sketch.js';

/** Durations over every scale: zero, the smallest doubles, the largest the contract takes, and between. */
const duration = fc.oneof(
  fc.constant(0),
  fc.constant(Number.MIN_VALUE),
  fc.double({ min: 1e-300, max: 1e-3, noNaN: true }),
  fc.double({ min: 0.001, max: 86_400_000, noNaN: true }),
  fc.integer({ min: 1, max: 5000 }),
);

/** Mostly few executions a bucket (where the ranks of two quantiles cross), sometimes many. */
const count = fc.oneof(fc.integer({ min: 1, max: 3 }), fc.integer({ min: 1, max: 40_000 }));

describe('the quantile sweep', () => {
  it('numbers every bucket a slot, ascending, with its value', () => {
    fc.assert(
      fc.property(duration, duration, (a, b) => {
        const [x, y] = [bucketOf(a), bucketOf(b)];
        expect(Math.sign(slotOf(x) - slotOf(y))).toBe(
          Math.sign((x === ZERO_BUCKET ? -1e9 : x) - (y === ZERO_BUCKET ? -1e9 : y)),
        );
        expect(slotOf(x)).toBeGreaterThanOrEqual(0);
        if (a === 0) expect(slotValue(slotOf(x))).toBe(0);
      }),
    );
  });

  it('reads each group’s quantiles as sketchQuantiles does, however its rows were added, bucket after bucket', () => {
    fc.assert(
      fc.property(
        fc.array(fc.array(fc.tuple(fc.nat(3), duration, count), { maxLength: 60 }), {
          minLength: 1,
          maxLength: 4,
        }),
        fc.constantFrom('one run', 'runs', 'rows', 'run and rows'),
        (buckets, how) => {
          // Dense arrays over the slots of the positive durations, as a query makes them (zeros counted apart).
          const slots = buckets
            .flat()
            .map(([, d]) => slotOf(bucketOf(d)))
            .filter((s) => s > 0);
          const minSlot = Math.min(SLOTS, ...slots);
          const sweep = new Sweep(0, 4, minSlot, Math.max(1, ...slots.map((s) => s - minSlot + 1)));
          const out = Array.from({ length: 4 }, () => new Float64Array(buckets.length * 3).fill(Number.NaN));
          /** One run as SketchRuns holds it, from (bucket, count) pairs in ascending slots. */
          const run = (pairs: [number, number][]): SketchRuns => {
            return {
              minutes: Float64Array.of(0),
              minuteRuns: Int32Array.of(0, 1),
              runKey: Int32Array.of(0),
              runStart: Int32Array.of(0, pairs.length),
              slots: Uint32Array.from(pairs, ([b]) => slotOf(b)),
              counts: Uint32Array.from(pairs, ([, n]) => n),
              minSlot: slotOf(pairs[0]![0]),
              maxSlot: slotOf(pairs.at(-1)![0]),
            };
          };
          buckets.forEach((rows, p) => {
            const sketches = Array.from({ length: 4 }, () => new Map<number, number>());
            for (const [g, d, n] of rows) {
              const b = bucketOf(d);
              sketches[g]!.set(b, (sketches[g]!.get(b) ?? 0) + n);
            }
            // Each group's sketch as one run (read in place), as two runs, one row at a time, or a run and rows.
            sketches.forEach((m, g) => {
              const sorted = [...m].sort((a, b) => slotOf(a[0]) - slotOf(b[0]));
              if (sorted.length === 0) return;
              const half = sorted.length >> 1;
              const parts =
                how === 'one run'
                  ? [sorted]
                  : how === 'runs'
                    ? [sorted.filter((_, k) => k % 2 === 0), sorted.filter((_, k) => k % 2 === 1)]
                    : how === 'run and rows'
                      ? [sorted.slice(0, half)]
                      : [];
              for (const part of parts.filter((x) => x.length > 0)) sweep.addRun(g, run(part), 0);
              const rowsLeft = how === 'rows' ? sorted : how === 'run and rows' ? sorted.slice(half) : [];
              for (const [b, n] of rowsLeft) sweep.add(g, slotOf(b), n);
            });
            sweep.finish(out, p * 3);
            sketches.forEach((m, g) => {
              const got = Array.from(out[g]!.subarray(p * 3, p * 3 + 3));
              if (m.size === 0) expect(got.every(Number.isNaN)).toBe(true);
              else expect(got).toEqual(sketchQuantiles(sketchOfMap(m), [0.5, 0.95, 0.99]));
            });
          });
        },
      ),
      { numRuns: 300 },
    );
  });

  it('answers a run read again from the quantiles kept with it, as the first time', () => {
    const runs: SketchRuns = {
      minutes: Float64Array.of(0, 60_000),
      minuteRuns: Int32Array.of(0, 1, 2),
      runKey: Int32Array.of(0, 0),
      runStart: Int32Array.of(0, 3, 5),
      slots: Uint32Array.from([1.5, 40, 900, 3, 7], (d) => slotOf(bucketOf(d))),
      counts: Uint32Array.of(10, 1, 19, 1, 1),
      minSlot: slotOf(bucketOf(1.5)),
      maxSlot: slotOf(bucketOf(900)),
    };
    const out = [new Float64Array(12)];
    const sweep = new Sweep(0, 1, 0, SLOTS);
    for (const [r, at] of [
      [0, 0],
      [1, 3],
      [0, 6],
      [1, 9],
    ] as const) {
      sweep.addRun(0, runs, r);
      sweep.finish(out, at);
    }
    expect(runs.quantiles).toBeDefined();
    expect(Array.from(out[0]!.subarray(6, 12))).toEqual(Array.from(out[0]!.subarray(0, 6)));
    const first = new Map([
      [bucketOf(1.5), 10],
      [bucketOf(40), 1],
      [bucketOf(900), 19],
    ]);
    expect(Array.from(out[0]!.subarray(0, 3))).toEqual(
      sketchQuantiles(sketchOfMap(first), [0.5, 0.95, 0.99]),
    );
  });
});
