import fs from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { MinutesCache } from '../../query/minutes-cache.js';
import { QueryEngine } from '../../storage/duckdb.js';
import { listSidecarsAndFiles } from '../../storage/layout.js';
import { MANIFEST } from '../../storage/manifest.js';
import { MINUTE_KIND } from '../../storage/minutes.js';
import { RELATIVE_ERROR } from '../../storage/sketch.js';
import { execution, ingest, json, startStack, type TestStack } from '../support/env.js';
import { call, errorCode, type SignedUp, signup } from '../support/http.js';

let stack: TestStack;

beforeAll(async () => {
  // Compaction runs when a test asks for it (the timer's period is never reached).
  stack = await startStack('metrics', { COMPACTION_INTERVAL_MS: '3600000', COMPACTION_GRACE_MS: '0' });
});
afterAll(async () => {
  await stack?.close();
});

const HOUR = 3_600_000;
const MINUTE = 60_000;

const send = async (u: SignedUp, body: Record<string, unknown>) => {
  const res = await ingest(stack.service, u.testKey, body);
  expect(res.statusCode, res.body).toBe(202);
  await stack.service.pipeline!.drained();
};

const get = async <T = Record<string, unknown>>(u: SignedUp, url: string) => {
  const res = await call(stack.service, 'GET', url, { token: u.session });
  expect(res.statusCode, res.body).toBe(200);
  return json<T>(res);
};

/** The test-mode executions files of `u`'s workspace in [from, to), with their per-minute rollups. */
const listedOf = (u: SignedUp, from: number, to: number) =>
  listSidecarsAndFiles('minutes', stack.config.dataDir, u.workspaceId, 'test', from, to);

const totalOf = async (u: SignedUp, query: string) =>
  (await get<{ total: number }>(u, `/api/executions?pageSize=1&${query}`)).total;

/** quantile_cont: linear interpolation between the closest ranks. */
function exactQuantile(values: number[], q: number): number {
  const s = [...values].sort((a, b) => a - b);
  const rank = q * (s.length - 1);
  const lo = Math.floor(rank);
  const hi = Math.min(lo + 1, s.length - 1);
  return s[lo]! + (rank - lo) * (s[hi]! - s[lo]!);
}

const within = (got: number | null, exact: number) => {
  expect(got).not.toBeNull();
  expect(Math.abs(got! - exact)).toBeLessThanOrEqual(RELATIVE_ERROR * exact + 1e-9);
};

interface Overview {
  percentiles: string;
  services: {
    service: string;
    requests: number;
    failed: number;
    failureRate: number;
    throughputPerMin: number;
    latency: { avg: number | null; p50: number | null; p95: number | null; p99: number | null };
    health: string;
    previous: { requests: number; failed: number };
  }[];
}
interface Timeseries {
  interval: string;
  percentiles: string;
  series: { group: Record<string, string | null>; points: { t: string; value: number | null }[] }[];
  previous?: { from: string; to: string; series: Timeseries['series'] };
}
interface Endpoints {
  data: {
    service: string;
    method: string | null;
    endpoint: string;
    requests: number;
    failureRate: number;
    p99: number | null;
  }[];
}

describe('execution metrics', () => {
  it('answers from the executions, then from the rollups once compacted, with the same figures', async () => {
    const u = await signup(stack.service);
    // A whole hour that has ended: 240 executions over 4 minutes, 3 services, ids in the endpoints.
    const hour = Math.floor(Date.now() / HOUR) * HOUR - 2 * HOUR;
    const durations: Record<string, number[]> = { checkout: [], search: [], auth: [] };
    const executions = Array.from({ length: 240 }, (_, i) => {
      const service = ['checkout', 'checkout', 'search', 'auth'][i % 4]!;
      const durationMs = Math.round(Math.exp(2 + (i % 37) / 9) * 1000) / 1000 + (i % 4 === 3 ? 0 : 0.5);
      durations[service]!.push(durationMs);
      return execution({
        service,
        endpoint: i % 3 === 0 ? `/orders/${1000 + i}` : i % 3 === 1 ? '/orders' : `/orders?page=${i}`,
        method: i % 5 === 0 ? 'POST' : 'GET',
        startedAt: new Date(hour + 10 * MINUTE + (i % 4) * MINUTE + i * 100).toISOString(),
        durationMs,
        statusCode: i % 10 === 0 ? 503 : 200,
      });
    });
    for (let k = 0; k < 4; k++) await send(u, { executions: executions.slice(k * 60, (k + 1) * 60) });
    const from = hour;
    const to = hour + HOUR;
    const range = `from=${from}&to=${to}`;

    const check = async (rolledUp: boolean) => {
      const o = await get<Overview>(u, `/api/metrics/overview?${range}`);
      // Exact from the executions until the rollups are made, then from their sketches.
      expect(o.percentiles).toBe(rolledUp ? 'sketch' : 'exact');
      expect(o.services.map((s) => [s.service, s.requests])).toEqual([
        ['checkout', 120],
        ['auth', 60],
        ['search', 60],
      ]);
      for (const s of o.services) {
        expect(s.requests).toBe(await totalOf(u, `${range}&serviceName=${s.service}`));
        expect(s.failed).toBe(await totalOf(u, `${range}&serviceName=${s.service}&status=failed`));
        expect(s.throughputPerMin).toBeCloseTo(s.requests / 60, 9);
        const d = durations[s.service]!;
        expect(s.latency.avg!).toBeCloseTo(d.reduce((a, b) => a + b, 0) / d.length, 6);
        within(s.latency.p50, exactQuantile(d, 0.5));
        within(s.latency.p95, exactQuantile(d, 0.95));
        within(s.latency.p99, exactQuantile(d, 0.99));
        expect(s.previous).toMatchObject({ requests: 0, failed: 0 });
      }
      // Exact, prefix and id filters mean what they mean for executions.
      for (const endpoint of ['/orders', '/orders/*', '/orders/1000', '/ord*', '/orders/10*']) {
        const o2 = await get<Overview>(
          u,
          `/api/metrics/overview?${range}&endpoint=${encodeURIComponent(endpoint)}&method=get`,
        );
        const requests = o2.services.reduce((n, s) => n + s.requests, 0);
        expect(requests, endpoint).toBe(
          await totalOf(u, `${range}&endpoint=${encodeURIComponent(endpoint)}&method=GET`),
        );
      }
      const ts = await get<Timeseries>(
        u,
        `/api/metrics/timeseries?${range}&metric=requests&interval=1m&groupBy=service`,
      );
      expect(ts.series.map((s) => s.group.service)).toEqual(['checkout', 'auth', 'search']);
      expect(ts.series[0]!.points).toHaveLength(60);
      const at = (m: number) => new Date(hour + m * MINUTE).toISOString();
      const checkout = Object.fromEntries(ts.series[0]!.points.map((p) => [p.t, p.value]));
      expect(checkout[at(9)]).toBe(0);
      expect(checkout[at(10)]! + checkout[at(11)]! + checkout[at(12)]!).toBe(120);
      // Minute buckets' percentiles are computed exactly from the executions, then come from the per-minute
      // sketches once they are rolled up; with an endpoint filter the rollups cannot answer, always exactly.
      const p95 = await get<Timeseries>(
        u,
        `/api/metrics/timeseries?${range}&metric=latency_p95&interval=1m&groupBy=service`,
      );
      expect(p95.percentiles).toBe(rolledUp ? 'sketch' : 'exact');
      const inMinute10 = (keep: (e: Record<string, unknown>) => boolean) =>
        executions
          .filter((e) => e.service === 'checkout' && keep(e))
          .filter(
            (e) => Math.floor(Date.parse(e.startedAt as string) / MINUTE) * MINUTE === hour + 10 * MINUTE,
          )
          .map((e) => e.durationMs as number);
      const checkoutP95 = p95.series.find((s) => s.group.service === 'checkout')!.points;
      const all = exactQuantile(
        inMinute10(() => true),
        0.95,
      );
      if (rolledUp) within(checkoutP95.find((p) => p.t === at(10))!.value, all);
      else expect(checkoutP95.find((p) => p.t === at(10))!.value).toBeCloseTo(all, 9);
      expect(checkoutP95.find((p) => p.t === at(9))!.value).toBeNull();
      const exactP95 = await get<Timeseries>(
        u,
        `/api/metrics/timeseries?${range}&metric=latency_p95&interval=1m&groupBy=service&endpoint=/orders/10*`,
      );
      expect(exactP95.percentiles).toBe('exact');
      const orders = inMinute10((e) => (e.endpoint as string).startsWith('/orders/10'));
      expect(orders.length).toBeGreaterThan(5);
      expect(
        exactP95.series.find((s) => s.group.service === 'checkout')!.points.find((p) => p.t === at(10))!
          .value,
      ).toBeCloseTo(exactQuantile(orders, 0.95), 9);
      const hourly = await get<Timeseries>(
        u,
        `/api/metrics/timeseries?${range}&metric=latency_p99&interval=1h&groupBy=service`,
      );
      expect(hourly.percentiles).toBe(rolledUp ? 'sketch' : 'exact');
      within(
        hourly.series.find((s) => s.group.service === 'auth')!.points[0]!.value,
        exactQuantile(durations.auth!, 0.99),
      );
      const rate = await get<Timeseries>(
        u,
        `/api/metrics/timeseries?${range}&metric=failure_rate&interval=1h`,
      );
      expect(rate.series).toEqual([{ group: {}, points: [{ t: at(0), value: 24 / 240 }] }]);
      const ep = await get<Endpoints>(u, `/api/metrics/endpoints?${range}&sort=requests&limit=100`);
      expect(ep.data.reduce((n, r) => n + r.requests, 0)).toBe(240);
      expect(new Set(ep.data.map((r) => r.endpoint))).toEqual(new Set(['/orders', '/orders/:id']));
      return { o, ts, ep };
    };

    const scanned = await check(false);
    await stack.service.pipeline!.compact();
    const listed = await listedOf(u, from, to);
    expect(listed.sidecars).toHaveLength(1);
    expect(listed.files).toEqual([]);
    const rolledUp = await check(true);
    // Equal counts either way; the sketches' percentiles within their bound of the exact ones.
    expect(rolledUp.ts).toEqual(scanned.ts);
    expect(rolledUp.ep.data.map((r) => [r.endpoint, r.requests])).toEqual(
      scanned.ep.data.map((r) => [r.endpoint, r.requests]),
    );
    rolledUp.ep.data.forEach((r, i) => {
      within(r.p99, scanned.ep.data[i]!.p99!);
    });
    rolledUp.o.services.forEach((s, i) => {
      within(s.latency.p95, scanned.o.services[i]!.latency.p95!);
    });

    // A range that cuts minutes: the cut parts come from the executions themselves.
    const cut = `from=${hour + 10 * MINUTE + 30_000}&to=${hour + 12 * MINUTE + 15_000}`;
    const o3 = await get<Overview>(u, `/api/metrics/overview?${cut}`);
    expect(o3.services.reduce((n, s) => n + s.requests, 0)).toBe(await totalOf(u, cut));
    const cutFrom = hour + 10 * MINUTE + 30_000;
    const cutTo = hour + 12 * MINUTE + 15_000;
    for (const s of o3.services) {
      const d = executions
        .filter((e) => e.service === s.service)
        .filter(
          (e) => Date.parse(e.startedAt as string) >= cutFrom && Date.parse(e.startedAt as string) < cutTo,
        )
        .map((e) => e.durationMs as number);
      expect(s.requests).toBe(d.length);
      within(s.latency.p95, exactQuantile(d, 0.95));
    }
    for (const endpoint of ['/orders/*', '/orders']) {
      const filtered = `${cut}&endpoint=${encodeURIComponent(endpoint)}&method=GET`;
      const ep = await get<Endpoints>(u, `/api/metrics/endpoints?${filtered}&limit=100`);
      expect(
        ep.data.reduce((n, r) => n + r.requests, 0),
        endpoint,
      ).toBe(await totalOf(u, filtered));
    }

    // Resent in another request: counted twice until the hour is compacted again, then once.
    await send(u, { executions: executions.slice(0, 40) });
    const before = await get<Overview>(u, `/api/metrics/overview?${range}`);
    expect(before.services.reduce((n, s) => n + s.requests, 0)).toBe(280);
    await stack.service.pipeline!.compact();
    const after = await get<Overview>(u, `/api/metrics/overview?${range}`);
    expect(after.services.reduce((n, s) => n + s.requests, 0)).toBe(240);
    expect(await totalOf(u, range)).toBe(240);

    // The previous period, and another workspace's or mode's view.
    const next = `from=${to}&to=${to + HOUR}`;
    const o4 = await get<Overview>(u, `/api/metrics/overview?${next}`);
    expect(o4.services).toEqual([]);
    const cmp = await get<Timeseries>(
      u,
      `/api/metrics/timeseries?${next}&metric=requests&interval=1h&compare=previous_period`,
    );
    expect(cmp.previous!.series[0]!.points).toEqual([{ t: new Date(hour).toISOString(), value: 240 }]);
    const other = await signup(stack.service);
    expect((await get<Overview>(other, `/api/metrics/overview?${range}`)).services).toEqual([]);
    expect((await get<Overview>(u, `/api/metrics/overview?${range}&mode=live`)).services).toEqual([]);
  });

  it('groups the top 10 by requests and the rest as __other__, and judges health by the thresholds', async () => {
    const u = await signup(stack.service);
    const start = Date.now() - 10 * MINUTE;
    const executions = Array.from({ length: 12 }, (_, s) =>
      Array.from({ length: 12 - s }, (_, i) =>
        execution({
          service: `svc-${String(s).padStart(2, '0')}`,
          startedAt: new Date(start + i * 1000).toISOString(),
          durationMs: s === 0 ? 6000 : 10,
          statusCode: s === 1 && i === 0 ? 500 : 200,
        }),
      ),
    ).flat();
    await send(u, { executions });
    const ts = await get<Timeseries>(u, '/api/metrics/timeseries?metric=requests&groupBy=service');
    expect(ts.interval).toBe('5m');
    expect(ts.series.map((s) => s.group.service)).toEqual([
      ...Array.from({ length: 10 }, (_, s) => `svc-${String(s).padStart(2, '0')}`),
      '__other__',
    ]);
    const sum = (s: Timeseries['series'][number]) => s.points.reduce((n, p) => n + (p.value ?? 0), 0);
    expect(sum(ts.series[10]!)).toBe(2 + 1);
    const o = await get<Overview>(u, '/api/metrics/overview');
    const health = Object.fromEntries(o.services.map((s) => [s.service, s.health]));
    expect(health['svc-00']).toBe('critical'); // p95 6 s ≥ 5 s
    expect(health['svc-01']).toBe('degraded'); // 1 of 11 failed: 9 % ≥ 5 %
    expect(health['svc-02']).toBe('healthy');
  });

  it('makes again a rollup of an earlier layout, reading the executions until it has', async () => {
    const u = await signup(stack.service);
    const hour = Math.floor(Date.now() / HOUR) * HOUR - 3 * HOUR;
    await send(u, {
      executions: Array.from({ length: 30 }, (_, i) =>
        execution({ startedAt: new Date(hour + i * MINUTE).toISOString() }),
      ),
    });
    await stack.service.pipeline!.compact();
    const scope = [stack.config.dataDir, u.workspaceId, 'test', hour, hour + HOUR] as const;
    const [file] = (await listSidecarsAndFiles('minutes', ...scope)).covered;
    expect(file).toBeDefined();
    // As an earlier version left it: its manifest names a rollup of another layout.
    const dir = path.dirname(file!);
    const manifestPath = path.join(dir, MANIFEST);
    const manifest = JSON.parse(await fs.readFile(manifestPath, 'utf8'));
    const old = `${path.basename(file!)}.minutes`;
    await fs.writeFile(path.join(dir, old), 'an earlier layout');
    manifest.minutes[path.basename(file!)] = old;
    await fs.writeFile(manifestPath, JSON.stringify(manifest));
    expect((await listSidecarsAndFiles('minutes', ...scope)).files).toEqual([file]);
    const range = `from=${hour}&to=${hour + HOUR}`;
    const requests = async () =>
      (await get<Overview>(u, `/api/metrics/overview?${range}`)).services[0]!.requests;
    expect(await requests()).toBe(30);
    await stack.service.pipeline!.compact();
    expect((await listSidecarsAndFiles('minutes', ...scope)).covered).toEqual([file]);
    await expect(fs.access(path.join(dir, old))).rejects.toThrow();
    expect(await requests()).toBe(30);
  });

  it('keeps the rollups it read in memory within its budget, least recently used out first', async () => {
    const u = await signup(stack.service);
    const hour = Math.floor(Date.now() / HOUR) * HOUR - 5 * HOUR;
    await send(u, {
      executions: Array.from({ length: 40 }, (_, i) =>
        execution({ startedAt: new Date(hour + (i % 2) * HOUR + i * MINUTE).toISOString() }),
      ),
    });
    await stack.service.pipeline!.compact();
    const { sidecars } = await listedOf(u, hour, hour + 2 * HOUR);
    expect(sidecars).toHaveLength(2);
    const [a, b] = sidecars as [string, string];
    const engine = await QueryEngine.open(path.join(stack.dir, 'cache-engine'), 1);
    onTestFinished(() => engine.close());
    const one = new MinutesCache(engine, 1);
    const rowsA = await one.rows(a, MINUTE_KIND.counts);
    expect(rowsA.n).toBeGreaterThan(0);
    expect(Array.from(rowsA.count).reduce((x, y) => x + y, 0)).toBe(20);
    expect(one.holds(a)).toBe(true);
    await one.rows(b, MINUTE_KIND.counts);
    expect(one.holds(b)).toBe(true);
    expect(one.holds(a)).toBe(false);
    expect(one.bytes).toBe((await one.rows(b, MINUTE_KIND.counts)).n * 32);
    const roomy = new MinutesCache(engine, 2 ** 20);
    await roomy.rows(a, MINUTE_KIND.counts);
    await roomy.rows(b, MINUTE_KIND.sketch);
    expect(roomy.holds(a) && roomy.holds(b)).toBe(true);
  });

  it('answers many groups’ percentiles within the bound, in several passes when their arrays are wide', async () => {
    const u = await signup(stack.service);
    const hour = Math.floor(Date.now() / HOUR) * HOUR - 6 * HOUR;
    // Two executions an endpoint, one failed: two keys of the hour's rollup, so each endpoint's sketch is added
    // up in the dense arrays, not read from one run.
    const executions = Array.from({ length: 1400 }, (_, j) => {
      const i = j >> 1;
      return execution({
        endpoint: `/report-${i.toString(36)}x`,
        startedAt: new Date(hour + i * 5000).toISOString(),
        durationMs: j % 2 === 0 ? 1 + i * 3.7 : 0.5 + i * 3.7,
        statusCode: j % 2 === 0 ? 200 : 503,
      });
    });
    // A zero and a near-zero duration: the sketches then span 70k slots, so the groups' dense arrays take several
    // passes of the sweep.
    executions.push(
      execution({ endpoint: '/zero', startedAt: new Date(hour).toISOString(), durationMs: 0 }),
      execution({ endpoint: '/tiny', startedAt: new Date(hour).toISOString(), durationMs: 1e-300 }),
    );
    for (let k = 0; k < executions.length; k += 1000)
      await send(u, { executions: executions.slice(k, k + 1000) });
    const range = `from=${hour}&to=${hour + HOUR}`;
    const check = async () => {
      const ep = await get<Endpoints>(u, `/api/metrics/endpoints?${range}&sort=p99&limit=100`);
      expect(ep.data).toHaveLength(100);
      ep.data.forEach((r, k) => {
        expect(r.requests).toBe(2);
        within(r.p99, exactQuantile([1 + (699 - k) * 3.7, 0.5 + (699 - k) * 3.7], 0.99));
      });
      for (const [endpoint, d] of [
        ['/zero', 0],
        ['/tiny', 1e-300],
      ] as const) {
        const ts = await get<Timeseries>(
          u,
          `/api/metrics/timeseries?${range}&metric=latency_p50&interval=1h&endpoint=${endpoint}`,
        );
        within(ts.series[0]!.points[0]!.value, d);
      }
    };
    await check();
    await stack.service.pipeline!.compact();
    expect((await listedOf(u, hour, hour + HOUR)).files).toEqual([]);
    await check();
  });

  it('sweeps per-minute percentiles of kept groups and __other__ from rollups, cut minutes and late rows', async () => {
    const u = await signup(stack.service);
    const base = Math.floor(Date.now() / HOUR) * HOUR - 4 * HOUR;
    // 13 services with distinct counts (s00 the busiest), over two hours; zero, tiny and the longest durations too.
    const made: { service: string; environment: string; failed: boolean; t: number; d: number }[] = [];
    const batch = (n: number, salt: number) =>
      Array.from({ length: n }, (_, i) => {
        const k = (i * 7 + salt) % 91;
        const service = `s${String(Math.floor((Math.sqrt(8 * k + 1) - 1) / 2) % 13).padStart(2, '0')}`;
        const t = base + ((i * 7919 + salt * 104_729) % (2 * HOUR));
        const d =
          i % 97 === 0
            ? 0
            : i % 89 === 0
              ? 1e-7
              : i % 83 === 0
                ? 86_400_000
                : Math.exp(1 + ((i * 37) % 101) / 17);
        const environment = i % 3 === 0 ? 'staging' : 'production';
        const failed = i % 11 === 0;
        made.push({ service, environment, failed, t, d });
        return execution({
          service,
          environment,
          startedAt: new Date(t).toISOString(),
          durationMs: d,
          statusCode: failed ? 503 : 200,
        });
      });
    const first = batch(1500, 1);
    await send(u, { executions: first.slice(0, 750) });
    await send(u, { executions: first.slice(750) });
    await stack.service.pipeline!.compact();
    // Late rows in the same hours, in files no rollup covers yet.
    await send(u, { executions: batch(400, 2) });
    const from = base + 90_500;
    const to = base + 2 * HOUR - 25_000;
    const listed = await listedOf(u, from, to);
    expect(listed.sidecars.length).toBeGreaterThan(0);
    expect(listed.files.length).toBeGreaterThan(0);

    const expectPoints = async (
      query: string,
      interval: number,
      q: number,
      keyOf: (e: (typeof made)[0]) => string | null,
    ) => {
      const ts = await get<Timeseries>(u, `/api/metrics/timeseries?from=${from}&to=${to}&${query}`);
      expect(ts.percentiles).toBe('sketch');
      const inRange = made.filter((e) => e.t >= from && e.t < to);
      const field = /groupBy=(\w+)/.exec(query)?.[1];
      // The groups kept: the ten with most executions (then by name), the rest `__other__`.
      const totals = new Map<string | null, number>();
      for (const e of inRange) if (keyOf(e) !== null) totals.set(keyOf(e), (totals.get(keyOf(e)) ?? 0) + 1);
      const kept = [...totals]
        .sort((a, b) => b[1] - a[1] || String(a[0]).localeCompare(String(b[0])))
        .slice(0, 10)
        .map(([g]) => g);
      const groupOf = (g: string | null) => (field === undefined ? null : kept.includes(g) ? g : '__other__');
      expect(ts.series.length).toBe(field === undefined ? 1 : Math.min(totals.size, 11));
      let compared = 0;
      for (const series of ts.series) {
        const g = field === undefined ? null : series.group[field]!;
        for (const p of series.points) {
          const start = Date.parse(p.t);
          const d = inRange
            .filter(
              (e) => keyOf(e) !== null && groupOf(keyOf(e)) === g && e.t >= start && e.t < start + interval,
            )
            .map((e) => e.d);
          if (d.length === 0) expect(p.value, `${g} ${p.t}`).toBeNull();
          else {
            within(p.value, exactQuantile(d, q));
            compared++;
          }
        }
      }
      expect(compared).toBeGreaterThanOrEqual(16);
    };
    await expectPoints('metric=latency_p95&interval=1m&groupBy=service', MINUTE, 0.95, (e) => e.service);
    await expectPoints('metric=latency_p50&interval=5m&groupBy=service', 5 * MINUTE, 0.5, (e) => e.service);
    await expectPoints(
      'metric=latency_p99&interval=15m&groupBy=outcome&environment=staging',
      15 * MINUTE,
      0.99,
      (e) => (e.environment === 'staging' ? (e.failed ? 'failed' : 'success') : null),
    );
    await expectPoints('metric=latency_p99&interval=1m&serviceName=s03', MINUTE, 0.99, (e) =>
      e.service === 's03' ? 's03' : null,
    );
  });

  it('groups percentiles by method (null too) and endpoint, with the previous period, exact then from sketches', async () => {
    const u = await signup(stack.service);
    const hour = Math.floor(Date.now() / HOUR) * HOUR - 3 * HOUR;
    const made = Array.from({ length: 600 }, (_, i) => ({
      method: [null, 'GET', 'POST'][i % 3] ?? null,
      endpoint: i % 2 === 0 ? `/items/${1000 + i}` : '/items',
      t: hour + ((i * 7_919) % HOUR),
      d: Math.exp(((i * 37) % 97) / 15),
    }));
    await send(u, {
      executions: made.map((e) =>
        execution({
          // An execution sent without a method has none (null).
          ...(e.method === null ? { method: undefined } : { method: e.method }),
          endpoint: e.endpoint,
          startedAt: new Date(e.t).toISOString(),
          durationMs: e.d,
        }),
      ),
    });
    const range = `from=${hour}&to=${hour + HOUR}`;
    const check = async (rolledUp: boolean) => {
      for (const [query, field, interval, keyOf] of [
        [
          'metric=latency_p99&interval=5m&groupBy=method',
          'method',
          5 * MINUTE,
          (e: (typeof made)[0]) => e.method,
        ],
        [
          'metric=latency_p50&interval=15m&groupBy=endpoint',
          'endpoint',
          15 * MINUTE,
          (e: (typeof made)[0]) => (e.endpoint === '/items' ? '/items' : '/items/:id'),
        ],
      ] as const) {
        const q = query.includes('p99') ? 0.99 : 0.5;
        const ts = await get<Timeseries>(
          u,
          `/api/metrics/timeseries?${range}&${query}&compare=previous_period`,
        );
        expect(ts.percentiles).toBe(rolledUp ? 'sketch' : 'exact');
        const groups = new Set(made.map(keyOf));
        expect(new Set(ts.series.map((x) => x.group[field]))).toEqual(groups);
        // The period before has no executions: every point null, in the same groups.
        expect(ts.previous!.series.map((x) => x.group[field])).toEqual(ts.series.map((x) => x.group[field]));
        expect(ts.previous!.series.every((x) => x.points.every((p) => p.value === null))).toBe(true);
        for (const series of ts.series) {
          for (const p of series.points) {
            const start = Date.parse(p.t);
            const d = made
              .filter((e) => keyOf(e) === series.group[field] && e.t >= start && e.t < start + interval)
              .map((e) => e.d);
            if (d.length === 0) expect(p.value).toBeNull();
            else if (rolledUp) within(p.value, exactQuantile(d, q));
            else expect(p.value).toBeCloseTo(exactQuantile(d, q), 9);
          }
        }
      }
    };
    await check(false);
    await stack.service.pipeline!.compact();
    expect((await listedOf(u, hour, hour + HOUR)).files).toEqual([]);
    await check(true);
  });

  it('refuses what it cannot answer, naming the parameter', async () => {
    const u = await signup(stack.service);
    const bad = async (url: string, path: string) => {
      const res = await call(stack.service, 'GET', url, { token: u.session });
      expect(res.statusCode, url).toBe(400);
      expect(errorCode(res)).toBe('VALIDATION_ERROR');
      expect(JSON.stringify(res.json().error.details)).toContain(path);
    };
    await bad('/api/metrics/timeseries?metric=bogus', 'metric');
    await bad('/api/metrics/timeseries?metric=requests&interval=2m', 'interval');
    const day = Date.now() - 2 * 86_400_000;
    await bad(`/api/metrics/timeseries?metric=requests&interval=1m&from=${day}`, 'interval');
    await bad('/api/metrics/timeseries?metric=requests&groupBy=customer', 'groupBy');
    await bad(`/api/metrics/overview?from=${Date.now()}&to=${Date.now() - 1000}`, 'from');
    await bad('/api/metrics/endpoints?sort=p42', 'sort');
    await bad('/api/metrics/endpoints?limit=101', 'limit');
    await bad('/api/metrics/overview?bogus=1', 'bogus');
    await bad('/api/metrics/series', 'name');
    await bad('/api/metrics/timeseries?metric=requests&from=0', 'from'); // more than 1,500 days
    await bad('/api/metrics/overview?from=-8640000000000000&to=-8639996400000000', 'from');
    await bad('/api/metrics/names?from=0', 'from');
  });
});

describe('custom series', () => {
  it('aggregates counters, gauges and histograms per bucket, by tag', async () => {
    const u = await signup(stack.service);
    const t0 = Math.floor(Date.now() / HOUR) * HOUR - HOUR;
    const at = (m: number) => new Date(t0 + m * MINUTE).toISOString();
    const point = (over: Record<string, unknown>) => ({
      service: 'checkout',
      environment: 'production',
      ...over,
    });
    await send(u, {
      metrics: [
        point({ name: 'orders.placed', type: 'counter', value: 3, timestamp: at(1), tags: { region: 'eu' } }),
        point({ name: 'orders.placed', type: 'counter', value: 5, timestamp: at(1), tags: { region: 'us' } }),
        point({ name: 'orders.placed', type: 'counter', value: 2, timestamp: at(7), tags: { region: 'eu' } }),
        point({ name: 'queue.depth', type: 'gauge', value: 10, timestamp: at(1), unit: 'items' }),
        point({ name: 'queue.depth', type: 'gauge', value: 30, timestamp: at(2), unit: 'items' }),
        point({
          name: 'db.query',
          type: 'histogram',
          value: { count: 4, sum: 40, min: 2, max: 20 },
          timestamp: at(3),
          unit: 'ms',
        }),
        point({
          name: 'db.query',
          type: 'histogram',
          value: { count: 6, sum: 30, min: 1, max: 9 },
          timestamp: at(4),
          unit: 'ms',
        }),
      ],
    });
    const range = `from=${t0}&to=${t0 + 10 * MINUTE}`;
    type SeriesAnswer = {
      type: string;
      agg: string;
      series: { group: Record<string, string | null>; points: { t: string; value: number | null }[] }[];
    };
    const values = (s: SeriesAnswer, k = 0) => s.series[k]!.points.map((p) => p.value);
    const sum = await get<SeriesAnswer>(u, `/api/metrics/series?name=orders.placed&interval=5m&${range}`);
    expect(sum).toMatchObject({ type: 'counter', agg: 'sum' });
    expect(values(sum)).toEqual([8, 2]);
    const rate = await get<SeriesAnswer>(
      u,
      `/api/metrics/series?name=orders.placed&agg=rate&interval=5m&${range}`,
    );
    expect(values(rate)).toEqual([8 / 300, 2 / 300]);
    const eu = await get<SeriesAnswer>(
      u,
      `/api/metrics/series?name=orders.placed&interval=5m&tags.region=eu&${range}`,
    );
    expect(values(eu)).toEqual([3, 2]);
    const byRegion = await get<SeriesAnswer>(
      u,
      `/api/metrics/series?name=orders.placed&interval=5m&groupBy=tag:region&${range}`,
    );
    expect(byRegion.series.map((s) => [s.group, s.points.map((p) => p.value)])).toEqual([
      [{ region: 'eu' }, [3, 2]],
      [{ region: 'us' }, [5, 0]],
    ]);
    const gauge = await get<SeriesAnswer>(u, `/api/metrics/series?name=queue.depth&interval=5m&${range}`);
    expect(gauge).toMatchObject({ type: 'gauge', agg: 'avg' });
    expect(values(gauge)).toEqual([20, null]);
    const hist = await get<SeriesAnswer>(u, `/api/metrics/series?name=db.query&interval=5m&${range}`);
    expect(values(hist)).toEqual([7, null]); // (40 + 30) / (4 + 6)
    const histMax = await get<SeriesAnswer>(
      u,
      `/api/metrics/series?name=db.query&agg=max&interval=5m&${range}`,
    );
    expect(values(histMax)).toEqual([20, null]);
    const none = await get<SeriesAnswer>(
      u,
      `/api/metrics/series?name=nothing.here&agg=count&interval=5m&${range}`,
    );
    expect(values(none)).toEqual([0, 0]);
    const res = await call(stack.service, 'GET', `/api/metrics/series?name=orders.placed&agg=p95&${range}`, {
      token: u.session,
    });
    expect(res.statusCode).toBe(400);
    expect(res.json().error.details[0].path).toBe('agg');
    const names = await get<{ data: { name: string; type: string; unit: string | null }[] }>(
      u,
      '/api/metrics/names',
    );
    expect(names.data.map((n) => [n.name, n.type, n.unit])).toEqual([
      ['db.query', 'histogram', 'ms'],
      ['orders.placed', 'counter', null],
      ['queue.depth', 'gauge', 'items'],
    ]);
  });
});
