import crypto from 'node:crypto';
import type { KV } from '@nats-io/kv';
import { isRevisionConflict } from '../../broker/errors.js';
import type { MetricRecord } from '../../schemas/records.js';
import { type SeriesPoint, type SeriesState, step } from './cumulative.js';

/**
 * Cumulative series shared by several pipeline processes (cumulative.ts says how a point becomes an increment):
 * each series' state in a key-value bucket, moved point by point by compare-and-set. A process keeps what it last
 * read or wrote of each series and writes against that revision; when another process moved the series since, the
 * write fails and the point is judged again against the series as it now is. So the points of one series may reach
 * any process, in any order, and each increment is counted once, as by a lone process.
 *
 * Points of one series within this process are judged one after the other, in the order they came.
 */

interface Known {
  state: SeriesState;
  revision: number;
}

/** At most this many series' states are kept in memory (the bucket holds them all). */
const MAX_KNOWN = 200_000;

/** A lost compare-and-set is retried this many times (another process moving the same series meanwhile). */
const MAX_ATTEMPTS = 8;

const seriesKey = (key: string) => crypto.createHash('sha256').update(key).digest('base64url').slice(0, 32);

const encode = (s: SeriesState) =>
  JSON.stringify([
    String(s.startNs),
    String(s.timeNs),
    s.totals.value,
    s.totals.sum,
    s.recorded ? [s.recorded.value, s.recorded.sum] : null,
  ]);

function decode(text: string): SeriesState {
  const [start, time, value, sum, recorded] = JSON.parse(text) as [
    string,
    string,
    number,
    number,
    [number, number] | null,
  ];
  return {
    startNs: BigInt(start),
    timeNs: BigInt(time),
    totals: { value, sum },
    recorded: recorded ? { value: recorded[0], sum: recorded[1] } : null,
  };
}

export class SharedCumulativeSeries {
  readonly #kv: KV;
  /** What this process last read or wrote of each series, least recently used first. */
  readonly #known = new Map<string, Known>();
  /** The last point of each series still being judged here: the next one waits for it. */
  readonly #pending = new Map<string, Promise<unknown>>();
  /** Compare-and-sets lost to another process (the point judged again). */
  conflicts = 0;

  constructor(kv: KV) {
    this.#kv = kv;
  }

  /** The record as an increment, or null (`step`). `key` names the series within its workspace and mode. */
  increment(key: string, point: SeriesPoint, record: MetricRecord): Promise<MetricRecord | null> {
    const k = seriesKey(key);
    const before = this.#pending.get(k);
    const run = before
      ? before.then(() => this.#increment(k, point, record))
      : this.#increment(k, point, record);
    const settled = run.catch(() => {});
    this.#pending.set(k, settled);
    void settled.then(() => {
      if (this.#pending.get(k) === settled) this.#pending.delete(k);
    });
    return run;
  }

  async #increment(k: string, point: SeriesPoint, record: MetricRecord): Promise<MetricRecord | null> {
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      let known = this.#known.get(k) ?? null;
      if (known === null) {
        const e = await this.#kv.get(k);
        if (e !== null && e.operation === 'PUT') known = { state: decode(e.string()), revision: e.revision };
      }
      const { next, increment } = step(known?.state, point, record);
      // A late point changes nothing; the newest point again (a redelivery) leaves the series as it is.
      if (next === null) return null;
      const text = encode(next);
      if (known !== null && text === encode(known.state)) return increment;
      try {
        const revision =
          known === null ? await this.#kv.create(k, text) : await this.#kv.update(k, text, known.revision);
        this.#remember(k, { state: next, revision });
        return increment;
      } catch (err) {
        if (!isRevisionConflict(err)) throw err;
        // Another process moved the series (or it lapsed in the bucket): read it again.
        this.#known.delete(k);
        this.conflicts++;
      }
    }
    throw new Error('a series moved by other processes on every attempt; the message comes again');
  }

  #remember(k: string, known: Known): void {
    this.#known.delete(k);
    this.#known.set(k, known);
    if (this.#known.size > MAX_KNOWN) this.#known.delete(this.#known.keys().next().value!);
  }
}
