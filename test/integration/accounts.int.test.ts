import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually, execution, get, ingest, json, startStack, type TestStack } from '../support/env.js';
import { call, errorCode, type SignedUp, signup, uniqueEmail } from '../support/http.js';

let stack: TestStack;

beforeAll(async () => {
  stack = await startStack('accounts');
});
afterAll(async () => {
  await stack?.close();
});

describe('sign-up, log-in, sessions', () => {
  it('sign-up creates the user, the workspace, a session and a test key shown once', async () => {
    const email = uniqueEmail('signup');
    const res = await call(stack.service, 'POST', '/api/auth/signup', {
      body: { email, password: 'a good long password', name: 'Ada', workspaceName: 'Ada Inc' },
    });
    expect(res.statusCode).toBe(201);
    const b = res.json();
    expect(b.user).toEqual({ id: expect.stringMatching(/^usr_/), email, name: 'Ada' });
    expect(b.workspace).toEqual({ id: expect.stringMatching(/^ws_/), name: 'Ada Inc' });
    expect(b.session.token).toMatch(/^svc_sess_[A-Za-z0-9]{32}$/);
    expect(Date.parse(b.session.expiresAt) - Date.now()).toBeGreaterThan(6.9 * 86_400_000);
    expect(b.testKey).toMatchObject({
      mode: 'test',
      permissions: ['ingest', 'read'],
      key: expect.stringMatching(/^svc_test_/),
    });
    expect(b.testKey.prefix).toBe(b.testKey.key.slice(0, 12));
    expect(b.testKey.last4).toBe(b.testKey.key.slice(-4));
    const cookie = String(res.headers['set-cookie']);
    expect(cookie).toContain(`svc_session=${b.session.token}`);
    expect(cookie).toContain('HttpOnly');
    expect(cookie).toContain('SameSite=Lax');
    expect(cookie).toContain('Path=/');
    // Served over plain HTTP (no proxy trusted): not Secure, or the browser would drop it.
    expect(cookie).not.toContain('Secure');

    // The key works, and the listing never shows it again.
    expect((await ingest(stack.service, b.testKey.key, { executions: [execution()] })).statusCode).toBe(202);
    const keys = await call(stack.service, 'GET', '/api/keys', { token: b.session.token });
    expect(keys.statusCode).toBe(200);
    expect(keys.body).not.toContain(b.testKey.key);
    expect(keys.json().data).toEqual([
      expect.objectContaining({ id: b.testKey.id, prefix: b.testKey.prefix, revokedAt: null }),
    ]);
  });

  it('refuses a taken e-mail, a short password and a bad address', async () => {
    const a = await signup(stack.service);
    const again = await call(stack.service, 'POST', '/api/auth/signup', {
      body: { email: a.email.toUpperCase(), password: 'another long one' },
    });
    expect(again.statusCode).toBe(409);
    expect(errorCode(again)).toBe('CONFLICT');
    const short = await call(stack.service, 'POST', '/api/auth/signup', {
      body: { email: uniqueEmail(), password: 'short' },
    });
    expect(short.statusCode).toBe(400);
    expect(short.json().error.details[0].path).toBe('password');
    const bad = await call(stack.service, 'POST', '/api/auth/signup', {
      body: { email: 'nope', password: 'long enough password' },
    });
    expect(bad.json().error.details[0].path).toBe('email');
  });

  it('log-in, me by bearer and by cookie, log-out ends the session at once', async () => {
    const a = await signup(stack.service);
    const login = await call(stack.service, 'POST', '/api/auth/login', {
      body: { email: a.email, password: a.password },
    });
    expect(login.statusCode).toBe(200);
    const token = login.json().session.token as string;
    expect(login.json()).toMatchObject({
      user: { id: a.userId, email: a.email },
      workspace: { id: a.workspaceId },
    });

    const me = await call(stack.service, 'GET', '/api/auth/me', { token });
    expect(me.json()).toMatchObject({
      user: { id: a.userId },
      workspace: { id: a.workspaceId },
      role: 'owner',
    });
    const byCookie = await call(stack.service, 'GET', '/api/auth/me', {
      headers: { cookie: `theme=dark; svc_session=${token}` },
    });
    expect(byCookie.statusCode).toBe(200);

    const out = await call(stack.service, 'POST', '/api/auth/logout', { token });
    expect(out.statusCode).toBe(204);
    expect(String(out.headers['set-cookie'])).toContain('Max-Age=0');
    const after = await call(stack.service, 'GET', '/api/auth/me', { token });
    expect(after.statusCode).toBe(401);
    expect(after.headers['www-authenticate']).toBe('Bearer');
    // The sign-up session is a different one and still works.
    expect((await call(stack.service, 'GET', '/api/auth/me', { token: a.session })).statusCode).toBe(200);
  });

  it('a malformed or unknown session cookie is 401, never a 500', async () => {
    for (const value of [
      '%E0%A4%A',
      'svc_sess_%ZZ',
      '"unterminated',
      'svc_sess_0000000000000000000000000000000x',
      '',
    ]) {
      const res = await call(stack.service, 'GET', '/api/auth/me', {
        headers: { cookie: `svc_session=${value}` },
      });
      expect(res.statusCode, value).toBe(401);
      expect(errorCode(res)).toBe('UNAUTHORIZED');
      // What a cookie holds is a session, however broken: never called an API key.
      if (value) expect(res.json().error.message, value).toMatch(/session/);
    }
  });

  it('marks the session cookie Secure when a trusted proxy says the request came over HTTPS', async () => {
    const behind = await startStack('accounts-proxy', { TRUST_PROXY: 'true' });
    try {
      const https = await call(behind.service, 'POST', '/api/auth/signup', {
        body: { email: uniqueEmail(), password: 'long enough password' },
        headers: { 'x-forwarded-proto': 'https' },
      });
      expect(https.statusCode).toBe(201);
      expect(String(https.headers['set-cookie'])).toContain('Secure');
    } finally {
      await behind.close();
    }
    // Without TRUST_PROXY the header is the client's word, and not taken.
    const claimed = await call(stack.service, 'POST', '/api/auth/signup', {
      body: { email: uniqueEmail(), password: 'long enough password' },
      headers: { 'x-forwarded-proto': 'https' },
    });
    expect(String(claimed.headers['set-cookie'])).not.toContain('Secure');
  });

  it('repeated failed log-ins for one e-mail are refused with RATE_LIMITED', async () => {
    const a = await signup(stack.service);
    for (let i = 0; i < 5; i++) {
      const res = await call(stack.service, 'POST', '/api/auth/login', {
        body: { email: a.email, password: `wrong password ${i}` },
      });
      expect(res.statusCode).toBe(401);
    }
    const limited = await call(stack.service, 'POST', '/api/auth/login', {
      body: { email: a.email, password: a.password },
    });
    expect(limited.statusCode).toBe(429);
    expect(errorCode(limited)).toBe('RATE_LIMITED');
    expect(Number(limited.headers['retry-after'])).toBeGreaterThan(0);
    // An unknown e-mail is the same 401 as a wrong password.
    const unknown = await call(stack.service, 'POST', '/api/auth/login', {
      body: { email: uniqueEmail(), password: 'whatever it is' },
    });
    expect(unknown.statusCode).toBe(401);
    expect(unknown.json().error.message).toBe('wrong e-mail or password');
  });
});

describe('members and roles', () => {
  let owner: SignedUp;
  let memberToken: string;
  let adminToken: string;
  let memberId: string;

  beforeAll(async () => {
    owner = await signup(stack.service);
    const add = async (role: 'admin' | 'member') => {
      const email = uniqueEmail(role);
      const res = await call(stack.service, 'POST', '/api/workspace/members', {
        token: owner.session,
        body: { email, role, password: 'member password 1', name: role },
      });
      expect(res.statusCode).toBe(201);
      expect(res.json()).toMatchObject({ email, role, name: role, id: expect.stringMatching(/^usr_/) });
      const login = await call(stack.service, 'POST', '/api/auth/login', {
        body: { email, password: 'member password 1' },
      });
      return { id: res.json().id as string, token: login.json().session.token as string };
    };
    const m = await add('member');
    memberToken = m.token;
    memberId = m.id;
    adminToken = (await add('admin')).token;
  });

  it('lists members; members read, admins manage', async () => {
    const list = await call(stack.service, 'GET', '/api/workspace/members', { token: memberToken });
    expect(list.statusCode).toBe(200);
    expect(list.json().data.map((u: { role: string }) => u.role)).toEqual(['owner', 'member', 'admin']);
    expect(list.body).not.toContain('passwordHash');
    expect((await call(stack.service, 'GET', '/api/keys', { token: memberToken })).statusCode).toBe(200);
    expect((await call(stack.service, 'GET', '/api/executions', { token: memberToken })).statusCode).toBe(
      200,
    );
    for (const [method, url, body] of [
      ['POST', '/api/keys', { name: 'x', mode: 'live' }],
      [
        'POST',
        '/api/workspace/members',
        { email: uniqueEmail(), role: 'member', password: 'long password 1' },
      ],
      ['PATCH', '/api/workspace/settings', { retentionDays: 3 }],
      ['GET', '/api/workspace/settings', undefined],
    ] as const) {
      const res = await call(stack.service, method, url, { token: memberToken, body });
      expect(res.statusCode, `${method} ${url}`).toBe(403);
      expect(errorCode(res)).toBe('FORBIDDEN');
    }
    const byAdmin = await call(stack.service, 'POST', '/api/keys', {
      token: adminToken,
      body: { name: 'ci', mode: 'live' },
    });
    expect(byAdmin.statusCode).toBe(201);
    expect(byAdmin.json().permissions).toEqual(['ingest']);
  });

  it('API keys cannot manage keys, members or settings', async () => {
    for (const [method, url] of [
      ['GET', '/api/keys'],
      ['POST', '/api/keys'],
      ['GET', '/api/workspace/members'],
      ['GET', '/api/workspace/settings'],
    ] as const) {
      const res = await call(stack.service, method, url, {
        token: owner.testKey,
        body: method === 'POST' ? { name: 'k', mode: 'test' } : undefined,
      });
      expect(res.statusCode, `${method} ${url}`).toBe(403);
    }
    expect(
      (await call(stack.service, 'GET', '/api/workspace', { token: owner.testKey })).json(),
    ).toMatchObject({ id: owner.workspaceId, role: null });
  });

  it('removing a member ends their sessions at once; the owner stays; other workspaces see NOT_FOUND', async () => {
    const other = await signup(stack.service, 'other');
    expect(
      (await call(stack.service, 'DELETE', `/api/workspace/members/${memberId}`, { token: other.session }))
        .statusCode,
    ).toBe(404);
    expect(
      (await call(stack.service, 'DELETE', `/api/workspace/members/${owner.userId}`, { token: adminToken }))
        .statusCode,
    ).toBe(403);
    const del = await call(stack.service, 'DELETE', `/api/workspace/members/${memberId}`, {
      token: owner.session,
    });
    expect(del.statusCode).toBe(204);
    expect((await call(stack.service, 'GET', '/api/auth/me', { token: memberToken })).statusCode).toBe(401);
    expect(
      (await call(stack.service, 'DELETE', `/api/workspace/members/${memberId}`, { token: owner.session }))
        .statusCode,
    ).toBe(404);
  });
});

describe('API keys', () => {
  it('a live key is shown once, binds its mode, and stops working when revoked', async () => {
    const owner = await signup(stack.service);
    const created = await call(stack.service, 'POST', '/api/keys', {
      token: owner.session,
      body: { name: 'prod', mode: 'live', permissions: ['ingest', 'read'] },
    });
    expect(created.statusCode).toBe(201);
    const k = created.json();
    expect(k).toMatchObject({
      name: 'prod',
      mode: 'live',
      permissions: ['ingest', 'read'],
      revokedAt: null,
      lastUsedAt: null,
    });
    expect(k.key).toMatch(/^svc_live_[A-Za-z0-9]{32}$/);

    const live = execution({ service: 'live-only', mode: 'live' });
    expect((await ingest(stack.service, k.key, { executions: [live] })).statusCode).toBe(202);
    // Test data under a live key, and live data under the test key, are refused.
    expect(
      (await ingest(stack.service, k.key, { resource: { mode: 'test' }, executions: [] })).statusCode,
    ).toBe(403);
    expect((await get(stack.service, owner.testKey, '/api/executions?mode=live')).statusCode).toBe(403);
    expect((await get(stack.service, k.key, '/api/executions?mode=test')).statusCode).toBe(403);
    const seen = await eventually(
      async () =>
        json<{ total: number }>(await get(stack.service, k.key, '/api/executions?serviceName=live-only'))
          .total,
      (n) => n === 1,
    );
    expect(seen).toBe(1);
    expect(
      json<{ total: number }>(
        await get(stack.service, owner.testKey, '/api/executions?serviceName=live-only'),
      ).total,
    ).toBe(0);
    // A session reads both modes; test unless it names live.
    expect(
      (
        await call(stack.service, 'GET', '/api/executions?serviceName=live-only', { token: owner.session })
      ).json().total,
    ).toBe(0);
    expect(
      (
        await call(stack.service, 'GET', '/api/executions?serviceName=live-only&mode=live', {
          token: owner.session,
        })
      ).json().total,
    ).toBe(1);

    const other = await signup(stack.service, 'other');
    expect(
      (await call(stack.service, 'DELETE', `/api/keys/${k.id}`, { token: other.session })).statusCode,
    ).toBe(404);
    expect(
      (await call(stack.service, 'DELETE', `/api/keys/${k.id}`, { token: owner.session })).statusCode,
    ).toBe(204);
    const refused = await ingest(stack.service, k.key, { executions: [] });
    expect(refused.statusCode).toBe(401);
    expect(errorCode(refused)).toBe('UNAUTHORIZED');
    const listed = (await call(stack.service, 'GET', '/api/keys', { token: owner.session })).json().data;
    expect(listed.find((x: { id: string }) => x.id === k.id).revokedAt).toEqual(expect.any(String));
    expect(listed.find((x: { id: string }) => x.id === k.id).lastUsedAt).toEqual(expect.any(String));
  });
});
