import type { LightMyRequestResponse } from 'fastify';
import type { Service } from '../../main.js';

/** HTTP through app.inject: the whole Fastify stack, no socket. */
export async function call(
  service: Service,
  method: 'GET' | 'POST' | 'PATCH' | 'DELETE',
  url: string,
  opts: { token?: string; body?: unknown; headers?: Record<string, string> } = {},
): Promise<LightMyRequestResponse> {
  const headers: Record<string, string> = { ...opts.headers };
  if (opts.token) headers.authorization = `Bearer ${opts.token}`;
  if (opts.body !== undefined) headers['content-type'] = 'application/json';
  return service.app!.inject({
    method,
    url,
    headers,
    payload: opts.body === undefined ? undefined : JSON.stringify(opts.body),
  });
}

export const errorCode = (res: LightMyRequestResponse) =>
  (res.json() as { error?: { code?: string } }).error?.code;

let n = 0;
export const uniqueEmail = (tag = 'user') =>
  `${tag}-${process.pid}-${Date.now().toString(36)}-${++n}@example.com`;

export interface SignedUp {
  email: string;
  password: string;
  session: string;
  testKey: string;
  workspaceId: string;
  userId: string;
}

export async function signup(service: Service, tag = 'owner'): Promise<SignedUp> {
  const email = uniqueEmail(tag);
  const password = 'correct horse battery staple';
  const res = await call(service, 'POST', '/api/auth/signup', { body: { email, password, name: tag } });
  if (res.statusCode !== 201) throw new Error(`signup answered ${res.statusCode}: ${res.body}`);
  const b = res.json() as {
    user: { id: string };
    workspace: { id: string };
    session: { token: string };
    testKey: { key: string };
  };
  return {
    email,
    password,
    session: b.session.token,
    testKey: b.testKey.key,
    workspaceId: b.workspace.id,
    userId: b.user.id,
  };
}
