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

export const ROLES = ['owner', 'admin', 'member'] as const;
export type Role = (typeof ROLES)[number];

/** Stored under `<workspaceId>.<userId>`, so a workspace's members are one key prefix. */
export const userRecordSchema = z.object({
  id: z.string(),
  workspaceId: z.string(),
  email: z.string(),
  name: z.string().nullable(),
  role: z.enum(ROLES),
  /** scrypt$N$r$p$salt$hash, all hex: the parameters travel with the hash so they can be raised later. */
  passwordHash: z.string(),
  createdAt: z.string(),
});
export type UserRecord = z.infer<typeof userRecordSchema>;

/** Stored under the SHA-256 of the session token; the bucket's TTL ends it after 7 days at the latest. */
export const sessionRecordSchema = z.object({
  userId: z.string(),
  workspaceId: z.string(),
  createdAt: z.string(),
  expiresAt: z.string(),
});
export type SessionRecord = z.infer<typeof sessionRecordSchema>;

/** E-mail (lower-cased, hashed) → its user: one user per e-mail, claimed with compare-and-set. */
export const emailClaimSchema = z.object({ userId: z.string(), workspaceId: z.string() });
export type EmailClaim = z.infer<typeof emailClaimSchema>;

/** `<workspaceId>.<keyId>` → the key's hash: lists a workspace's keys without scanning every key. */
export const keyIndexSchema = z.object({ hash: z.string() });

/**
 * The shapes of the ids the control plane makes (control/secrets.ts newId: a prefix and 16 hex digits). An id of
 * another shape names nothing, and must not reach a key-value key (whose characters are limited).
 */
export const KEY_ID_SHAPE = /^key_[A-Za-z0-9]{1,64}$/;
export const USER_ID_SHAPE = /^usr_[A-Za-z0-9]{1,64}$/;
