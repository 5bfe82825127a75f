import http from 'node:http';
import type { AddressInfo } from 'node:net';
import zlib from 'node:zlib';
import { afterEach, describe, expect, it } from 'vitest';
import { Delivery } from '../src/delivery.js';

/**
 * The delivery rules (CONTRACT §13) against a local HTTP server that answers what each test scripts: retries with
 * backoff honouring retry-after, the same idempotency key on every resend, a split on 413, no retry of other 4xx,
 * the bounded queue's drop count, and everything sent once the service is back.
 */

interface Received {
  at: number;
  key: string;
  body: { executions?: { endpoint: string }[]; logs?: unknown[]; metrics?: unknown[] };
  bytes: number;
}

type Script = (r: Received, n: number) => { status: number; headers?: Record<string, string> };

async function fakeService(script: Script) {
  const received: Received[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks);
      const r: Received = {
        at: Date.now(),
        key: String(req.headers['idempotency-key']),
        body: JSON.parse(zlib.gunzipSync(raw).toString('utf8')),
        bytes: raw.length,
      };
      received.push(r);
      const answer = script(r, received.length - 1);
      res.writeHead(answer.status, { 'content-type': 'application/json', ...answer.headers });
      res.end('{}');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, received, server };
}

const open: { close(): unknown }[] = [];
afterEach(async () => {
  for (const o of open.splice(0)) await o.close();
});

function delivery(url: string, over: Partial<ConstructorParameters<typeof Delivery>[0]> = {}) {
  const problems: string[] = [];
  const d = new Delivery({
    endpoint: url,
    apiKey: 'svc_test_key',
    maxQueueSize: 10_000,
    flushIntervalMs: 60_000,
    envelope: { sdk: { name: 'test' }, resource: { service: 's' } },
    onProblem: (m) => problems.push(m),
    minBackoffMs: 20,
    maxBackoffMs: 100,
    ...over,
  });
  open.push({ close: () => d.close(1000) });
  return { d, problems };
}

const execution = (i: number) => ({ endpoint: `/e/${i}`, startedAt: 1, durationMs: 1 });
const endpoints = (rs: Received[]) => rs.flatMap((r) => (r.body.executions ?? []).map((e) => e.endpoint));

describe('delivery', () => {
  it('retries 503, 429, 502 and 504, honouring retry-after, under one idempotency key', async () => {
    const svc = await fakeService((_r, n) =>
      n === 0
        ? { status: 503, headers: { 'retry-after': '1' } }
        : n === 1
          ? { status: 429 }
          : n === 2
            ? { status: 502 }
            : n === 3
              ? { status: 504 }
              : { status: 202 },
    );
    open.push({ close: () => new Promise((r) => svc.server.close(r)) });
    const { d } = delivery(svc.url);
    d.add('executions', execution(1));
    expect(await d.flush(10_000)).toBe(true);
    expect(svc.received).toHaveLength(5);
    expect(new Set(svc.received.map((r) => r.key)).size).toBe(1);
    // retry-after: 1 second at least before the second try.
    expect(svc.received[1]!.at - svc.received[0]!.at).toBeGreaterThanOrEqual(950);
    expect(d.stats).toMatchObject({ sent: 1, dropped: 0 });
  });

  it('splits a batch on 413 until each part is taken, and drops a single item the service never takes', async () => {
    // The service takes at most 100 executions a request; the item /e/huge never.
    const svc = await fakeService((r) => {
      const n = r.body.executions?.length ?? 0;
      if (endpoints([r]).includes('/e/huge') && n === 1) return { status: 413 };
      return { status: n > 100 || endpoints([r]).includes('/e/huge') ? 413 : 202 };
    });
    open.push({ close: () => new Promise((r) => svc.server.close(r)) });
    const { d, problems } = delivery(svc.url);
    for (let i = 0; i < 300; i++) d.add('executions', i === 150 ? { endpoint: '/e/huge' } : execution(i));
    expect(await d.flush(10_000)).toBe(true);
    const taken = svc.received.filter(
      (r) => (r.body.executions?.length ?? 0) <= 100 && !endpoints([r]).includes('/e/huge'),
    );
    expect(endpoints(taken).sort()).toEqual(
      Array.from({ length: 300 }, (_, i) => `/e/${i}`)
        .filter((e) => e !== '/e/150')
        .sort(),
    );
    expect(d.stats).toMatchObject({ sent: 299, dropped: 1 });
    expect(problems.join()).toMatch(/larger than the service takes/);
  });

  it('never retries another 4xx: the batch is dropped and counted', async () => {
    const svc = await fakeService(() => ({ status: 401 }));
    open.push({ close: () => new Promise((r) => svc.server.close(r)) });
    const { d, problems } = delivery(svc.url);
    d.add('executions', execution(1));
    d.add('logs', { message: 'x' });
    await d.flush(5000);
    expect(svc.received).toHaveLength(1);
    expect(d.stats).toMatchObject({ sent: 0, dropped: 2 });
    expect(problems.join()).toMatch(/HTTP 401/);
  });

  it('batches at most 1,000 executions a request, logs and points beside them', async () => {
    const svc = await fakeService(() => ({ status: 202 }));
    open.push({ close: () => new Promise((r) => svc.server.close(r)) });
    const { d } = delivery(svc.url);
    for (let i = 0; i < 2500; i++) d.add('executions', execution(i));
    d.add('logs', { message: 'l' });
    d.add('metrics', { name: 'm' });
    await d.flush(10_000);
    expect(svc.received.map((r) => r.body.executions?.length ?? 0)).toEqual([1000, 1000, 500]);
    expect(svc.received.at(-1)!.body).toMatchObject({
      sdk: { name: 'test' },
      logs: [{ message: 'l' }],
      metrics: [{ name: 'm' }],
    });
    expect(d.stats.sent).toBe(2502);
  });

  it('survives the service being away: bounded memory (the oldest dropped), everything queued sent once it is back', async () => {
    // Nothing listens on this port at first.
    const probe = await fakeService(() => ({ status: 202 }));
    const port = new URL(probe.url).port;
    await new Promise((r) => probe.server.close(r));
    const { d } = delivery(`http://127.0.0.1:${port}`, { maxQueueSize: 500, flushIntervalMs: 50 });
    for (let i = 0; i < 800; i++) d.add('executions', execution(i));
    // The first batch (500 queued at most; 300 of the first were dropped) is retried while the service is away.
    await new Promise((r) => setTimeout(r, 500));
    for (let i = 800; i < 1000; i++) d.add('executions', execution(i));
    expect(d.stats.dropped).toBeGreaterThanOrEqual(300);
    const received: Received[] = [];
    const back = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        received.push({
          at: Date.now(),
          key: '',
          body: JSON.parse(zlib.gunzipSync(Buffer.concat(chunks)).toString()),
          bytes: 0,
        });
        res.writeHead(202).end('{}');
      });
    });
    await new Promise<void>((r) => back.listen(Number(port), '127.0.0.1', r));
    open.push({ close: () => new Promise((r) => back.close(r)) });
    expect(await d.flush(10_000)).toBe(true);
    const sent = endpoints(received);
    // Every item not counted as dropped arrived, once.
    expect(sent.length).toBe(1000 - d.stats.dropped);
    expect(new Set(sent).size).toBe(sent.length);
    expect(sent.at(-1)).toBe('/e/999');
    expect(d.stats.sent).toBe(sent.length);
  });

  it('counts inline logs with the batch’s logs, as the service does (5,000 a request)', async () => {
    const svc = await fakeService(() => ({ status: 202 }));
    open.push({ close: () => new Promise((r) => svc.server.close(r)) });
    const { d } = delivery(svc.url);
    const logs = Array.from({ length: 10 }, (_, i) => ({ message: `l${i}` }));
    for (let i = 0; i < 1200; i++) d.add('executions', { ...execution(i), logs });
    expect(await d.flush(10_000)).toBe(true);
    expect(svc.received.map((r) => r.body.executions?.length ?? 0)).toEqual([500, 500, 200]);
  });

  it('close does not wait past its timeout for a service that never answers', async () => {
    const hanging = http.createServer(() => {
      // Reads nothing, answers nothing.
    });
    const url = await new Promise<string>((r) =>
      hanging.listen(0, '127.0.0.1', () => r(`http://127.0.0.1:${(hanging.address() as AddressInfo).port}`)),
    );
    open.push({
      close: () => new Promise((r) => hanging.close(r)).then(() => hanging.closeAllConnections()),
    });
    const { d } = delivery(url);
    d.add('executions', execution(1));
    const started = Date.now();
    expect(await d.close(300)).toBe(false);
    expect(Date.now() - started).toBeLessThan(3000);
    expect(d.stats).toMatchObject({ sent: 0, dropped: 1 });
  });

  it('close gives up after its timeout when the service stays away, and says what it dropped', async () => {
    const svc = await fakeService(() => ({ status: 503 }));
    open.push({ close: () => new Promise((r) => svc.server.close(r)) });
    const { d } = delivery(svc.url);
    for (let i = 0; i < 10; i++) d.add('executions', execution(i));
    const started = Date.now();
    expect(await d.close(300)).toBe(false);
    expect(Date.now() - started).toBeLessThan(5000);
    expect(d.stats).toMatchObject({ sent: 0, dropped: 10 });
    d.add('executions', execution(11));
    expect(d.stats.dropped).toBe(11);
  });
});
