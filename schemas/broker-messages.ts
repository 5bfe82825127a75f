import { z } from 'zod';
import { MODES } from './records.js';

/**
 * Headers of an ingest message on SVC_INGEST. The body is the request's body: as received when it came gzip or
 * small, brotli-compressed when it came uncompressed (`encoding` says which; broker/ingest-publisher.ts). A new
 * header must be optional: messages already in the stream lack it.
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
  /** Where a large /api/ingest JSON body's item arrays may be cut (JsonCuts, encoded by encodeJsonCuts). */
  jsonCuts: 'svc-json-cuts',
} as const;

/** The item arrays of an /api/ingest body. */
export const ITEM_LISTS = ['executions', 'logs', 'metrics'] as const;
export type ItemList = (typeof ITEM_LISTS)[number];

/**
 * Per item array of a JSON body, the byte offsets it may be cut at into groups of whole items: just past its `[`,
 * the commas between groups, its `]` (api/json-envelope.ts finds them while checking the body; pipeline/
 * grouped-json.ts parses by them). V8 puts a string over about 128 KiB in its large-object space, where making
 * one costs page faults, so one JSON.parse of a 342 KiB body took twice as long as parsing it in groups of ~32
 * KiB (2.98 ms against 1.46, one thread).
 */
export type JsonCuts = Partial<Record<ItemList, number[]>>;
export const JSON_GROUP_BYTES = 32 * 1024;

/** `executions=500:12,33000,66010;logs=…`: each array's item count, then its cuts. */
export function encodeJsonCuts(cuts: JsonCuts, counts: Record<ItemList, number>): string {
  return ITEM_LISTS.filter((k) => cuts[k] !== undefined)
    .map((k) => `${k}=${counts[k]}:${cuts[k]!.join(',')}`)
    .join(';');
}

/** The lists of an encodeJsonCuts header, or null when it is not one (then the body is parsed whole). */
export function decodeJsonCuts(header: string): { list: ItemList; count: number; cuts: number[] }[] | null {
  const out: { list: ItemList; count: number; cuts: number[] }[] = [];
  for (const part of header.split(';')) {
    const m = /^(executions|logs|metrics)=(\d+):(\d+(?:,\d+)+)$/.exec(part);
    if (!m) return null;
    const cuts = m[3]!.split(',').map(Number);
    if (cuts.some((c, k) => k > 0 && c < cuts[k - 1]!)) return null;
    out.push({ list: m[1] as ItemList, count: Number(m[2]), cuts });
  }
  return out;
}

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
  /** As sent (gzip, identity), or `br`: sent uncompressed, stored compressed (broker/ingest-publisher.ts). */
  encoding: z.enum(['gzip', 'identity', 'br']).default('identity'),
  format: z.enum(BODY_FORMATS).default('ingest'),
  /** Absent for small bodies, OTLP and messages of earlier builds: the body is then parsed whole. */
  jsonCuts: z.string().optional(),
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
