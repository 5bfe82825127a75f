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
} as const;

export const ingestMessageMetaSchema = z.object({
  workspaceId: z.string().regex(/^ws_[A-Za-z0-9]+$/),
  mode: z.enum(MODES),
  keyId: z.string().min(1),
  requestId: z.string().min(1),
  receivedAt: z.coerce.number().int().nonnegative(),
  encoding: z.enum(['gzip', 'identity']).default('identity'),
});

export type IngestMessageMeta = z.infer<typeof ingestMessageMetaSchema>;

export const ingestSubject = (workspaceId: string, mode: string) => `ingest.${workspaceId}.${mode}`;
