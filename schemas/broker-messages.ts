import { z } from 'zod';
import { MODES } from './records.js';

/**
 * Headers of an ingest message on SVC_INGEST. The body is the request body exactly as received (gzip kept),
 * so the API never re-encodes it. A new header must be optional: messages already in the stream lack it.
 */
export const INGEST_HEADERS = {
  workspace: 'svc-workspace',
  mode: 'svc-mode',
  keyId: 'svc-key-id',
  requestId: 'svc-request-id',
  receivedAt: 'svc-received-at',
  encoding: 'svc-encoding',
  /** What the body is: `ingest` (absent: the same) or an OTLP signal and encoding (CONTRACT §12). */
  format: 'svc-format',
} as const;

/** The body formats: an /api/ingest envelope, or an OTLP Export…ServiceRequest in protobuf or JSON. */
export const BODY_FORMATS = [
  'ingest',
  'otlp-traces-protobuf',
  'otlp-traces-json',
  'otlp-logs-protobuf',
  'otlp-logs-json',
  'otlp-metrics-protobuf',
  'otlp-metrics-json',
] as const;
export type BodyFormat = (typeof BODY_FORMATS)[number];

export const ingestMessageMetaSchema = z.object({
  workspaceId: z.string().regex(/^ws_[A-Za-z0-9]+$/),
  mode: z.enum(MODES),
  keyId: z.string().min(1),
  requestId: z.string().min(1),
  receivedAt: z.coerce.number().int().nonnegative(),
  encoding: z.enum(['gzip', 'identity']).default('identity'),
  format: z.enum(BODY_FORMATS).default('ingest'),
});

export type IngestMessageMeta = z.input<typeof ingestMessageMetaSchema>;

/**
 * CONTRACT §5: a request resent with the same idempotency key (or, without one, the same bytes) within this window
 * is stored once. The broker's duplicate window catches a resend while it still holds the first copy; the commit
 * journal (storage/commit-journal.ts) catches one after the first copy was committed and acked, which a restarted
 * broker no longer remembers.
 */
export const IDEMPOTENCY_WINDOW_MS = 10 * 60 * 1000;

/** The header the broker keeps a message's id in (the API sets it from the idempotency key or the body). */
export const MESSAGE_ID_HEADER = 'Nats-Msg-Id';

export const ingestSubject = (workspaceId: string, mode: string) => `ingest.${workspaceId}.${mode}`;
