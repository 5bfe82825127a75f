/** Figures over benchmark samples, one definition for every benchmark. */

/** The value at quantile q (0–1) of sorted numbers, by linear interpolation between closest ranks. */
export function quantile(sorted: number[], q: number): number | null {
  if (sorted.length === 0) return null;
  const at = (sorted.length - 1) * q;
  const lo = Math.floor(at);
  const hi = Math.ceil(at);
  return sorted[lo]! + (sorted[hi]! - sorted[lo]!) * (at - lo);
}

/** The median of numbers in any order (NaN for none). */
export function median(xs: readonly number[]): number {
  return (
    quantile(
      [...xs].sort((a, b) => a - b),
      0.5,
    ) ?? Number.NaN
  );
}
