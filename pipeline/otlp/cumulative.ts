import type { MetricRecord } from '../../schemas/records.js';

/**
 * Cumulative OTLP series turned into increments (CONTRACT §12): each point's increment is its total minus the
 * series' previous total, and a series' first point is the baseline (nothing recorded: what it counted before is
 * not known to have been missed or not). A total that falls, or a new start time, is a reset: the new total is
 * the increment when the series restarted after its previous point, else a new baseline. A point older than the
 * series' newest is late and dropped; the same point again (a redelivery) gets the same increment again.
 *
 * The state is kept per workspace and mode and series, and forgotten after SERIES_IDLE_MS without a point. The
 * lone pipeline of a service with its broker embedded keeps it in its main thread (`CumulativeSeries`): a restart
 * forgets it, and each series' next point is then a baseline. Several pipeline processes share it in a key-value
 * bucket (`SharedCumulativeSeries`, shared-series.ts), written by compare-and-set, so a series whose points reach
 * two of them is turned into increments as exactly as by one.
 */

export interface SeriesPoint {
  startNs: bigint;
  timeNs: bigint;
}

interface Totals {
  value: number;
  sum: number;
}

export interface SeriesState {
  startNs: bigint;
  timeNs: bigint;
  totals: Totals;
  /** What the newest point recorded (null: a baseline), for a redelivery of it. */
  recorded: Totals | null;
}

/** A series idle this long is forgotten (its next point is a baseline again). */
export const SERIES_IDLE_MS = 60 * 60 * 1000;
/** At most this many series are kept; past it the least recently seen go first. */
const MAX_SERIES = 200_000;

/** The running total a record holds: a counter's value, a histogram's count and sum. */
const totalsOf = (r: MetricRecord): Totals =>
  r.type === 'histogram' ? { value: r.histCount ?? 0, sum: r.histSum ?? 0 } : { value: r.value ?? 0, sum: 0 };

/**
 * One point of a series, given what the series saw before (undefined: nothing): its state after the point (null
 * when the point is late and changes nothing) and the record as an increment (null when it records nothing: a
 * baseline, a late point, no change of a histogram's count).
 */
export function step(
  seen: SeriesState | undefined,
  point: SeriesPoint,
  record: MetricRecord,
): { next: SeriesState | null; increment: MetricRecord | null } {
  const totals = totalsOf(record);
  let recorded: Totals | null;
  if (seen && point.timeNs === seen.timeNs && point.startNs === seen.startNs) {
    recorded = seen.recorded;
  } else if (seen && point.timeNs < seen.timeNs) {
    return { next: null, increment: null };
  } else if (!seen) {
    recorded = null;
  } else if (point.startNs !== seen.startNs || totals.value < seen.totals.value) {
    recorded = point.startNs > 0n && point.startNs >= seen.timeNs ? totals : null;
  } else {
    recorded = { value: totals.value - seen.totals.value, sum: totals.sum - seen.totals.sum };
  }
  const next = { startNs: point.startNs, timeNs: point.timeNs, totals, recorded };
  if (recorded === null) return { next, increment: null };
  if (record.type !== 'histogram') return { next, increment: { ...record, value: recorded.value } };
  if (recorded.value <= 0) return { next, increment: null };
  return { next, increment: { ...record, histCount: recorded.value, histSum: recorded.sum } };
}

/** The series of one pipeline process, in its memory. */
export class CumulativeSeries {
  readonly #series = new Map<string, SeriesState & { seenAt: number }>();

  get size(): number {
    return this.#series.size;
  }

  /** The record as an increment, or null (`step`). `key` names the series within its workspace and mode. */
  increment(key: string, point: SeriesPoint, record: MetricRecord, now = Date.now()): MetricRecord | null {
    const { next, increment } = step(this.#series.get(key), point, record);
    if (next === null) return null;
    // Delete first, so the map's order is least recently seen first.
    this.#series.delete(key);
    this.#series.set(key, { ...next, seenAt: now });
    this.#evict(now);
    return increment;
  }

  #evict(now: number): void {
    for (const [key, s] of this.#series) {
      if (this.#series.size <= MAX_SERIES && now - s.seenAt < SERIES_IDLE_MS) break;
      this.#series.delete(key);
    }
  }
}
