import { spawn } from 'node:child_process';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import zlib from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Client, init } from '../src/index.js';

/**
 * init() in this process, against a local server standing in for the service (it records what it is sent): the SDK
 * does not capture its own requests, never throws into the application, keeps contexts within the service's
 * limits, and flushes when the process runs out of work.
 */

interface Envelope {
  executions?: Record<string, unknown>[];
  logs?: Record<string, unknown>[];
}

const received: Envelope[] = [];
let ingest: http.Server;
let ingestUrl: string;
let app: http.Server;
let appUrl: string;
let svc: Client;

const listen = async (server: http.Server) => {
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
};

beforeAll(async () => {
  ingest = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      received.push(JSON.parse(zlib.gunzipSync(Buffer.concat(chunks)).toString('utf8')) as Envelope);
      res.writeHead(202, { 'content-type': 'application/json' }).end('{}');
    });
  });
  ingestUrl = await listen(ingest);
  svc = init({
    apiKey: 'svc_test_0000000000000000',
    endpoint: ingestUrl,
    service: 'inproc',
    onProblem: () => {},
  });
  app = http.createServer((req, res) => {
    if (req.url === '/proto')
      svc.setContext(JSON.parse('{"body":{"__proto__":{"isAdmin":true}},"__proto__":{"x":1}}'));
    if (req.url === '/metric')
      svc.metrics.counter('logins', 1, { token: 'abc', user: 'svc_live_0123456789abcdef0123' });
    if (req.url === '/ctx') {
      const circular: Record<string, unknown> = { a: 1 };
      circular.self = circular;
      svc.setContext({
        list: [1, 2, 3],
        deep: { a: { b: { c: { d: { e: { f: { g: { h: { i: 1 } } } } } } } } },
        circular,
      });
      svc.log.info('with a circular attribute', { circular });
    }
    res.end('ok');
  });
  appUrl = await listen(app);
});
afterAll(async () => {
  await svc?.close(2000);
  await new Promise((r) => app?.close(r));
  await new Promise((r) => ingest?.close(r));
});

const executions = () => received.flatMap((e) => e.executions ?? []);

describe('init() in a process', () => {
  it('captures the application’s requests and never its own requests to the service', async () => {
    for (let i = 0; i < 3; i++) await (await fetch(`${appUrl}/hello/${i}`)).text();
    expect(await svc.flush(5000)).toBe(true);
    // A second round after the first batch went: the SDK's own POST must not have become an execution.
    await (await fetch(`${appUrl}/hello/9`)).text();
    expect(await svc.flush(5000)).toBe(true);
    expect(executions().map((e) => e.endpoint)).toEqual([
      '/hello/:id',
      '/hello/:id',
      '/hello/:id',
      '/hello/:id',
    ]);
    expect(svc.stats()).toMatchObject({ queued: 0, sent: 4, dropped: 0 });
  });

  it('never throws into the application, and keeps a context the service takes', async () => {
    await (await fetch(`${appUrl}/ctx`)).text();
    await svc.flush(5000);
    const e = executions().find((x) => x.endpoint === '/ctx')!;
    const context = e.context as Record<string, unknown>;
    // Arrays and anything past depth 8 become JSON text; the cycle is cut, not thrown.
    expect(context.list).toBe('[1,2,3]');
    const path8 = ['a', 'b', 'c', 'd', 'e', 'f'].reduce(
      (t, k) => (t as Record<string, unknown>)[k],
      context.deep,
    );
    expect((path8 as Record<string, unknown>).g).toBe('{"h":{"i":1}}');
    expect((e.logs as { message: string }[])[0]!.message).toBe('with a circular attribute');
    expect(() => {
      svc.metrics.counter('bad name!', 1);
      svc.metrics.gauge('ok', Number.NaN);
      svc.captureException(undefined);
      svc.setFingerprint(null as unknown as string[]);
      svc.addEvidence('', 'failed');
    }).not.toThrow();
    // A job's own error is the one that reaches the application.
    await expect(
      svc.track('fails', () => {
        throw new SyntaxError('mine');
      }),
    ).rejects.toThrow(SyntaxError);
    await svc.flush(5000);
    expect(executions().find((x) => x.endpoint === 'fails')).toMatchObject({
      source: 'job',
      outcome: 'failed',
      exception: { type: 'SyntaxError', message: 'mine' },
    });
  });

  it('keeps `__proto__` keys of a context as data, and scrubs metric tags', async () => {
    await (await fetch(`${appUrl}/proto`)).text();
    await (await fetch(`${appUrl}/metric`)).text();
    await svc.flush(5000);
    expect(({} as Record<string, unknown>).isAdmin).toBeUndefined();
    expect(({} as Record<string, unknown>).x).toBeUndefined();
    const e = executions().find((x) => x.endpoint === '/proto')!;
    expect(e.context).toEqual({ body: { ['__proto__']: { isAdmin: true } }, ['__proto__']: { x: 1 } });
    const points = received.flatMap((b) => (b as { metrics?: Record<string, unknown>[] }).metrics ?? []);
    expect(points.find((p) => p.name === 'logins')).toMatchObject({
      type: 'counter',
      value: 1,
      tags: { token: '[redacted]', user: '[redacted]' },
    });
  });

  it('continues an inbound traceparent and starts a new trace without one', async () => {
    const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
    await (
      await fetch(`${appUrl}/traced`, { headers: { traceparent: `00-${traceId}-00f067aa0ba902b7-01` } })
    ).text();
    await (await fetch(`${appUrl}/untraced`, { headers: { traceparent: 'garbage' } })).text();
    await svc.flush(5000);
    expect(executions().find((x) => x.endpoint === '/traced')).toMatchObject({
      traceId,
      parentSpanId: '00f067aa0ba902b7',
    });
    const fresh = executions().find((x) => x.endpoint === '/untraced')!;
    expect(fresh.traceId).toMatch(/^[0-9a-f]{32}$/);
    expect(fresh.parentSpanId).toBeUndefined();
  });
});

describe('a process that ends on its own', () => {
  it('resends at exit a batch the service refused with 503 (in its backoff when the process ran out of work)', async () => {
    let calls = 0;
    const got: Envelope[] = [];
    const flaky = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        if (calls++ === 0) return void res.writeHead(503, { 'retry-after': '1' }).end('{}');
        got.push(JSON.parse(zlib.gunzipSync(Buffer.concat(chunks)).toString('utf8')) as Envelope);
        res.writeHead(202).end('{}');
      });
    });
    const url = await listen(flaky);
    const pkg = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', 'dist', 'esm', 'index.js');
    const script = `import { init } from ${JSON.stringify(pkg)};
      const svc = init({ apiKey: 'svc_test_0000000000000000', endpoint: ${JSON.stringify(url)}, service: 'exits', flushIntervalMs: 50 });
      await svc.track('refused-once', () => 1);
      await new Promise((r) => setTimeout(r, 200));`;
    const child = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: 'inherit' });
    expect(await new Promise((r) => child.once('exit', r))).toBe(0);
    await new Promise((r) => flaky.close(r));
    expect(calls).toBe(2);
    expect(got.flatMap((e) => e.executions ?? []).map((e) => e.endpoint)).toEqual(['refused-once']);
  });

  it('sends what is queued when it runs out of work (beforeExit)', async () => {
    const before = executions().length;
    const pkg = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', 'dist', 'esm', 'index.js');
    const script = `import { init } from ${JSON.stringify(pkg)};
      const svc = init({ apiKey: 'svc_test_0000000000000000', endpoint: ${JSON.stringify(ingestUrl)}, service: 'exits' });
      await svc.track('last-job', () => 42);`;
    const child = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: 'inherit' });
    const code = await new Promise((r) => child.once('exit', r));
    expect(code).toBe(0);
    expect(
      executions()
        .slice(before)
        .map((e) => e.endpoint),
    ).toEqual(['last-job']);
  });
});
