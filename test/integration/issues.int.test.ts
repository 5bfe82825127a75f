import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { IssueStore } from '../../control/issues.js';
import type { IssueOccurrences } from '../../schemas/issues.js';
import { eventually, execution, get, ingest, json, startStack, type TestStack } from '../support/env.js';
import { call, errorCode, type SignedUp, signup, uniqueEmail } from '../support/http.js';

let stack: TestStack;

beforeAll(async () => {
  // Compaction runs when a test asks for it (the timer's period is never reached).
  stack = await startStack('issues', { COMPACTION_INTERVAL_MS: '3600000', COMPACTION_GRACE_MS: '0' });
});
afterAll(async () => {
  await stack?.close();
});

interface Issue {
  id: string;
  title: string;
  status: string;
  service: string;
  endpoint: string;
  method: string | null;
  failureType: string;
  exceptionType: string | null;
  fingerprintParts: string[];
  environments: string[];
  firstSeenAt: string;
  lastSeenAt: string;
  statusChangedAt: string;
  resolvedAt: string | null;
  regressedAt: string | null;
  assignee: string | null;
  occurrences: { total: number; last24h: number; last7d: number };
  hypothesis?: { text: string; facts: string[] };
  suggestedFix?: { text: string; facts: string[] };
  commonFactors?: { field: string; value: unknown; issueShare: number; baselineShare: number }[];
  representativeExecution?: { executionId: string; issueId: string } | null;
  recentActivity?: Activity[];
}
interface Activity {
  id: string;
  type: string;
  actor: { type: string; id?: string };
  at: string;
  data: Record<string, unknown>;
}
interface Page<T> {
  data: T[];
  total: number;
  page: number;
  pageSize: number;
  hasMore: boolean;
}

const ago = (ms: number) => new Date(Date.now() - ms).toISOString();

/** A failed execution: an unhandled exception on a 500. */
const failure = (over: Record<string, unknown> = {}, message = 'order 123 not found') =>
  execution({
    endpoint: '/orders/12',
    method: 'POST',
    statusCode: 500,
    exception: { type: 'NotFoundError', message },
    ...over,
  });

const send = async (key: string, executions: unknown[]) => {
  const res = await ingest(stack.service, key, { executions });
  expect(res.statusCode).toBe(202);
};

const listIssues = async (token: string, query = '') => {
  const res = await call(stack.service, 'GET', `/api/issues${query}`, { token });
  expect(res.statusCode, res.body).toBe(200);
  return res.json() as Page<Issue>;
};

const getIssue = async (token: string, id: string, query = '') => {
  const res = await call(stack.service, 'GET', `/api/issues/${id}${query}`, { token });
  expect(res.statusCode, res.body).toBe(200);
  return res.json() as Issue;
};

const patch = (token: string, id: string, body: unknown) =>
  call(stack.service, 'PATCH', `/api/issues/${id}`, { token, body });

/** Waits for the workspace's issues to hold `n` occurrences in all. */
const untilOccurrences = (token: string, n: number, query = '') =>
  eventually(
    () => listIssues(token, query),
    (p) => p.data.reduce((s, i) => s + i.occurrences.total, 0) >= n,
  );

describe('grouping', () => {
  it('a failing execution becomes an issue with its fingerprint parts, and its execution links to it', async () => {
    const u = await signup(stack.service);
    const ex = failure({ executionId: 'grp-1' });
    await send(u.testKey, [ex, execution({ executionId: 'ok-1' })]);
    const list = await untilOccurrences(u.session, 1);
    expect(list.total).toBe(1);
    const item = list.data[0]!;
    expect(item).toMatchObject({
      title: 'NotFoundError in POST /orders/:id',
      status: 'open',
      service: 'checkout',
      endpoint: '/orders/:id',
      method: 'POST',
      failureType: 'exception',
      exceptionType: 'NotFoundError',
      fingerprintParts: [
        'checkout',
        '/orders/:id',
        'exception',
        'NotFoundError',
        'order <num> not found',
        '',
      ],
      environments: ['production'],
      resolvedAt: null,
      regressedAt: null,
      assignee: null,
      occurrences: { total: 1, last24h: 1, last7d: 1 },
    });
    expect(item.id).toMatch(/^iss_[0-9a-f]{16}$/);
    expect(item.firstSeenAt).toBe(ex.startedAt);
    expect(item.lastSeenAt).toBe(ex.startedAt);
    expect(item.statusChangedAt).toBe(item.firstSeenAt);
    // The list's items leave out the evidence.
    for (const k of [
      'hypothesis',
      'suggestedFix',
      'commonFactors',
      'representativeExecution',
      'recentActivity',
    ])
      expect(item).not.toHaveProperty(k);

    const linked = json<Page<{ executionId: string; issueId: string }>>(
      await get(stack.service, u.testKey, `/api/executions?issueId=${item.id}`),
    );
    expect(linked.data.map((e) => e.executionId)).toEqual(['grp-1']);
    expect(linked.data[0]!.issueId).toBe(item.id);
    const viaQ = json<Page<{ executionId: string }>>(
      await get(stack.service, u.testKey, `/api/executions?q=${encodeURIComponent(`issue:${item.id}`)}`),
    );
    expect(viaQ.data.map((e) => e.executionId)).toEqual(['grp-1']);
    const detail = json<{ issueId: string; issue: unknown }>(
      await get(stack.service, u.testKey, '/api/executions/grp-1'),
    );
    expect(detail.issueId).toBe(item.id);
    expect(detail.issue).toEqual({ id: item.id, title: item.title, status: 'open' });
    const ok = json<{ issueId: string | null; issue: unknown }>(
      await get(stack.service, u.testKey, '/api/executions/ok-1'),
    );
    expect(ok.issueId).toBeNull();
    expect(ok.issue).toBeNull();
  });

  it('differently-numbered but same-shaped failures join one issue; other shapes make their own', async () => {
    const u = await signup(stack.service);
    await send(u.testKey, [
      failure({ endpoint: '/orders/12' }, 'order 123 not found'),
      failure({ endpoint: '/orders/99' }, 'order 456 not found'),
      failure({ endpoint: '/orders/550e8400-e29b-41d4-a716-446655440000' }, 'order "abc" not found'),
      failure({ endpoint: '/orders/12' }, 'payment declined for bob@example.com'),
      failure({ endpoint: '/carts/12' }, 'order 7 not found'),
    ]);
    const list = await untilOccurrences(u.session, 5, '?sort=-occurrences');
    expect(list.data.map((i) => i.occurrences.total)).toEqual([2, 1, 1, 1]);
    expect(list.data[0]!.fingerprintParts[4]).toBe('order <num> not found');
    expect(list.data[0]!.endpoint).toBe('/orders/:id');
    const quoted = list.data.find((i) => i.fingerprintParts[4] === 'order <str> not found');
    expect(quoted?.endpoint).toBe('/orders/:id');
  });

  it('a custom fingerprint groups across endpoints, {{default}} expands in place, request.route is the template', async () => {
    const u = await signup(stack.service);
    await send(u.testKey, [
      failure({ endpoint: '/pay/card', fingerprint: ['payment-provider-down'] }),
      failure({ endpoint: '/refund/7', fingerprint: ['payment-provider-down'] }),
      failure({ endpoint: '/x/1', fingerprint: ['team-a', '{{default}}'] }),
      failure({ endpoint: '/users/me/orders', request: { route: '/users/:userId/orders' } }),
    ]);
    const list = await untilOccurrences(u.session, 4, '?sort=-occurrences');
    expect(list.data[0]).toMatchObject({
      fingerprintParts: ['payment-provider-down'],
      occurrences: { total: 2 },
    });
    const parts = list.data.map((i) => i.fingerprintParts);
    expect(parts).toContainEqual([
      'team-a',
      'checkout',
      '/x/:id',
      'exception',
      'NotFoundError',
      'order <num> not found',
      '',
    ]);
    expect(list.data.map((i) => i.endpoint)).toContain('/users/:userId/orders');
  });

  it('a fingerprint that is not a list of strings is an item error, listed by rejections', async () => {
    const u = await signup(stack.service);
    await send(u.testKey, [failure({ fingerprint: 'not-a-list' }), failure({ fingerprint: [1, 2] })]);
    const rej = await eventually(
      async () =>
        json<Page<{ index: number; code: string; details: { path: string }[] }>>(
          await get(stack.service, u.testKey, '/api/ingest/rejections'),
        ),
      (p) => p.total === 2,
    );
    expect(rej.data.map((r) => r.code)).toEqual(['VALIDATION_ERROR', 'VALIDATION_ERROR']);
    expect(rej.data.flatMap((r) => r.details.map((d) => d.path))).toEqual(
      expect.arrayContaining(['fingerprint']),
    );
    expect((await listIssues(u.session)).total).toBe(0);
  });

  it('classifies the failure type of each kind of failure', async () => {
    const u = await signup(stack.service);
    await send(u.testKey, [
      execution({ endpoint: '/a', statusCode: 504 }),
      execution({ endpoint: '/b', statusCode: 503 }),
      execution({ endpoint: '/c', statusCode: 404, outcome: 'failed' }),
      execution({ endpoint: '/d', statusCode: 200, response: { fields: { success: false } } }),
      execution({ endpoint: '/e', statusCode: undefined, outcome: 'failed' }),
      execution({ endpoint: '/f', statusCode: 200, exception: { type: 'TypeError', message: 'x' } }),
    ]);
    const list = await untilOccurrences(u.session, 6);
    const byEndpoint = Object.fromEntries(list.data.map((i) => [i.endpoint, [i.failureType, i.title]]));
    expect(byEndpoint).toEqual({
      '/a': ['timeout', 'Timeout in GET /a'],
      '/b': ['http_5xx', 'HTTP 5xx in GET /b'],
      '/c': ['http_4xx', 'HTTP 4xx in GET /c'],
      '/d': ['response_error', 'Failure response in GET /d'],
      '/e': ['unknown', 'Failure in GET /e'],
      '/f': ['exception', 'TypeError in GET /f'],
    });
  });
});

/** One failure sent and its issue, ready for lifecycle tests. */
async function oneIssue(u: SignedUp, over: Record<string, unknown> = {}): Promise<Issue> {
  await send(u.testKey, [failure({ startedAt: ago(60_000), ...over })]);
  const list = await untilOccurrences(u.session, 1);
  return list.data[0]!;
}

describe('lifecycle', () => {
  it('allows the contract transitions and refuses the others with CONFLICT', async () => {
    const u = await signup(stack.service);
    const issue = await oneIssue(u);
    const to = async (status: string) => {
      const res = await patch(u.session, issue.id, { status });
      return { code: res.statusCode, body: res.json() as Issue };
    };
    expect((await to('regressed')).code).toBe(409); // nobody sets regressed by hand
    expect((await to('acknowledged')).body.status).toBe('acknowledged');
    expect((await to('open')).body.status).toBe('open');
    expect((await to('ignored')).body.status).toBe('ignored');
    expect((await to('resolved')).code).toBe(409); // ignored → resolved is not a transition
    expect((await to('acknowledged')).code).toBe(409);
    expect((await to('open')).body.status).toBe('open');
    const resolved = await to('resolved');
    expect(resolved.body.status).toBe('resolved');
    expect(resolved.body.resolvedAt).not.toBeNull();
    expect(resolved.body.statusChangedAt).toBe(resolved.body.resolvedAt);
    const same = await to('resolved'); // the status it has: nothing changes
    expect(same.code).toBe(200);
    expect(same.body.statusChangedAt).toBe(resolved.body.statusChangedAt);
    const refused = await patch(u.session, issue.id, { status: 'ignored' });
    expect(refused.statusCode).toBe(409);
    expect(errorCode(refused)).toBe('CONFLICT');
    expect((await to('open')).body.status).toBe('open');

    const activity = json<Page<Activity>>(
      await call(stack.service, 'GET', `/api/issues/${issue.id}/activity`, { token: u.session }),
    );
    const changes = activity.data.filter((a) => a.type === 'status_changed').map((a) => a.data);
    expect(changes).toEqual([
      { from: 'resolved', to: 'open' },
      { from: 'open', to: 'resolved' },
      { from: 'ignored', to: 'open' },
      { from: 'open', to: 'ignored' },
      { from: 'acknowledged', to: 'open' },
      { from: 'open', to: 'acknowledged' },
    ]);
    expect(activity.data.at(-1)).toMatchObject({ type: 'created', actor: { type: 'system' }, data: {} });
    expect(activity.data[0]!.actor).toEqual({ type: 'user', id: u.userId });
    expect(activity.total).toBe(7);
    const paged = json<Page<Activity>>(
      await call(stack.service, 'GET', `/api/issues/${issue.id}/activity?page=2&pageSize=3`, {
        token: u.session,
      }),
    );
    expect(paged.data.map((a) => a.id)).toEqual(activity.data.slice(3, 6).map((a) => a.id));
    expect(paged.hasMore).toBe(true);
  });

  it('a newer occurrence regresses a resolved issue on its own; an ignored issue never regresses', async () => {
    const u = await signup(stack.service);
    const issue = await oneIssue(u);
    expect((await patch(u.session, issue.id, { status: 'resolved' })).statusCode).toBe(200);
    // An occurrence that started before the resolve changes nothing.
    await send(u.testKey, [failure({ startedAt: ago(30_000) })]);
    await untilOccurrences(u.session, 2);
    expect((await getIssue(u.session, issue.id)).status).toBe('resolved');

    await send(u.testKey, [failure({ executionId: 'regress-1', startedAt: new Date().toISOString() })]);
    // The issue record is written before the batch's files are committed (a crash between the two redelivers the
    // batch): for a moment the status has moved and the occurrence is not counted yet.
    const regressed = await eventually(
      () => getIssue(u.session, issue.id),
      (i) => i.status === 'regressed' && i.occurrences.total === 3,
    );
    expect(regressed.regressedAt).not.toBeNull();
    expect(regressed.resolvedAt).not.toBeNull();
    const events = regressed.recentActivity!;
    expect(events[0]).toMatchObject({
      type: 'regressed',
      actor: { type: 'system' },
      data: { from: 'resolved', to: 'regressed', executionId: 'regress-1' },
    });
    // One regressed event and no status_changed for it.
    expect(events.filter((e) => e.type === 'status_changed').map((e) => e.data)).toEqual([
      { from: 'open', to: 'resolved' },
    ]);
    expect((await patch(u.session, issue.id, { status: 'open' })).statusCode).toBe(409);
    expect((await patch(u.session, issue.id, { status: 'regressed' })).statusCode).toBe(200);
    expect((await patch(u.session, issue.id, { status: 'acknowledged' })).statusCode).toBe(200);

    // Ignored: counts go on, the status stays.
    expect((await patch(u.session, issue.id, { status: 'ignored' })).statusCode).toBe(200);
    await send(u.testKey, [failure({ startedAt: new Date(Date.now() + 1000).toISOString() })]);
    const ignored = await eventually(
      () => getIssue(u.session, issue.id),
      (i) => i.occurrences.total === 4,
    );
    expect(ignored.status).toBe('ignored');
  });

  it('assigns to members only, unassigns, lists by assignee, and unassigns a removed member', async () => {
    const u = await signup(stack.service);
    const issue = await oneIssue(u);
    const member = await call(stack.service, 'POST', '/api/workspace/members', {
      token: u.session,
      body: { email: uniqueEmail('member'), password: 'a long member password', role: 'member' },
    });
    const memberId = member.json().id as string;
    const stranger = await signup(stack.service);
    for (const assignee of [stranger.userId, 'usr_nobody', 'not an id', '']) {
      const res = await patch(u.session, issue.id, { assignee });
      expect(res.statusCode).toBe(400);
      expect(errorCode(res)).toBe('VALIDATION_ERROR');
      expect(res.json().error.details[0].path).toBe('assignee');
    }
    const assigned = await patch(u.session, issue.id, { assignee: memberId });
    expect(assigned.json().assignee).toBe(memberId);
    expect((await listIssues(u.session, `?assignee=${memberId}`)).total).toBe(1);
    expect((await listIssues(u.session, '?assignee=none')).total).toBe(0);
    expect((await patch(u.session, issue.id, { assignee: null })).json().assignee).toBeNull();
    expect((await listIssues(u.session, '?assignee=none')).total).toBe(1);
    await patch(u.session, issue.id, { assignee: memberId });

    const removed = await call(stack.service, 'DELETE', `/api/workspace/members/${memberId}`, {
      token: u.session,
    });
    expect(removed.statusCode).toBe(204);
    const after = await getIssue(u.session, issue.id);
    expect(after.assignee).toBeNull();
    const assignments = after.recentActivity!.filter((e) => e.type === 'assigned');
    expect(assignments.map((e) => [e.actor.type, e.data])).toEqual([
      ['system', { from: memberId, to: null }],
      ['user', { from: null, to: memberId }],
      ['user', { from: memberId, to: null }],
      ['user', { from: null, to: memberId }],
    ]);
  });

  it('concurrent PATCHes of different fields both take effect, each with its event', async () => {
    const u = await signup(stack.service);
    const issue = await oneIssue(u);
    const [a, b] = await Promise.all([
      patch(u.session, issue.id, { status: 'acknowledged' }),
      patch(u.session, issue.id, { assignee: u.userId }),
    ]);
    expect([a.statusCode, b.statusCode]).toEqual([200, 200]);
    const now = await getIssue(u.session, issue.id);
    expect(now.status).toBe('acknowledged');
    expect(now.assignee).toBe(u.userId);
    expect(now.recentActivity!.map((e) => e.type).sort()).toEqual(['assigned', 'created', 'status_changed']);
  });

  it('comments: 201 with their author, oldest first, in the activity; bounded and checked', async () => {
    const u = await signup(stack.service);
    const issue = await oneIssue(u);
    const first = await call(stack.service, 'POST', `/api/issues/${issue.id}/comments`, {
      token: u.session,
      body: { body: 'Looking into it', ignored: true },
    });
    expect(first.statusCode).toBe(201);
    expect(first.json()).toEqual({
      id: expect.stringMatching(/^cmt_/),
      body: 'Looking into it',
      author: { id: u.userId, email: u.email },
      createdAt: expect.any(String),
    });
    await call(stack.service, 'POST', `/api/issues/${issue.id}/comments`, {
      token: u.session,
      body: { body: 'Fixed in 1.2.3' },
    });
    const comments = json<Page<{ body: string }>>(
      await call(stack.service, 'GET', `/api/issues/${issue.id}/comments`, { token: u.session }),
    );
    expect(comments.data.map((c) => c.body)).toEqual(['Looking into it', 'Fixed in 1.2.3']);
    const byKey = json<Page<{ body: string }>>(
      await get(stack.service, u.testKey, `/api/issues/${issue.id}/comments`),
    );
    expect(byKey.total).toBe(2);
    const detail = await getIssue(u.session, issue.id);
    expect(detail.recentActivity!.slice(0, 2).map((e) => [e.type, e.data.commentId])).toEqual([
      ['commented', expect.any(String)],
      ['commented', first.json().id],
    ]);
    const tooLong = await call(stack.service, 'POST', `/api/issues/${issue.id}/comments`, {
      token: u.session,
      body: { body: 'x'.repeat(10_001) },
    });
    expect(errorCode(tooLong)).toBe('VALIDATION_ERROR');
    const exactly = await call(stack.service, 'POST', `/api/issues/${issue.id}/comments`, {
      token: u.session,
      body: { body: 'x'.repeat(10_000) },
    });
    expect(exactly.statusCode).toBe(201);
    for (const body of [{}, { body: '' }, { body: '  ' }, { body: 3 }]) {
      const res = await call(stack.service, 'POST', `/api/issues/${issue.id}/comments`, {
        token: u.session,
        body,
      });
      expect(errorCode(res)).toBe('VALIDATION_ERROR');
    }
  });
});

describe('access', () => {
  it('a key with read reads issues; changing one takes a session; other workspaces and modes see nothing', async () => {
    const u = await signup(stack.service);
    const issue = await oneIssue(u);
    const byKey = await get(stack.service, u.testKey, `/api/issues/${issue.id}`);
    expect(byKey.statusCode).toBe(200);
    expect((await get(stack.service, u.testKey, '/api/issues')).json().total).toBe(1);
    for (const [method, url, body] of [
      ['PATCH', `/api/issues/${issue.id}`, { status: 'resolved' }],
      ['POST', `/api/issues/${issue.id}/comments`, { body: 'hi' }],
    ] as const) {
      const res = await stack.service.app!.inject({
        method,
        url,
        headers: { 'x-api-key': u.testKey, 'content-type': 'application/json' },
        payload: JSON.stringify(body),
      });
      expect(res.statusCode).toBe(403);
      expect(errorCode(res)).toBe('FORBIDDEN');
    }
    const other = await signup(stack.service);
    for (const url of [
      `/api/issues/${issue.id}`,
      `/api/issues/${issue.id}/comments`,
      `/api/issues/${issue.id}/activity`,
    ]) {
      const res = await call(stack.service, 'GET', url, { token: other.session });
      expect(res.statusCode).toBe(404);
      expect(errorCode(res)).toBe('NOT_FOUND');
    }
    expect(errorCode(await patch(other.session, issue.id, { status: 'resolved' }))).toBe('NOT_FOUND');
    expect((await listIssues(other.session)).total).toBe(0);
    // The live mode of the same workspace has its own issues.
    expect((await listIssues(u.session, '?mode=live')).total).toBe(0);
    expect(
      (await call(stack.service, 'GET', `/api/issues/${issue.id}?mode=live`, { token: u.session }))
        .statusCode,
    ).toBe(404);
    // Ids of the wrong shape are not found; bad parameters are validation errors.
    for (const id of ['xyz', 'iss_123', `iss_${'g'.repeat(16)}`]) {
      expect((await call(stack.service, 'GET', `/api/issues/${id}`, { token: u.session })).statusCode).toBe(
        404,
      );
    }
    for (const q of [
      '?status=bogus',
      '?sort=title',
      '?pageSize=201',
      '?typo=1',
      '?from=2026-01-02T00:00:00Z&to=2026-01-01T00:00:00Z',
    ]) {
      const res = await call(stack.service, 'GET', `/api/issues${q}`, { token: u.session });
      expect(res.statusCode, q).toBe(400);
      expect(errorCode(res)).toBe('VALIDATION_ERROR');
    }
    expect((await patch(u.session, issue.id, { status: 'done' })).statusCode).toBe(400);
    expect((await patch(u.session, issue.id, {})).statusCode).toBe(400);
    // Unknown body fields are ignored.
    expect((await patch(u.session, issue.id, { status: 'acknowledged', extra: 1 })).statusCode).toBe(200);
  });
});

describe('the list', () => {
  it('filters by status, service and last occurrence, sorts and pages', async () => {
    const u = await signup(stack.service);
    await send(u.testKey, [
      failure({ service: 'a', startedAt: ago(3 * 3_600_000) }),
      failure({ service: 'a', startedAt: ago(3 * 3_600_000) }),
      failure({ service: 'a', startedAt: ago(3 * 3_600_000) }),
      failure({ service: 'b', startedAt: ago(2 * 3_600_000) }),
      failure({ service: 'c', startedAt: ago(3_600_000) }),
      failure({ service: 'c', startedAt: ago(3_600_000) }),
    ]);
    const all = await untilOccurrences(u.session, 6);
    expect(all.data.map((i) => i.service)).toEqual(['c', 'b', 'a']);
    expect((await listIssues(u.session, '?sort=-occurrences')).data.map((i) => i.service)).toEqual([
      'a',
      'c',
      'b',
    ]);
    expect((await listIssues(u.session, '?sort=-firstSeenAt')).data.map((i) => i.service)).toEqual([
      'c',
      'b',
      'a',
    ]);
    expect((await listIssues(u.session, '?serviceName=b')).data.map((i) => i.service)).toEqual(['b']);
    const b = all.data.find((i) => i.service === 'b')!;
    await patch(u.session, b.id, { status: 'resolved' });
    const c = all.data.find((i) => i.service === 'c')!;
    await patch(u.session, c.id, { status: 'ignored' });
    expect((await listIssues(u.session, '?status=open')).data.map((i) => i.service)).toEqual(['a']);
    expect((await listIssues(u.session, '?status=resolved,ignored')).data.map((i) => i.service)).toEqual([
      'c',
      'b',
    ]);
    expect((await listIssues(u.session, '?status=resolved&status=open')).data.map((i) => i.service)).toEqual([
      'b',
      'a',
    ]);
    const window = `?from=${encodeURIComponent(ago(2.5 * 3_600_000))}&to=${encodeURIComponent(ago(1.5 * 3_600_000))}`;
    expect((await listIssues(u.session, window)).data.map((i) => i.service)).toEqual(['b']);
    const page = await listIssues(u.session, '?pageSize=2&page=2');
    expect(page).toMatchObject({ total: 3, page: 2, pageSize: 2, hasMore: false });
    expect(page.data.map((i) => i.service)).toEqual(['a']);
  });
});

describe('evidence', () => {
  it('finds the common factor against the same endpoint’s successes, and derives a hypothesis and fix from it', async () => {
    const u = await signup(stack.service);
    const settings = await call(stack.service, 'PATCH', '/api/workspace/settings', {
      token: u.session,
      body: { indexedContextKeys: ['customer.tier', 'cart.items'] },
    });
    expect(settings.statusCode).toBe(200);
    const gold = { customer: { tier: 'gold' }, cart: { items: 3 } };
    const failures = Array.from({ length: 8 }, (_, i) =>
      failure({
        endpoint: `/orders/${100 + i}`,
        context: gold,
        durationMs: 2500,
        startedAt: ago(60_000 + i),
      }),
    );
    const successes = Array.from({ length: 25 }, (_, i) =>
      execution({
        endpoint: `/orders/${200 + i}`,
        method: 'POST',
        statusCode: 201,
        durationMs: 40,
        startedAt: ago(120_000 + i),
        context: { customer: { tier: i < 3 ? 'gold' : 'silver' }, cart: { items: i % 5 } },
      }),
    );
    // Other endpoints' successes are not the baseline.
    const elsewhere = Array.from({ length: 10 }, () =>
      execution({ endpoint: '/health', context: gold, startedAt: ago(90_000) }),
    );
    await send(u.testKey, [...failures, ...successes, ...elsewhere]);
    const list = await untilOccurrences(u.session, 8);
    const issue = await getIssue(u.session, list.data[0]!.id);
    const factors = Object.fromEntries(
      issue.commonFactors!.map((f) => [`${f.field}=${JSON.stringify(f.value)}`, f]),
    );
    expect(factors['context.customer.tier="gold"']).toEqual({
      field: 'context.customer.tier',
      value: 'gold',
      issueShare: 1,
      baselineShare: 3 / 25,
    });
    expect(factors['context.cart.items=3']).toMatchObject({ issueShare: 1, baselineShare: 5 / 25 });
    expect(factors['durationBand="1s-5s"']).toMatchObject({ issueShare: 1, baselineShare: 0 });
    expect(factors['statusCode=500']).toMatchObject({ issueShare: 1, baselineShare: 0 });
    // Shared by the failures but as common among successes: not a factor.
    expect(factors['method="POST"']).toBeUndefined();
    expect(factors['environment="production"']).toBeUndefined();
    expect(issue.hypothesis!.facts).toContain(
      'all 8 failures have context.customer.tier = "gold", against 12 % of successes',
    );
    expect(issue.hypothesis!.text).toContain('context.customer.tier');
    expect(issue.suggestedFix!.text).toContain(`issue:${issue.id} context:customer.tier="gold"`);
    expect(issue.representativeExecution).toMatchObject({
      issueId: issue.id,
      executionId: failures[0]!.executionId,
    });
    expect(issue.recentActivity!.map((e) => e.type)).toEqual(['created']);
  });

  it('says when the evidence is thin', async () => {
    const u = await signup(stack.service);
    const issue = await oneIssue(u, { endpoint: '/lonely' });
    const detail = await getIssue(u.session, issue.id);
    expect(detail.hypothesis!.text).toMatch(/^Evidence is thin/);
    expect(detail.hypothesis!.facts).toEqual(
      expect.arrayContaining([
        'thin evidence: only 1 occurrence',
        'thin evidence: no successful executions of POST /lonely to compare with',
      ]),
    );
    expect(detail.suggestedFix!.text).toMatch(/^With evidence this thin/);
    expect(detail.commonFactors!.every((f) => f.issueShare >= 0.5)).toBe(true);
  });
});

describe('counts from stored rows', () => {
  it('a resent failed execution counts twice until its hour is compacted, then once, like the executions list', async () => {
    const u = await signup(stack.service);
    const hourAgo = new Date(Math.floor(Date.now() / 3_600_000) * 3_600_000 - 30 * 60_000).toISOString();
    const ex = failure({ executionId: 'resent-1', startedAt: hourAgo });
    await send(u.testKey, [ex, failure({ executionId: 'resent-2', startedAt: hourAgo })]);
    await send(u.testKey, [ex]); // another request: not a duplicate message
    const before = await untilOccurrences(u.session, 3);
    const id = before.data[0]!.id;
    const listed = async () =>
      json<Page<unknown>>(await get(stack.service, u.testKey, `/api/executions?issueId=${id}`)).total;
    expect(before.data[0]!.occurrences.total).toBe(3);
    expect(await listed()).toBe(3);
    await stack.service.pipeline!.compact();
    const after = await getIssue(u.session, id);
    expect(after.occurrences).toEqual({ total: 2, last24h: 2, last7d: 2 });
    expect(await listed()).toBe(2);
    // Compacting again changes nothing.
    await stack.service.pipeline!.compact();
    expect((await getIssue(u.session, id)).occurrences.total).toBe(2);
  });
});

describe('several writers', () => {
  it('two processes racing to create and regress one issue make one record and one regression', async () => {
    const u = await signup(stack.service);
    const silent = { warn() {} };
    const other = new IssueStore(stack.service.control.store, silent);
    await other.start();
    try {
      const occurrence = (at: number, id: string): IssueOccurrences => ({
        issueId: 'iss_00000000000000aa',
        fingerprintParts: ['x'],
        title: 'Failure in x',
        service: 'x',
        endpoint: 'x',
        method: null,
        failureType: 'unknown',
        exceptionType: null,
        environments: ['production'],
        count: 1,
        firstStartedAt: at,
        lastStartedAt: at,
        lastExecutionId: id,
      });
      const mine = stack.service.control.issues;
      const t = Date.now() - 60_000;
      await Promise.all([
        mine.recordOccurrences(u.workspaceId, 'test', [occurrence(t, 'a')]),
        other.recordOccurrences(u.workspaceId, 'test', [
          { ...occurrence(t - 5, 'b'), environments: ['staging'] },
        ]),
      ]);
      // Both writers' facts end up in the one record, whichever created it (this process's copy follows the
      // other's write through the watch, within milliseconds).
      await eventually(
        () => mine.get(u.workspaceId, 'test', 'iss_00000000000000aa'),
        (r) => r?.firstSeenAt === new Date(t - 5).toISOString() && r.environments.length === 2,
      );
      expect((await mine.get(u.workspaceId, 'test', 'iss_00000000000000aa'))!.environments).toEqual([
        'production',
        'staging',
      ]);
      expect(mine.list(u.workspaceId, 'test')).toHaveLength(1);
      await mine.patch(u.workspaceId, 'test', 'iss_00000000000000aa', { status: 'resolved' }, u.userId);
      const later = Date.now() + 1000;
      await Promise.all([
        mine.recordOccurrences(u.workspaceId, 'test', [occurrence(later, 'c')]),
        other.recordOccurrences(u.workspaceId, 'test', [occurrence(later + 1, 'd')]),
        mine.regressIfLater(u.workspaceId, 'test', 'iss_00000000000000aa', later, 'c'),
      ]);
      const after = (await eventually(
        () => other.get(u.workspaceId, 'test', 'iss_00000000000000aa'),
        (r) => r?.status === 'regressed',
      ))!;
      expect(after.events.filter((e) => e.type === 'regressed')).toHaveLength(1);
    } finally {
      other.stop();
    }
  });
});
