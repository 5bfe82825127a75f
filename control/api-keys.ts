import type { ApiKeyRecord, Permission } from '../schemas/control.js';
import type { Mode } from '../schemas/records.js';
import { generateSecret, newId, sha256Hex } from './secrets.js';
import type { ControlStore } from './store.js';

/** `svc_<mode>_` + 32 base62 characters. */
export const generateApiKey = (mode: Mode) => generateSecret(`svc_${mode}_`);
export const hashApiKey = sha256Hex;
export const API_KEY_SHAPE = /^svc_(test|live)_[A-Za-z0-9]{32}$/;

export interface CreatedApiKey {
  record: ApiKeyRecord;
  /** The secret: returned to the caller once, never stored or logged. */
  key: string;
}

export async function createApiKey(
  store: ControlStore,
  input: { workspaceId: string; mode: Mode; permissions: Permission[]; name: string },
): Promise<CreatedApiKey> {
  const key = generateApiKey(input.mode);
  const record: ApiKeyRecord = {
    id: newId('key'),
    workspaceId: input.workspaceId,
    name: input.name,
    mode: input.mode,
    permissions: input.permissions,
    prefix: key.slice(0, `svc_${input.mode}_`.length + 3),
    last4: key.slice(-4),
    createdAt: new Date().toISOString(),
    revokedAt: null,
  };
  const hash = hashApiKey(key);
  await store.apiKeys.create(hash, JSON.stringify(record));
  await store.keyIndex.put(`${record.workspaceId}.${record.id}`, JSON.stringify({ hash }));
  return { record, key };
}
