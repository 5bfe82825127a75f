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
 * 1.7 µs per plain execution and from about 270 to 75 MiB. On libuv's threads, not the event loop: compressed there,
 * the throughput held but the main thread fell behind on delivering messages to the workers (202 → visible p50 2.8–3.3 s
 * against 0.53–0.65). Below this size a body is a few executions, and the broker's cost is per message.
 */
export const COMPRESS_FROM_BYTES = 4096;

/** How a body sent `encoding` is stored: compressed when it came uncompressed and is large enough. */
async function storedBody(
  body: Uint8Array,
  encoding: IngestMessageMeta['encoding'],
): Promise<{ body: Uint8Array; encoding: NonNullable<IngestMessageMeta['encoding']> }> {
  if ((encoding ?? 'identity') !== 'identity' || body.byteLength < COMPRESS_FROM_BYTES)
    return { body, encoding: encoding ?? 'identity' };
  const packed = await brotli(body, {
    params: {
      [zlib.constants.BROTLI_PARAM_QUALITY]: 0,
      [zlib.constants.BROTLI_PARAM_SIZE_HINT]: body.byteLength,
    },
  });
  return { body: packed, encoding: 'br' };
}

/**
 * Publishes one request's body (as storedBody keeps it) as one JetStream message and waits for the stream's ack: the 202 promise.
 * NATS failures become UNAVAILABLE here and nowhere else. A publish whose ack was lost may still have been
 * stored; the client's retry is then caught by the duplicate window (same message id).
 */
export async function publishIngest(
  broker: Broker,
  meta: IngestMessageMeta,
  msgId: string,
  body: Uint8Array,
  timeoutMs: number,
): Promise<PublishResult> {
  if (!broker.isConnected()) throw unavailable('the broker is unavailable; nothing was accepted', 2);
  const stored = await storedBody(body, meta.encoding);
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
