import crypto from 'node:crypto';
import { type ApiKeyRecord, apiKeyRecordSchema, type Permission } from '../schemas/control.js';
import type { Mode } from '../schemas/records.js';
import type { ControlStore } from './store.js';

const BASE62 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
const KEY_SHAPE = /^svc_(test|live)_[A-Za-z0-9]{32}$/;

/** `svc_<mode>_` + 32 base62 characters from a CSPRNG, without modulo bias. */
export function generateApiKey(mode: Mode): string {
  let out = '';
  while (out.length < 32) {
    for (const byte of crypto.randomBytes(48)) {
      if (byte < 248 && out.length < 32) out += BASE62[byte % 62];
    }
  }
  return `svc_${mode}_${out}`;
}

export const hashApiKey = (key: string) => crypto.createHash('sha256').update(key).digest('hex');

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
    id: `key_${crypto.randomBytes(8).toString('hex')}`,
    workspaceId: input.workspaceId,
    name: input.name,
    mode: input.mode,
    permissions: input.permissions,
    prefix: key.slice(0, `svc_${input.mode}_`.length + 3),
    last4: key.slice(-4),
    createdAt: new Date().toISOString(),
    revokedAt: null,
  };
  await store.apiKeys.create(hashApiKey(key), JSON.stringify(record));
  return { record, key };
}

/** How long a looked-up key is trusted without asking the bucket again: the revocation delay bound. */
const CACHE_TTL_MS = 1000;

/** Resolves presented keys to their records, with a short cache so ingest does not hit the bucket per request. */
export class ApiKeyAuthenticator {
  readonly #store: ControlStore;
  readonly #cache = new Map<string, { record: ApiKeyRecord | null; at: number }>();

  constructor(store: ControlStore) {
    this.#store = store;
  }

  async authenticate(presented: string): Promise<ApiKeyRecord | null> {
    if (!KEY_SHAPE.test(presented)) return null;
    const hash = hashApiKey(presented);
    const now = Date.now();
    const cached = this.#cache.get(hash);
    if (cached && now - cached.at < CACHE_TTL_MS) return cached.record;
    const entry = await this.#store.apiKeys.get(hash);
    const parsed = entry && entry.operation === 'PUT' ? apiKeyRecordSchema.parse(entry.json()) : null;
    const record = parsed && !parsed.revokedAt ? parsed : null;
    if (this.#cache.size > 10_000) this.#cache.clear();
    this.#cache.set(hash, { record, at: now });
    return record;
  }
}
