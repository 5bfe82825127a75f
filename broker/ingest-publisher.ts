import crypto from 'node:crypto';
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

/**
 * Publishes one request's raw body as one JetStream message and waits for the stream's ack: the 202 promise.
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
  const h = headers();
  h.set(INGEST_HEADERS.workspace, meta.workspaceId);
  h.set(INGEST_HEADERS.mode, meta.mode);
  h.set(INGEST_HEADERS.keyId, meta.keyId);
  h.set(INGEST_HEADERS.requestId, meta.requestId);
  h.set(INGEST_HEADERS.receivedAt, String(meta.receivedAt));
  h.set(INGEST_HEADERS.encoding, meta.encoding ?? 'identity');
  if (meta.format !== undefined && meta.format !== 'ingest') h.set(INGEST_HEADERS.format, meta.format);
  if (meta.jsonCuts !== undefined) h.set(INGEST_HEADERS.jsonCuts, meta.jsonCuts);
  try {
    const ack = await broker.js.publish(ingestSubject(meta.workspaceId, meta.mode), body, {
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
