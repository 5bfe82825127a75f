import type { KV } from '@nats-io/kv';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OTLP_SERIES_BUCKET, OTLP_SERIES_TTL_MS } from '../../broker/provision.js';
import { CumulativeSeries } from '../../pipeline/otlp/cumulative.js';
import { SharedCumulativeSeries } from '../../pipeline/otlp/shared-series.js';
import type { MetricRecord } from '../../schemas/records.js';
import { startTestBroker, type TestBroker } from '../support/env.js';

/**
 * A cumulative counter's points reaching two pipeline processes (a real nats-server's bucket between them): the
 * increments they record add up to what one process would have recorded.
 */

let env: TestBroker;
let kv: KV;

beforeAll(async () => {
  env = await startTestBroker('series');
  kv = await env.broker.kvm.create(OTLP_SERIES_BUCKET, { history: 1, ttl: OTLP_SERIES_TTL_MS });
});
afterAll(async () => {
  await env?.close();
});

const MS = 1_000_000n;
const born = 1_000_000;
const record = (value: number): MetricRecord => ({
  timestamp: 0,
  name: 'requests',
  type: 'counter',
  value,
  histCount: null,
  histSum: null,
  histMin: null,
  histMax: null,
  unit: null,
  service: 's',
  environment: 'e',
  tags: null,
});
const at = (timeMs: number) => ({ startNs: BigInt(born - 500) * MS, timeNs: BigInt(born + timeMs) * MS });
const sum = (rs: (MetricRecord | null)[]) => rs.reduce((s, r) => s + (r?.value ?? 0), 0);

describe('cumulative series shared by two pipeline processes', () => {
  it('records each increment once whichever process each point reaches', async () => {
    const a = new SharedCumulativeSeries(kv);
    const b = new SharedCumulativeSeries(kv);
    const key = `ws.test.series-${Date.now()}`;
    // Totals 100 (the baseline), 130, 175, 175, 240: 140 counted after the baseline.
    expect(await a.increment(key, at(10), record(100))).toBeNull();
    expect((await b.increment(key, at(20), record(130)))?.value).toBe(30);
    expect((await a.increment(key, at(30), record(175)))?.value).toBe(45);
    expect((await b.increment(key, at(40), record(175)))?.value).toBe(0);
    expect((await a.increment(key, at(50), record(240)))?.value).toBe(65);
    // Two processes each with its own memory count some increments twice: A's 100 → 175 holds B's 30 and 45.
    const alone = [new CumulativeSeries(), new CumulativeSeries()];
    const lost = [100, 130, 175, 175, 240].map((v, i) =>
      alone[i % 2]!.increment(key, at(10 + i * 10), record(v)),
    );
    expect(sum(lost)).toBe(75 + 65 + 45);
  });

  it('keeps the total exact when both move one series at once, in any order', async () => {
    const a = new SharedCumulativeSeries(kv);
    const b = new SharedCumulativeSeries(kv);
    const key = `ws.test.racing-${Date.now()}`;
    await a.increment(key, at(0), record(1000));
    // 40 points, +7 each, dealt to the two processes alternately and sent all at once.
    const points = Array.from({ length: 40 }, (_, i) => ({ p: at(10 + i), total: 1000 + 7 * (i + 1) }));
    const results = await Promise.all(
      points.map(({ p, total }, i) => (i % 2 === 0 ? a : b).increment(key, p, record(total))),
    );
    // A point that lost the race to a newer one is late (dropped); the newer one counted what it missed.
    expect(sum(results)).toBe(7 * 40);
    expect(a.conflicts + b.conflicts).toBeGreaterThan(0);
    // The newest point again (a redelivery) gets its increment again and moves nothing.
    const last = points.at(-1)!;
    const again = await a.increment(key, last.p, record(last.total));
    expect(again === null || again.value === results.at(-1)?.value).toBe(true);
  });
});
