import net from 'node:net';
import zlib from 'node:zlib';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTenant, execution, startStack, type TestStack } from '../support/env.js';

/**
 * What only a real socket shows: bodies over the limit answered 413 to clients that write the whole body before
 * they read the answer (fetch), not a connection closed under them (EPIPE), which an SDK would take for a network
 * error and retry with the same body forever.
 */

let stack: TestStack;
let url: string;
let key: string;

beforeAll(async () => {
  stack = await startStack('http-edges', { PORT: '0', HOST: '127.0.0.1' }, { listen: true });
  url = stack.service.url!;
  key = (await createTenant(stack.service)).keys.test!;
});
afterAll(async () => {
  await stack?.close();
});

const MiB = 2 ** 20;
/** An ingest body of about `bytes` bytes (one execution with a padded context field). */
const bodyOf = (bytes: number) =>
  Buffer.from(JSON.stringify({ executions: [execution({ context: { pad: 'x'.repeat(bytes) } })] }));

/**
 * POSTs `body` over a raw socket a chunk at a time, pausing between chunks (a client on a slower link than
 * loopback), and answers the status line it then reads, or the error writing or reading met (EPIPE, ECONNRESET).
 */
function postSlowly(path: string, headers: Record<string, string>, body: Buffer): Promise<string> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve) => {
    const socket = net.connect(Number(port), hostname);
    let answer = '';
    let settled = false;
    const done = (what: string) => {
      if (settled) return;
      settled = true;
      socket.destroy();
      resolve(what);
    };
    socket.on('data', (d) => {
      answer += d.toString('latin1');
      const line = answer.indexOf('\r\n');
      if (line >= 0) done(answer.slice(0, line));
    });
    socket.on('error', (err: NodeJS.ErrnoException) => done(err.code ?? err.message));
    socket.on('close', () => done(answer ? answer.slice(0, 40) : 'closed'));
    socket.on('connect', async () => {
      const head = [`POST ${path} HTTP/1.1`, `host: ${hostname}`, `content-length: ${body.length}`];
      for (const [k, v] of Object.entries(headers)) head.push(`${k}: ${v}`);
      socket.write(`${head.join('\r\n')}\r\n\r\n`);
      for (let at = 0; at < body.length && !settled; at += 256 * 1024) {
        if (!socket.write(body.subarray(at, at + 256 * 1024)))
          await new Promise((r) => socket.once('drain', r));
        await new Promise((r) => setTimeout(r, 2));
      }
    });
  });
}

describe('bodies over the limit', () => {
  it('answers 413 to fetch and to undici for 6 MiB and 50 MiB bodies, and to a gzip bomb', async () => {
    const headers = { 'x-api-key': key, 'content-type': 'application/json' };
    const bomb = zlib.gzipSync(Buffer.alloc(200 * MiB, 32));
    const cases: [string, Buffer, Record<string, string>][] = [
      ['6 MiB', bodyOf(6 * MiB), headers],
      ['50 MiB', bodyOf(50 * MiB), headers],
      ['gzip bomb', bomb, { ...headers, 'content-encoding': 'gzip' }],
    ];
    for (const [what, body, h] of cases) {
      // Several times each: the broken connection came and went with timing.
      for (let i = 0; i < 3; i++) {
        const res = await fetch(`${url}/api/ingest`, { method: 'POST', headers: h, body });
        expect(res.status, `fetch, ${what}`).toBe(413);
        expect(((await res.json()) as { error: { code: string } }).error.code).toBe('PAYLOAD_TOO_LARGE');
        const viaUndici = await request(`${url}/api/ingest`, { method: 'POST', headers: h, body });
        expect(viaUndici.statusCode, `undici, ${what}`).toBe(413);
        await viaUndici.body.dump();
      }
    }
    // A client that writes its whole body before reading, on a slower link: the answer, not a broken connection.
    for (const size of [6 * MiB, 50 * MiB])
      expect(await postSlowly('/api/ingest', headers, bodyOf(size)), `${size} bytes, slowly`).toBe(
        'HTTP/1.1 413 Payload Too Large',
      );
    // The service takes a body within the limit afterwards.
    const ok = await fetch(`${url}/api/ingest`, { method: 'POST', headers, body: bodyOf(1000) });
    expect(ok.status).toBe(202);
  });
});
