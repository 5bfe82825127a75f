import crypto from 'node:crypto';
import { promisify } from 'node:util';
import zlib from 'node:zlib';
import { headers } from '@nats-io/transport-node';
import { INGEST_HEADERS, type IngestMessageMeta, ingestSubject } from '../schemas/broker-messages.js';
import { ServiceError, unavailable } from '../schemas/errors.js';
import type { Broker } from './connection.js';
import { isPayloadTooLarge } from './errors.js';

/**
 * A request's broker message id (the duplicate window's and the commit journal's key), scoped to the workspace
 * and mode so two workspaces sending the same bytes are never merged: by its idempotency key when it has one
 * (`k`), else by its body as sent (`b` for /api/ingest, `o` for an OTLP body).
 */
export function requestMessageId(
  scope: { workspaceId: string; mode: string },
  by: { idempotencyKey: string } | { body: Uint8Array; otlp?: boolean },
): string {
  const kind = 'idempotencyKey' in by ? 'k' : by.otlp ? 'o' : 'b';
  const hash = crypto
    .createHash('sha256')
    .update('idempotencyKey' in by ? by.idempotencyKey : by.body)
    .digest('hex');
  return `${scope.workspaceId}.${scope.mode}.${kind}.${hash}`;
}

export interface PublishResult {
  duplicate: boolean;
  seq: number;
}

const brotli = promisify(zlib.brotliCompress);

/**
 * Bodies sent uncompressed from this size on are stored on the stream compressed (brotli at quality 0). The broker's
 * cost is in the bytes it moves: nats-server spent most of its 5–7 µs of CPU per stored execution copying bodies
 * (Go's memmove, the kernel's file and socket copies), a quarter of the service's. Quality 0 makes the ingest bench's
 * body of plain executions 6.2× smaller for about 1.1 µs per execution, and a parse worker decodes it for about 1.0;
 * alternating with the build before (3 pairs, 20 s closed loop), nats-server went from 5.1 / 6.3 / 4.7 to 1.9 / 1.8 /
 * 1.7 µs per plain execution and from about 270 to 75 MiB. The service's CPU is about the same either way in a closed loop
 * (the same build with STREAM_COMPRESSION off and on, 5 pairs: the broker's savings are spent compressing and decoding),
 * 1–2.5 µs less per execution in an open loop at 50k/s; what it buys is the broker's memory, the backlog's latency and
 * the bytes written and replicated. On libuv's threads, not the event loop: compressed there,
 * the throughput held but the main thread fell behind on delivering messages to the workers (202 → visible p50 2.8–3.3 s
 * against 0.53–0.65). Below this size a body is a few executions, and the broker's cost is per message.
 */
export const COMPRESS_FROM_BYTES = 4096;

/**
 * The output buffer of a body's compression: a quarter of the body (brotli at quality 0 makes the ingest benchmark's
 * bodies 6.5× smaller), so one pass of libuv's thread makes it all. At zlib's default of 16 KiB a 370 KB body took
 * four passes, each a trip from the event loop to a pool thread and back: 0.067–0.077 ms of the event loop per body
 * against 0.043–0.050, 0.38–0.43 ms of CPU in all against 0.34–0.35 (3,000 bodies four at a time, four runs).
 */
const compressChunkBytes = (bodyBytes: number) => Math.min(256 * 1024, Math.max(16 * 1024, bodyBytes >> 2));

/**
 * Compressions running at once, beyond which a body is stored as sent. Each takes one of libuv's threads for about
 * 0.5 ms (a 500-execution body), so a few are in flight under full load; the cap keeps a burst from queueing behind
 * itself (and behind DuckDB's statements, which hold the pool's threads too) instead of being answered.
 */
const MAX_COMPRESSING = 8;
let compressing = 0;

/**
 * How a body sent `encoding` is stored: compressed when it came uncompressed, is large enough and `compress` is on;
 * as sent when compression is off, busy, fails, or would not make it smaller (protobuf OTLP bodies can be dense).
 */
async function storedBody(
  body: Uint8Array,
  encoding: IngestMessageMeta['encoding'],
  compress: boolean,
): Promise<{ body: Uint8Array; encoding: NonNullable<IngestMessageMeta['encoding']> }> {
  const asSent = { body, encoding: encoding ?? 'identity' };
  if (
    !compress ||
    asSent.encoding !== 'identity' ||
    body.byteLength < COMPRESS_FROM_BYTES ||
    compressing >= MAX_COMPRESSING
  )
    return asSent;
  compressing++;
  try {
    const packed = await brotli(body, {
      chunkSize: compressChunkBytes(body.byteLength),
      params: {
        [zlib.constants.BROTLI_PARAM_QUALITY]: 0,
        [zlib.constants.BROTLI_PARAM_SIZE_HINT]: body.byteLength,
      },
    });
    if (packed.byteLength >= body.byteLength) return asSent;
    // Made in one chunk, it is a view of that chunk (a quarter of the body): copied when that holds twice its size,
    // not to keep the rest until the stream acknowledges it.
    const kept = packed.buffer.byteLength > 2 * packed.byteLength ? Buffer.from(packed) : packed;
    return { body: kept, encoding: 'br' };
  } catch {
    // Only a failure to allocate would land here: the body as sent is as good, only larger.
    return asSent;
  } finally {
    compressing--;
  }
}

/**
 * Publishes one request's body (as storedBody keeps it; `compress`: config STREAM_COMPRESSION) as one JetStream
 * message and waits for the stream's ack: the 202 promise.
 * NATS failures become UNAVAILABLE here and nowhere else. A publish whose ack was lost may still have been
 * stored; the client's retry is then caught by the duplicate window (same message id).
 */
export async function publishIngest(
  broker: Broker,
  meta: IngestMessageMeta,
  msgId: string,
  body: Uint8Array,
  timeoutMs: number,
  compress = true,
): Promise<PublishResult> {
  if (!broker.isConnected()) throw unavailable('the broker is unavailable; nothing was accepted', 2);
  const stored = await storedBody(body, meta.encoding, compress);
  const h = headers();
  h.set(INGEST_HEADERS.workspace, meta.workspaceId);
  h.set(INGEST_HEADERS.mode, meta.mode);
  h.set(INGEST_HEADERS.keyId, meta.keyId);
  h.set(INGEST_HEADERS.requestId, meta.requestId);
  h.set(INGEST_HEADERS.receivedAt, String(meta.receivedAt));
  h.set(INGEST_HEADERS.encoding, stored.encoding);
  if (meta.format !== undefined && meta.format !== 'ingest') h.set(INGEST_HEADERS.format, meta.format);
  if (meta.jsonCuts !== undefined) h.set(INGEST_HEADERS.jsonCuts, meta.jsonCuts);
  try {
    const ack = await broker.js.publish(ingestSubject(meta.workspaceId, meta.mode), stored.body, {
      msgID: msgId,
      headers: h,
      timeout: timeoutMs,
    });
    return { duplicate: ack.duplicate, seq: ack.seq };
  } catch (err) {
    if (isPayloadTooLarge(err)) {
      throw new ServiceError(
        'PAYLOAD_TOO_LARGE',
        'the body is larger than the broker takes; nothing was accepted',
      );
    }
    throw unavailable('the broker did not confirm the payload; nothing was accepted', 2);
  }
}
