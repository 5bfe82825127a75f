import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Need } from '../../api/auth.js';
import { ROUTES } from '../../bench/support/fuzz-requests.js';
import { createTenant, startStack, type TestStack } from '../support/env.js';
import { call, type SignedUp, signup, uniqueEmail } from '../support/http.js';

/**
 * Every registered route × every kind of caller answers as CONTRACT §2–§3 say: no credentials, a revoked key and an
 * ended session are 401 on every route that needs a caller; a caller without the permission is 403 (a session
 * cannot ingest, a key cannot manage, a member is no admin, a read-only key cannot ingest and an ingest-only key
 * cannot read); another workspace's ids are 404.
 */

let stack: TestStack;
let owner: SignedUp;
let member: string;
let keys: Record<string, string>;
let revokedKey: string;
let endedSession: string;

beforeAll(async () => {
  stack = await startStack('access');
  owner = await signup(stack.service);
  const memberEmail = uniqueEmail();
  const password = 'member password 123';
  await call(stack.service, 'POST', '/api/workspace/members', {
    token: owner.session,
    body: { email: memberEmail, role: 'member', password },
  });
  member = (
    await call(stack.service, 'POST', '/api/auth/login', { body: { email: memberEmail, password } })
  ).json().session.token;
  const made: Record<string, string> = {};
  for (const [name, permissions] of [
    ['readOnly', ['read']],
    ['ingestOnly', ['ingest']],
    ['both', ['ingest', 'read']],
    ['revoked', ['ingest', 'read']],
  ] as const) {
    const res = await call(stack.service, 'POST', '/api/keys', {
      token: owner.session,
      body: { name, mode: 'test', permissions },
    });
    made[name] = res.json().key;
    if (name === 'revoked')
      await call(stack.service, 'DELETE', `/api/keys/${res.json().id}`, { token: owner.session });
  }
  keys = made;
  revokedKey = made.revoked!;
  const other = (
    await call(stack.service, 'POST', '/api/auth/login', {
      body: { email: owner.email, password: owner.password },
    })
  ).json().session.token;
  await call(stack.service, 'POST', '/api/auth/logout', { token: other });
  endedSession = other;
});
afterAll(async () => {
  await stack?.close();
});

/** The route's path with an id where it takes one (ids of this workspace's shape, naming nothing). */
const pathOf = (url: string) =>
  url
    .replace(':executionId', 'ex-none')
    .replace(
      ':id',
      url.startsWith('/api/issues') ? 'iss_0000000000000000' : url.includes('keys') ? 'key_none' : 'usr_none',
    );

/** The status a caller without the need gets: 403, or null when it has it. */
function refusedFor(caller: 'session' | 'member' | 'readOnly' | 'ingestOnly', need: Need): number | null {
  const session = caller === 'session' || caller === 'member';
  switch (need) {
    case 'any':
      return null;
    case 'ingest':
      return caller === 'ingestOnly' ? null : 403;
    case 'read':
      return caller === 'ingestOnly' ? 403 : null;
    case 'member':
    case 'actor':
      return session ? null : 403;
    case 'admin':
      return caller === 'session' ? null : 403;
  }
}

describe('access to every route', () => {
  it('the table has every route the fuzz suite knows, and no other', () => {
    const table = stack.service.app!.routeTable.filter((r) => !r.page).map((r) => `${r.method} ${r.url}`);
    const known = ROUTES.map(([m, u]) => `${m} ${u}`);
    const normal = (s: string) => s.replace(/:[A-Za-z]+/g, ':x');
    expect(new Set(table.map(normal))).toEqual(new Set(known));
  });

  /** The error's code: CONTRACT §3's, or for OTLP routes (§12) the one their google.rpc.Status code stands for. */
  const GRPC: Record<number, string> = { 16: 'UNAUTHORIZED', 7: 'FORBIDDEN' };
  const codeOf = (url: string, res: { json(): { error?: { code: string }; code?: number } }) =>
    url.startsWith('/v1/') ? GRPC[res.json().code ?? -1] : res.json().error?.code;

  it('401 without valid credentials, 403 without the permission, on every route that needs a caller', async () => {
    const routes = stack.service.app!.routeTable.filter((r) => r.need !== null);
    expect(routes.length).toBeGreaterThan(25);
    for (const r of routes) {
      const method = r.method as 'GET' | 'POST' | 'PATCH' | 'DELETE';
      const path = pathOf(r.url);
      const body = method === 'POST' || method === 'PATCH' ? {} : undefined;
      const asked = (headers: Record<string, string>) => call(stack.service, method, path, { headers, body });
      const what = `${r.method} ${r.url}`;
      for (const [who, headers] of [
        ['nobody', {}],
        ['a revoked key', { 'x-api-key': revokedKey }],
        ['an ended session', { authorization: `Bearer ${endedSession}` }],
        ['a malformed cookie', { cookie: 'svc_session=%E0%A4%A' }],
      ] as const) {
        const res = await asked(headers);
        expect(res.statusCode, `${what} for ${who}`).toBe(401);
        expect(codeOf(r.url, res)).toBe('UNAUTHORIZED');
      }
      // A log-out would end the session the other routes are asked with (its own test is in accounts).
      if (r.url === '/api/auth/logout') continue;
      for (const [caller, headers] of [
        ['session', { authorization: `Bearer ${owner.session}` }],
        ['member', { authorization: `Bearer ${member}` }],
        ['readOnly', { 'x-api-key': keys.readOnly! }],
        ['ingestOnly', { 'x-api-key': keys.ingestOnly! }],
      ] as const) {
        const res = await asked(headers);
        const refused = refusedFor(caller, r.need!);
        if (refused !== null) {
          expect(res.statusCode, `${what} for ${caller}`).toBe(refused);
          expect(codeOf(r.url, res)).toBe('FORBIDDEN');
        } else
          expect([401, 403], `${what} for ${caller}: ${res.body.slice(0, 200)}`).not.toContain(
            res.statusCode,
          );
      }
    }
  });

  it("another workspace's ids are 404, and a key's mode is its own (403 for the other)", async () => {
    const other = await createTenant(stack.service);
    const ours = { authorization: `Bearer ${owner.session}` };
    for (const path of [
      '/api/executions/ex-none',
      '/api/issues/iss_0000000000000000',
      '/api/keys/key_none',
    ]) {
      const method = path.startsWith('/api/keys') ? 'DELETE' : 'GET';
      expect((await call(stack.service, method, path, { headers: ours })).statusCode, path).toBe(404);
    }
    const live = await call(stack.service, 'GET', '/api/executions?mode=live', {
      headers: { 'x-api-key': other.keys.test! },
    });
    expect(live.statusCode).toBe(403);
  });
});
