import type { FastifyRequest } from 'fastify';
import type { ApiKeyAuthenticator } from '../control/api-keys.js';
import type { Permission } from '../schemas/control.js';
import { forbidden, unauthorized } from '../schemas/errors.js';
import type { Mode } from '../schemas/records.js';

export interface KeyPrincipal {
  kind: 'key';
  keyId: string;
  workspaceId: string;
  mode: Mode;
  permissions: Permission[];
}

function presentedKey(req: FastifyRequest): string | null {
  const auth = req.headers.authorization;
  if (typeof auth === 'string') {
    const m = /^Bearer\s+(\S+)\s*$/i.exec(auth);
    return m ? m[1]! : null;
  }
  const x = req.headers['x-api-key'];
  return typeof x === 'string' && x.length > 0 ? x.trim() : null;
}

/** Authenticates the request's API key and checks one permission (CONTRACT §2). */
export async function requireKey(
  req: FastifyRequest,
  auth: ApiKeyAuthenticator,
  permission: Permission,
): Promise<KeyPrincipal> {
  const key = presentedKey(req);
  if (!key) throw unauthorized('an API key is required (Authorization: Bearer <key> or x-api-key)');
  const record = await auth.authenticate(key);
  if (!record) throw unauthorized('the API key is invalid or revoked');
  if (!record.permissions.includes(permission))
    throw forbidden(`this key lacks the ${permission} permission`);
  return {
    kind: 'key',
    keyId: record.id,
    workspaceId: record.workspaceId,
    mode: record.mode,
    permissions: record.permissions,
  };
}

/** Mode binding: a key reads and writes only its own mode; naming the other one is FORBIDDEN. */
export function resolveMode(principal: KeyPrincipal, requested: unknown): Mode {
  if (requested === undefined) return principal.mode;
  if (requested === principal.mode) return principal.mode;
  if (requested === 'test' || requested === 'live')
    throw forbidden(`a ${principal.mode} key cannot use ${requested} data`);
  return principal.mode; // not a mode at all: schema validation reports it
}
