import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createTenant,
  eventually,
  execution,
  get,
  ingest,
  json,
  startStack,
  type TestStack,
  type TestTenant,
} from '../support/env.js';

type ListAnswer = {
  data: { executionId: string; durationMs: number; startedAt: string }[];
  total: number;
};

let stack: TestStack;
let tenant: TestTenant;
const service = `paging-${Date.now()}`;
const base = Date.now() - 10 * 60_000;
// Many ties on both sort keys, so the execution_id tie-break decides most of the order, and two requests, so the
// rows are spread over two files.
const items = Array.from({ length: 60 }, (_, i) =>
  execution({ service, startedAt: base + (i % 4) * 1000, durationMs: [5, 7.5, 10][i % 3] }),
);

beforeAll(async () => {
  stack = await startStack('paging');
  tenant = await createTenant(stack.service);
  for (const executions of [items.slice(0, 25), items.slice(25)]) {
    expect((await ingest(stack.service, tenant.keys.test!, { executions })).statusCode).toBe(202);
  }
  await eventually(
    () => list(`?serviceName=${service}&pageSize=1`),
    (l) => l.total === items.length,
  );
});
afterAll(async () => {
  await stack?.close();
});

const list = async (query: string) => {
  const res = await get(stack.service, tenant.keys.test!, `/api/executions${query}`);
  expect(res.statusCode, res.body).toBe(200);
  return json<ListAnswer>(res);
};

type Item = (typeof items)[number];
// Ids are ASCII: JavaScript's string order is DuckDB's.
const byId = (a: Item, b: Item) =>
  a.executionId! < b.executionId! ? -1 : a.executionId! > b.executionId! ? 1 : 0;
const ORDERS: Record<string, (a: Item, b: Item) => number> = {
  '-startedAt': (a, b) => (b.startedAt as number) - (a.startedAt as number) || -byId(a, b),
  startedAt: (a, b) => (a.startedAt as number) - (b.startedAt as number) || byId(a, b),
  '-durationMs': (a, b) => (b.durationMs as number) - (a.durationMs as number) || -byId(a, b),
  durationMs: (a, b) => (a.durationMs as number) - (b.durationMs as number) || byId(a, b),
};

describe('executions list paging', () => {
  it.each(Object.keys(ORDERS))(
    'pages sorted by %s are the full sort, cut in pages, with ties',
    async (sort) => {
      const expected = [...items].sort(ORDERS[sort]).map((e) => e.executionId);
      const seen: string[] = [];
      // 60 rows in pages of 7: eight full pages, a partial one, then an empty one past the end.
      for (let page = 1; page <= 10; page++) {
        const answer = await list(`?serviceName=${service}&sort=${sort}&pageSize=7&page=${page}`);
        expect(answer.total).toBe(items.length);
        expect(answer.data.length).toBe(Math.max(0, Math.min(7, items.length - (page - 1) * 7)));
        seen.push(...answer.data.map((e) => e.executionId));
      }
      expect(seen).toEqual(expected);
    },
  );
});

describe('executions list paging, far from now', () => {
  it('keeps a start in the year 5000 with an odd millisecond (the bound is exact)', async () => {
    const far = Date.UTC(5000, 0, 1, 0, 0, 0, 1);
    const farService = `${service}-far`;
    const ex = execution({ service: farService, startedAt: far });
    expect((await ingest(stack.service, tenant.keys.test!, { executions: [ex] })).statusCode).toBe(202);
    for (const sort of ['startedAt', '-startedAt']) {
      const answer = await eventually(
        () => list(`?serviceName=${farService}&sort=${sort}&from=0&to=${far + 1}`),
        (l) => l.total === 1,
      );
      expect(answer.data.map((e) => e.executionId)).toEqual([ex.executionId]);
    }
  });
});
