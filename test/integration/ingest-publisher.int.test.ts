import crypto from 'node:crypto';
import zlib from 'node:zlib';
import { Piscina } from 'piscina';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Broker } from '../../broker/connection.js';
import { COMPRESS_FROM_BYTES, publishIngest, requestMessageId } from '../../broker/ingest-publisher.js';
import { INGEST_STREAM, PIPELINE_CONSUMER, provision } from '../../broker/provision.js';
import type { ParseResult, ParseTask } from '../../pipeline/parse-worker.js';
import parse from '../../pipeline/parse-worker.js';
import { INGEST_HEADERS, type IngestMessageMeta } from '../../schemas/broker-messages.js';
import { chunkBuffers } from '../../storage/columns.js';
import { execution, startTestBroker, type TestBroker } from '../support/env.js';

let harness: TestBroker;
let broker: Broker;

beforeAll(async () => {
  harness = await startTestBroker('publisher');
  broker = harness.broker;
  await provision(broker.jsm, broker.kvm, {
    maxAgeHours: 0,
    maxBytes: -1,
    maxMsgBytes: 1 << 20,
    ackWaitMs: 60_000,
    maxAckPending: 1000,
  });
});
afterAll(async () => {
  await harness?.close();
});

const scope = { workspaceId: 'ws_pub', mode: 'test' } as const;
let requests = 0;

/** Publishes `body` as the API does and answers the message the pipeline's consumer then gets (acked). */
async function publishAndTake(body: Buffer, encoding: IngestMessageMeta['encoding']) {
  const meta = { ...scope, keyId: 'key_1', requestId: `req_${++requests}`, receivedAt: Date.now(), encoding };
  const published = await publishIngest(broker, meta, requestMessageId(scope, { body }), body, 5000);
  const consumer = await broker.js.consumers.get(INGEST_STREAM, PIPELINE_CONSUMER);
  const m = await consumer.next({ expires: 5000 });
  expect(m?.seq).toBe(published.seq);
  m!.ack();
  return {
    published,
    message: { data: Buffer.from(m!.data), encoding: m!.headers?.get(INGEST_HEADERS.encoding) },
  };
}

/** What a parse worker makes of a message's body: its counts and every byte of its column chunks. */
function parsed(body: Uint8Array, encoding: ParseTask['encoding']) {
  const moved = parse({
    body,
    encoding,
    format: 'ingest',
    maxDecodedBytes: 1 << 22,
    mode: 'test',
    requestId: 'req_parse',
    receivedAt: 1_800_000_000_000,
    seq: 1,
  }) as unknown as Record<symbol, ParseResult>;
  const result = moved[Piscina.valueSymbol]!;
  return {
    counts: result.counts,
    bytes: result.chunks.flatMap(chunkBuffers).map((b) => Buffer.from(b).toString('base64')),
  };
}

const bodyOf = (n: number) =>
  Buffer.from(
    JSON.stringify({
      executions: Array.from({ length: n }, (_, i) =>
        execution({ service: 'pub', durationMs: i, context: { note: `é "${i}" ${'x'.repeat(i % 40)}` } }),
      ),
    }),
  );

describe('ingest messages on the stream', () => {
  it('an uncompressed body from COMPRESS_FROM_BYTES on is stored compressed, and parses to the same columns', async () => {
    const body = bodyOf(60);
    expect(body.length).toBeGreaterThan(COMPRESS_FROM_BYTES);
    const { message } = await publishAndTake(body, 'identity');
    expect(message!.encoding).toBe('br');
    expect(message!.data.length).toBeLessThan(body.length / 3);
    expect(zlib.brotliDecompressSync(message!.data).equals(body)).toBe(true);
    const fromStream = parsed(message!.data, 'br');
    expect(fromStream.counts).toEqual({ executions: 60, logs: 0, metrics: 0, rejected: 0 });
    expect(fromStream).toEqual(parsed(body, 'identity'));
  });

  it('a small body, and one sent gzip, are stored as sent', async () => {
    const small = bodyOf(1);
    expect(small.length).toBeLessThan(COMPRESS_FROM_BYTES);
    const plain = await publishAndTake(small, 'identity');
    expect(plain.message!.encoding).toBe('identity');
    expect(plain.message!.data.equals(small)).toBe(true);

    const gzipped = zlib.gzipSync(bodyOf(60));
    const sentGzip = await publishAndTake(gzipped, 'gzip');
    expect(sentGzip.message!.encoding).toBe('gzip');
    expect(sentGzip.message!.data.equals(gzipped)).toBe(true);
  });

  it('an incompressible body, or with compression off, is stored as sent', async () => {
    // Random bytes: brotli can only make them larger.
    const noise = crypto.randomBytes(8192);
    const dense = await publishAndTake(noise, 'identity');
    expect(dense.message!.encoding).toBe('identity');
    expect(dense.message!.data.equals(noise)).toBe(true);
    const body = bodyOf(60);
    const meta = {
      ...scope,
      keyId: 'key_1',
      requestId: 'req_off',
      receivedAt: Date.now(),
      encoding: 'identity' as const,
    };
    const published = await publishIngest(broker, meta, requestMessageId(scope, { body }), body, 5000, false);
    const consumer = await broker.js.consumers.get(INGEST_STREAM, PIPELINE_CONSUMER);
    const m = await consumer.next({ expires: 5000 });
    expect(m?.seq).toBe(published.seq);
    m!.ack();
    expect(m!.headers?.get(INGEST_HEADERS.encoding)).toBe('identity');
    expect(Buffer.from(m!.data).equals(body)).toBe(true);
  });
});
