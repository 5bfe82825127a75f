import type { FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import type { ControlPlane } from '../control/control-plane.js';
import type { Permission, Role } from '../schemas/control.js';
import { forbidden, unauthorized } from '../schemas/errors.js';
import type { Mode } from '../schemas/records.js';

/** Who is asking: an API key (SDKs, scripts) or a user session (the dashboard). */
export type Principal =
  | { kind: 'key'; id: string; workspaceId: string; mode: Mode; permissions: Permission[] }
  | {
      kind: 'session';
      id: string;
      workspaceId: string;
      userId: string;
      email: string;
      role: Role;
      tokenHash: string;
    };

export const SESSION_COOKIE = 'svc_session';

/** What a route needs (CONTRACT §2): ingest and read are key permissions (sessions read); the rest are roles. */
export type Need = 'ingest' | 'read' | 'member' | 'actor' | 'admin' | 'any';

function bearer(req: FastifyRequest): string | null {
  const auth = req.headers.authorization;
  if (typeof auth === 'string') {
    const m = /^Bearer\s+(\S+)\s*$/i.exec(auth);
    return m ? m[1]! : null;
  }
  const x = req.headers['x-api-key'];
  if (typeof x === 'string' && x.length > 0) return x.trim();
  return null;
}

declare module 'fastify' {
  interface FastifyRequest {
    principal?: Principal;
    /** The mode a route that takes `mode` works in, bound by the guard (bindMode). */
    mode?: Mode;
  }
  interface FastifyContextConfig {
    /** What the route needs: checked in onRequest, before the body is read (CONTRACT §3: 401 comes first). */
    need?: Need;
  }
}

/** The caller the onRequest guard authenticated for this route. */
export function principalOf(req: FastifyRequest): Principal {
  if (!req.principal) throw new Error(`route ${req.routeOptions.url} declares no need`);
  return req.principal;
}

/** Authenticates the request and checks what it needs; UNAUTHORIZED before FORBIDDEN (CONTRACT §3). */
export async function authenticate(
  req: FastifyRequest,
  control: ControlPlane,
  need: Need,
): Promise<Principal> {
  // @fastify/cookie never throws on a malformed value: it arrives raw, is no session, and is refused (401).
  const header = bearer(req);
  const presented = header ?? req.cookies[SESSION_COOKIE] ?? null;
  if (!presented)
    throw unauthorized('credentials are required: an API key, or a session from /api/auth/login');
  let principal: Principal;
  // The cookie only ever carries a session: whatever else is in it is a broken session, not a key.
  if (presented.startsWith('svc_sess_') || header === null) {
    const s = presented.startsWith('svc_sess_') ? await control.authenticateSession(presented) : null;
    if (!s) throw unauthorized('the session is invalid, expired or ended');
    principal = {
      kind: 'session',
      id: s.user.id,
      workspaceId: s.user.workspaceId,
      userId: s.user.id,
      email: s.user.email,
      role: s.user.role,
      tokenHash: s.tokenHash,
    };
  } else {
    const k = await control.authenticateKey(presented);
    if (!k) throw unauthorized('the API key is invalid or revoked');
    principal = {
      kind: 'key',
      id: k.id,
      workspaceId: k.workspaceId,
      mode: k.mode,
      permissions: k.permissions,
    };
  }
  req.principal = principal;
  authorize(principal, need);
  return principal;
}

export function authorize(p: Principal, need: Need): void {
  switch (need) {
    case 'any':
      return;
    case 'ingest':
      if (p.kind === 'key' && p.permissions.includes('ingest')) return;
      throw forbidden(p.kind === 'key' ? 'this key lacks the ingest permission' : 'ingest needs an API key');
    case 'read':
      if (p.kind === 'session' || p.permissions.includes('read')) return;
      throw forbidden('this key lacks the read permission');
    case 'member':
      if (p.kind === 'session') return;
      throw forbidden('API keys cannot manage keys, members or settings; use a user session');
    case 'actor':
      if (p.kind === 'session') return;
      throw forbidden(
        'changing an issue takes a user session (a person is its actor); API keys only read issues',
      );
    case 'admin':
      if (p.kind === 'session' && (p.role === 'owner' || p.role === 'admin')) return;
      throw forbidden(
        p.kind === 'key' ? 'API keys cannot manage keys, members or settings' : 'this needs an admin',
      );
  }
}

/**
 * Mode binding (CONTRACT §2): a key reads and writes only its own mode, and naming the other one is FORBIDDEN;
 * a session reads both, `test` when it names none.
 */
export function resolveMode(p: Principal, requested: unknown): Mode {
  const valid = requested === 'test' || requested === 'live';
  if (p.kind === 'session') return valid ? (requested as Mode) : 'test';
  if (requested === undefined || requested === p.mode || !valid) return p.mode; // an invalid value: validation says so
  throw forbidden(`a ${p.mode} key cannot use ${requested} data`);
}

/** Whether the route's query takes `mode`: every route that reads or changes one mode's data. */
function takesMode(req: FastifyRequest): boolean {
  const query = req.routeOptions.schema?.querystring;
  return query instanceof z.ZodObject && Object.hasOwn(query.shape, 'mode');
}

/**
 * Binds the request's mode (resolveMode) when its route takes one: in the guard, before the query is validated,
 * as naming the other mode is FORBIDDEN and that comes before any VALIDATION_ERROR (CONTRACT §3).
 */
export function bindMode(req: FastifyRequest, p: Principal): void {
  if (takesMode(req)) req.mode = resolveMode(p, (req.query as Record<string, unknown>).mode);
}

/** The mode the guard bound for this request. */
export function modeOf(req: FastifyRequest): Mode {
  if (!req.mode) throw new Error(`route ${req.routeOptions.url} takes no mode`);
  return req.mode;
}

/** The session cookie's attributes: not for scripts, sent on top-level navigation, `Secure` over HTTPS. */
const cookieOptions = (req: FastifyRequest) =>
  ({ path: '/', httpOnly: true, sameSite: 'lax', secure: req.protocol === 'https' }) as const;

export function setSessionCookie(
  req: FastifyRequest,
  reply: FastifyReply,
  token: string,
  expiresAt: string,
): void {
  const maxAge = Math.max(0, Math.floor((Date.parse(expiresAt) - Date.now()) / 1000));
  reply.setCookie(SESSION_COOKIE, token, { ...cookieOptions(req), maxAge });
}

export function clearSessionCookie(req: FastifyRequest, reply: FastifyReply): void {
  reply.clearCookie(SESSION_COOKIE, cookieOptions(req));
}
