/**
 * The latency sketch of the metrics (CONTRACT §8): sparse base-2 exponential buckets, as OpenTelemetry's
 * exponential histogram at scale 6. A positive value v is counted in bucket i = ceil(log2(v) · 64) − 1, which holds
 * (2^(i/64), 2^((i+1)/64)]; zero (and anything below the smallest positive double) in ZERO_BUCKET. A bucket stands
 * for the value whose relative distance to both of its bounds is the same, (b − 1)/(b + 1) with b = 2^(1/64):
 * 0.54 %, under the contract's 1 %.
 *
 * A sketch is a list of (bucket, count): merging two is adding the counts of equal buckets, so sketches of files,
 * minutes and services merge in any order to the same answer. Quantiles follow DuckDB's `quantile_cont`: the rank
 * q·(n − 1) is interpolated between the values of the two closest ranks, each read from the bucket it falls in, so
 * every quantile stays within 0.54 % of the exact one, however far apart the two ranks' values are.
 */

export const SCALE = 6;
const PER_DOUBLING = 2 ** SCALE;
/** The bucket of 0 (durations are ≥ 0). */
export const ZERO_BUCKET = -2_000_000;

/** The bucket of a value. */
export function bucketOf(v: number): number {
  if (!(v > 0)) return ZERO_BUCKET;
  return Math.ceil(Math.log2(v) * PER_DOUBLING) - 1;
}

/** The same in SQL, of the column `col` (DuckDB's log2 and ceil are IEEE double, as JavaScript's). */
export const bucketSql = (col: string) =>
  `CASE WHEN ${col} > 0 THEN (ceil(log2(${col}) * ${PER_DOUBLING}) - 1)::INTEGER ELSE ${ZERO_BUCKET} END`;

/** The value bucket i stands for: equally far, relatively, from both of its bounds. */
export function bucketValue(i: number): number {
  if (i === ZERO_BUCKET) return 0;
  const lower = 2 ** (i / PER_DOUBLING);
  const upper = 2 ** ((i + 1) / PER_DOUBLING);
  return (2 * lower * upper) / (lower + upper);
}

/** The largest relative error of a bucket's value: (b − 1)/(b + 1), b = 2^(1/64). */
export const RELATIVE_ERROR = (2 ** (1 / PER_DOUBLING) - 1) / (2 ** (1 / PER_DOUBLING) + 1);

/** A sketch as parallel arrays, buckets ascending and distinct. */
export interface Sketch {
  buckets: ArrayLike<number>;
  counts: ArrayLike<number>;
}

/** The quantiles `qs` (each 0–1) of a sketch, as `quantile_cont` would answer them; nulls when it is empty. */
export function sketchQuantiles(s: Sketch, qs: readonly number[]): (number | null)[] {
  let total = 0;
  for (let i = 0; i < s.counts.length; i++) total += s.counts[i]!;
  if (total === 0) return qs.map(() => null);
  // The value of the rank-th smallest value (0-based), walking the buckets once per call (few per sketch).
  const valueAt = (rank: number) => {
    let seen = 0;
    for (let i = 0; i < s.counts.length; i++) {
      seen += s.counts[i]!;
      if (seen > rank) return bucketValue(s.buckets[i]!);
    }
    return bucketValue(s.buckets[s.buckets.length - 1]!);
  };
  return qs.map((q) => {
    const rank = q * (total - 1);
    const lo = Math.floor(rank);
    const hi = Math.min(lo + 1, total - 1);
    const vLo = valueAt(lo);
    if (hi === lo || rank === lo) return vLo;
    return vLo + (rank - lo) * (valueAt(hi) - vLo);
  });
}

/** Adds the bucket → count map `from` into `into`: merging two sketches. */
export function mergeInto(into: Map<number, number>, from: ReadonlyMap<number, number>): void {
  for (const [b, n] of from) into.set(b, (into.get(b) ?? 0) + n);
}

/** A bucket → count map as a sketch (buckets ascending). */
export function sketchOfMap(m: ReadonlyMap<number, number>): Sketch {
  const buckets = [...m.keys()].sort((a, b) => a - b);
  return { buckets, counts: buckets.map((b) => m.get(b)!) };
}

/**
 * Buckets as small non-negative integers, for arrays indexed by bucket (query/metric-quantiles.ts): 0 for zero, then
 * every bucket a positive double can fall in, ascending (the smallest double's to the largest's): 134,274 slots.
 */
const MIN_BUCKET = bucketOf(Number.MIN_VALUE);
export const SLOTS = bucketOf(Number.MAX_VALUE) - MIN_BUCKET + 2;
export const slotOf = (bucket: number) => (bucket === ZERO_BUCKET ? 0 : bucket - MIN_BUCKET + 1);
export const slotValue = (slot: number) => (slot === 0 ? 0 : bucketValue(slot - 1 + MIN_BUCKET));
