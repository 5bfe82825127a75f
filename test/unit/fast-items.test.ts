import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { buildTemplate, stampBody } from '../../bench/traffic.js';
import {
  FAST_PATH,
  type FastPath,
  fastExecutionItem,
  fastLogItem,
  fastMetricPoint,
  ZOD_ONLY,
} from '../../pipeline/fast-items.js';
import { compileOutcomeRules } from '../../pipeline/outcome-rules.js';
import { type ProcessContext, processPayload } from '../../pipeline/process-payload.js';
import { executionItemSchema, logItemSchema, metricPointSchema } from '../../schemas/ingest-items.js';
import {
  canonical,
  clone,
  execution,
  expectSame,
  log,
  metric,
  type Obj,
  payload,
} from '../support/ingest-arbitraries.js';

/*
 * The fast path must agree with the zod schemas: on every generated item it answers either "not handled"
 * (undefined) or exactly zod's output, and never where zod refuses. The items are valid ones of every shape
 * and near-valid ones with one thing wrong (test/support/ingest-arbitraries.ts).
 */

// ---- the properties ----

interface Tally {
  fast: number;
  fellBack: number;
  refused: number;
}

/** Runs both on their own copies; returns which answered. */
function agree<T>(
  fast: (raw: Obj) => T | undefined,
  schema: { safeParse(v: unknown): unknown },
  item: Obj,
  tally: Tally,
): void {
  const before = canonical(item);
  const got = fast(item);
  // The input is left as it was.
  expect(canonical(item)).toBe(before);
  const want = schema.safeParse(clone(item)) as { success: boolean; data?: unknown };
  if (got === undefined) {
    if (want.success) tally.fellBack++;
    else tally.refused++;
    return;
  }
  expect(want.success).toBe(true);
  expectSame(got, want.data);
  tally.fast++;
}

const RUNS = 1500;

describe('fast path agrees with the zod schemas', () => {
  it.each([
    ['executions', fastExecutionItem, executionItemSchema, execution.any],
    ['logs', fastLogItem, logItemSchema, log.any],
    ['metrics', fastMetricPoint, metricPointSchema, metric],
  ] as const)('%s', (_kind, fast, schema, items) => {
    const tally: Tally = { fast: 0, fellBack: 0, refused: 0 };
    fc.assert(
      fc.property(items as fc.Arbitrary<Obj>, (item) =>
        agree(fast as (raw: Obj) => unknown, schema, item, tally),
      ),
      { numRuns: RUNS },
    );
    // Not vacuous: the generators make valid items the fast path takes, and invalid ones.
    expect(tally.fast).toBeGreaterThan(RUNS / 10);
    expect(tally.refused).toBeGreaterThan(RUNS / 10);
  });
});

const CTX: ProcessContext = {
  mode: 'test',
  requestId: 'req_fast',
  receivedAt: Date.UTC(2026, 10, 21, 10, 5),
};

const RULES = compileOutcomeRules([
  { match: { method: 'POST' }, outcome: 'failed' },
  { match: { field: { path: 'ok', equals: false } }, outcome: 'failed' },
  { match: { exceptionType: 'x', statusCodes: '200-299' }, outcome: 'success' },
] as never);

function counting(fast: FastPath): { fastPath: FastPath; fellBack: () => number } {
  let fellBack = 0;
  const wrap =
    <T>(f: (raw: Obj) => T | undefined) =>
    (raw: Obj) => {
      const out = f(raw);
      if (out === undefined) fellBack++;
      return out;
    };
  return {
    fastPath: { execution: wrap(fast.execution), log: wrap(fast.log), metric: wrap(fast.metric) },
    fellBack: () => fellBack,
  };
}

describe('processPayload with and without the fast path', () => {
  it('gives the same records and rejections for generated payloads', () => {
    fc.assert(
      fc.property(payload, fc.boolean(), (body, withRules) => {
        // As the worker sees it: a freshly parsed body for each run, since processing fills defaults in.
        const text = JSON.stringify(body);
        const options = withRules ? { classifyRules: RULES } : {};
        const fast = processPayload(JSON.parse(text), CTX, options);
        const zod = processPayload(JSON.parse(text), CTX, { ...options, fastPath: ZOD_ONLY });
        expectSame(fast, zod);
      }),
      { numRuns: 400 },
    );
  });

  it('takes every item of the benchmark bodies on the fast path', () => {
    for (const seed of [1, 2, 3]) {
      const text = stampBody(buildTemplate(seed, 'x', 500), seed).toString('utf8');
      const { fastPath, fellBack } = counting(FAST_PATH);
      const fast = processPayload(JSON.parse(text), CTX, { fastPath });
      expect(fast.rejections).toEqual([]);
      expect(fast.executions).toHaveLength(500);
      expect(fast.logs.length).toBeGreaterThan(500);
      expect(fellBack()).toBe(0);
      expectSame(fast, processPayload(JSON.parse(text), CTX, { fastPath: ZOD_ONLY }));
    }
  });
});
