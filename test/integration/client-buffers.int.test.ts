import zlib from 'node:zlib';
import { DataBuffer, headers, Kind, Parser, type ParserEvent } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rng } from '../../bench/traffic.js';
import {
  inOwnBuffer,
  packOutboundWithoutZeroing,
  presizeMessageBuffers,
} from '../../broker/client-buffers.js';
import {
  createTenant,
  eventually,
  execution,
  get,
  ingest,
  json,
  startStack,
  startTestBroker,
  type TestBroker,
  type TestStack,
  type TestTenant,
} from '../support/env.js';

const enc = new TextEncoder();

function payload(size: number, next: () => number): Uint8Array {
  const b = new Uint8Array(size);
  for (let i = 0; i < size; i++) b[i] = (next() * 256) | 0;
  return b;
}

/** One MSG or HMSG frame as nats-server sends it; `data` is what the parser must hand over (headers included). */
function frame(sid: number, data: Uint8Array, headerBytes: number): Uint8Array {
  const line =
    headerBytes > 0
      ? `HMSG subj.${sid} ${sid} ${headerBytes} ${data.byteLength}\r\n`
      : `MSG subj.${sid} ${sid} ${data.byteLength}\r\n`;
  const head = enc.encode(line);
  const out = new Uint8Array(head.byteLength + data.byteLength + 2);
  out.set(head);
  out.set(data, head.byteLength);
  out.set(enc.encode('\r\n'), head.byteLength + data.byteLength);
  return out;
}

function concat(parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.byteLength, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.byteLength;
  }
  return out;
}

describe('the NATS parser with message buffers of the message size', () => {
  it('applies to the client this service runs', () => {
    expect(presizeMessageBuffers()).toBe(true);
    // Twice is once.
    expect(presizeMessageBuffers()).toBe(true);
  });

  it('hands over every message as sent, whatever the reads it arrives in', () => {
    presizeMessageBuffers();
    const next = rng(7);
    let presizedSeen = 0;
    for (let round = 0; round < 40; round++) {
      const sizes = Array.from({ length: 1 + ((next() * 6) | 0) }, () => {
        const r = next();
        return r < 0.2
          ? 0
          : r < 0.5
            ? (next() * 200) | 0
            : r < 0.8
              ? (next() * 70_000) | 0
              : (next() * 400_000) | 0;
      });
      const sent = sizes.map((size) => payload(size, next));
      const hdrs = sent.map((d) => (d.byteLength > 12 && next() < 0.5 ? 12 : 0));
      const stream = concat(sent.map((d, i) => frame(i + 1, d, hdrs[i]!)));
      // Reads of 1 byte to 100 KiB, as a socket may deliver them.
      const maxRead = [1, 64, 4096, 65_536, 100_000][round % 5]!;
      const got: Uint8Array[] = [];
      const own: boolean[] = [];
      const parser = new Parser({
        push: (e: ParserEvent) => {
          if (e.kind !== Kind.MSG || !e.data) return;
          got.push(e.data.slice());
          own.push(inOwnBuffer(e.data));
        },
      });
      for (let at = 0; at < stream.byteLength; ) {
        const n = Math.max(1, Math.min(stream.byteLength - at, Math.ceil(next() * maxRead)));
        parser.parse(stream.subarray(at, at + n));
        at += n;
      }
      expect(got.length).toBe(sent.length);
      got.forEach((g, i) => {
        expect(g.byteLength).toBe(sent[i]!.byteLength);
        expect(Buffer.compare(Buffer.from(g), Buffer.from(sent[i]!))).toBe(0);
        // A payload longer than any read spans reads: it was gathered in a buffer made for it.
        if (g.byteLength > maxRead) expect(own[i], `message ${i} of ${g.byteLength} B`).toBe(true);
      });
      presizedSeen += own.filter(Boolean).length;
    }
    expect(presizedSeen).toBeGreaterThan(20);
  });

  it('gathers a message spanning reads in one buffer of its size, not a grown one', () => {
    presizeMessageBuffers();
    const data = payload(350_000, rng(3));
    const stream = frame(1, data, 0);
    let got: Uint8Array | undefined;
    const parser = new Parser({
      push: (e: ParserEvent) => {
        if (e.kind === Kind.MSG) got = e.data;
      },
    });
    for (let at = 0; at < stream.byteLength; at += 65_536) parser.parse(stream.subarray(at, at + 65_536));
    expect(got).toBeDefined();
    // The client's own growth would leave it in a buffer of 2 × capacity + read (here 448 KiB or more).
    expect(got!.buffer.byteLength).toBe(data.byteLength);
    expect(Buffer.compare(Buffer.from(got!), Buffer.from(data))).toBe(0);
    // Its buffer is its own, so the pipeline may move it to a worker; a message within one read shares the read's.
    expect(inOwnBuffer(got!)).toBe(true);
    const small = frame(2, payload(1000, rng(4)), 0);
    const read = concat([small, small]);
    const views: Uint8Array[] = [];
    const p2 = new Parser({
      push: (e: ParserEvent) => void (e.kind === Kind.MSG && e.data && views.push(e.data)),
    });
    p2.parse(read);
    expect(views.length).toBe(2);
    expect(views.every((v) => v.buffer === read.buffer && !inOwnBuffer(v))).toBe(true);
  });
});

describe('the NATS client packing what it sends without zeroing first', () => {
  it('applies, and packs the queued pieces in order, whole', () => {
    expect(packOutboundWithoutZeroing()).toBe(true);
    expect(packOutboundWithoutZeroing()).toBe(true);
    const next = rng(5);
    for (let round = 0; round < 50; round++) {
      const pieces = Array.from({ length: 1 + ((next() * 5) | 0) }, () =>
        payload(next() < 0.3 ? 0 : (next() * 200_000) | 0, next),
      );
      const out = new DataBuffer();
      out.fill(pieces[0]!, ...pieces.slice(1));
      const total = pieces.reduce((n, p) => n + p.byteLength, 0);
      expect(out.size()).toBe(total);
      // drain packs them into one array and hands it over, as the client does before each socket write.
      const drained = out.drain();
      expect(drained.byteLength).toBe(total);
      expect(Buffer.compare(Buffer.from(drained), Buffer.concat(pieces))).toBe(0);
      expect(out.size()).toBe(0);
    }
  });
});

describe('messages through a real nats-server', () => {
  let b: TestBroker;
  beforeAll(async () => {
    b = await startTestBroker('client-buffers');
  });
  afterAll(async () => {
    await b?.close();
  });

  it('arrive as published, headers and payloads, small and large, back to back', async () => {
    const next = rng(11);
    const sizes = [0, 1, 100, 70_000, 300_000, 5, 900_000, 65_536, 131_072, 2, 500_000];
    const sent = sizes.map((s) => payload(s, next));
    const sub = b.broker.nc.subscribe('presize.test', { max: sent.length });
    const received = (async () => {
      const out: { data: Uint8Array; n: string | undefined }[] = [];
      for await (const m of sub) out.push({ data: m.data.slice(), n: m.headers?.get('n') });
      return out;
    })();
    sent.forEach((d, i) => {
      const h = headers();
      h.set('n', String(i));
      b.broker.nc.publish('presize.test', d, { headers: h });
    });
    await b.broker.nc.flush();
    const got = await received;
    expect(got.map((g) => g.n)).toEqual(sent.map((_, i) => String(i)));
    got.forEach((g, i) => {
      expect(Buffer.compare(Buffer.from(g.data), Buffer.from(sent[i]!))).toBe(0);
    });
  });
});

describe('an ingest body through the service', () => {
  let stack: TestStack;
  let tenant: TestTenant;
  beforeAll(async () => {
    stack = await startStack('moved');
    tenant = await createTenant(stack.service, { ingestOnly: { mode: 'test', permissions: ['ingest'] } });
  });
  afterAll(async () => {
    await stack?.close();
  });
  const list = async (query: string) => {
    const res = await get(stack.service, tenant.keys.test!, `/api/executions${query}`);
    expect(res.statusCode, res.body).toBe(200);
    return json<{ total: number; data: { executionId: string }[] }>(res);
  };

  it('a body longer than a socket read moves to its worker without a copy, every item as sent', async () => {
    const service = `moved-${Date.now()}`;
    const next = rng(7);
    // Notes of random letters: the body is stored compressed (broker/ingest-publisher.ts), and stays larger than
    // the 64 KiB a socket read delivers, so the broker client gathers it in a buffer of its own.
    const note = () =>
      Array.from({ length: 640 }, () => String.fromCharCode(65 + ((next() * 58) | 0))).join('');
    const executions = Array.from({ length: 200 }, (_, i) =>
      execution({
        service,
        durationMs: 2000 + i,
        context: { order: { id: `o-${i}`, note: note() } },
      }),
    );
    const text = JSON.stringify({ resource: { service }, executions });
    // Compressed as the API stores it (about 104 KiB): well past a read's 64 KiB.
    const stored = zlib.brotliCompressSync(text, {
      params: {
        [zlib.constants.BROTLI_PARAM_QUALITY]: 0,
        [zlib.constants.BROTLI_PARAM_SIZE_HINT]: text.length,
      },
    });
    expect(stored.length).toBeGreaterThan(80 * 1024);
    const before = stack.service.pipeline!.stats().movedBodies;
    expect((await ingest(stack.service, tenant.keys.test!, text)).statusCode).toBe(202);
    await eventually(
      () => list(`?serviceName=${service}&pageSize=200&sort=durationMs`),
      (l) => l.total === 200,
    );
    const listed = await list(`?serviceName=${service}&pageSize=200&sort=durationMs`);
    expect(listed.data.map((e) => e.executionId)).toEqual(executions.map((e) => e.executionId));
    expect(stack.service.pipeline!.stats().movedBodies - before).toBe(1);
    const detail = json<{ context: unknown }>(
      await get(stack.service, tenant.keys.test!, `/api/executions/${executions[123]!.executionId}`),
    );
    expect(detail.context).toEqual(executions[123]!.context);
  });
});
