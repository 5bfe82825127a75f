import { z } from 'zod';
import { MODES } from './records.js';

export const PERMISSIONS = ['ingest', 'read'] as const;
export type Permission = (typeof PERMISSIONS)[number];

/** Stored in the api-keys bucket under the SHA-256 of the key: the key itself is never stored. */
export const apiKeyRecordSchema = z.object({
  id: z.string(),
  workspaceId: z.string(),
  name: z.string(),
  mode: z.enum(MODES),
  permissions: z.array(z.enum(PERMISSIONS)),
  prefix: z.string(),
  last4: z.string(),
  createdAt: z.string(),
  revokedAt: z.string().nullable().default(null),
});
export type ApiKeyRecord = z.infer<typeof apiKeyRecordSchema>;

export const workspaceRecordSchema = z.object({
  id: z.string(),
  name: z.string(),
  createdAt: z.string(),
});
export type WorkspaceRecord = z.infer<typeof workspaceRecordSchema>;
