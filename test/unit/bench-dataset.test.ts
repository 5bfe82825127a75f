import { describe, expect, it } from 'vitest';
import {
  BENCH_MODE,
  BENCH_WORKSPACE,
  EXCEPTION_KINDS,
  EXCEPTIONS,
  exceptionOf,
  FAILURE_SHARE,
  TrafficGenerator,
} from '../../bench/support/dataset.js';
import { rng } from '../../bench/traffic.js';
import { failureTypeOf, fingerprintParts } from '../../pipeline/fingerprint.js';
import { processPayload } from '../../pipeline/process-payload.js';
import { type IssueOccurrences, mergeOccurrences } from '../../schemas/issues.js';
import type { ExecutionRecord } from '../../schemas/records.js';

const FROM = Date.UTC(2026, 10, 21, 6);

const parse = (json: string | null) => (json === null ? undefined : JSON.parse(json));

/** The SDK item the record stands for: what the pipeline would have received. */
function itemOf(r: ExecutionRecord): Record<string, unknown> {
  return {
    executionId: r.executionId,
    traceId: r.traceId,
    spanId: r.spanId,
    parentSpanId: r.parentSpanId ?? undefined,
    service: r.service,
    environment: r.environment,
    source: r.source,
    endpoint: r.endpoint,
    method: r.method,
    startedAt: r.startedAt,
    durationMs: r.durationMs,
    statusCode: r.statusCode,
    context: parse(r.context),
    request: parse(r.request),
    response: parse(r.response),
    exception: parse(r.exception),
  };
}

const stage = (r: ExecutionRecord) => ({
  executionId: r.executionId,
  outcome: r.outcome,
  outcomeReason: r.outcomeReason,
  failureType: r.failureType,
  fingerprint: r.fingerprint,
  issueId: r.issueId,
  endpointTemplate: r.endpointTemplate,
});

describe('the query benchmark dataset', () => {
  it('gives failed executions the fingerprints, issue ids and issue summaries the pipeline gives them', () => {
    const gen = new TrafficGenerator({ executions: 40_000, hours: 6, seed: 3 }, FROM);
    const fromPipeline = new Map<string, IssueOccurrences>();
    let failed = 0;
    while (!gen.done) {
      const { records, meta } = gen.request();
      const out = processPayload(
        { executions: records.map(itemOf) },
        {
          mode: BENCH_MODE,
          requestId: meta.requestId,
          receivedAt: meta.receivedAt,
          workspaceId: BENCH_WORKSPACE,
        },
      );
      expect(out.rejections).toEqual([]);
      expect(out.executions.map(stage)).toEqual(records.map(stage));
      failed += records.filter((r) => r.issueId !== null).length;
      for (const o of out.issues) {
        const seen = fromPipeline.get(o.issueId);
        if (seen) mergeOccurrences(seen, o);
        else fromPipeline.set(o.issueId, o);
      }
    }
    expect(failed).toBe(gen.failures);
    expect(failed / 40_000).toBeGreaterThan(FAILURE_SHARE * 0.8);
    expect(failed / 40_000).toBeLessThan(FAILURE_SHARE * 1.2);
    const byId = new Map(gen.issues().map((o) => [o.issueId, o]));
    expect(byId).toEqual(fromPipeline);
    // Biggest first.
    const counts = gen.issues().map((o) => o.count);
    expect(counts).toEqual([...counts].sort((a, b) => b - a));
  });

  it('is the same for the same seed', () => {
    const a = new TrafficGenerator({ executions: 2000, hours: 6, seed: 9 }, FROM).request();
    const b = new TrafficGenerator({ executions: 2000, hours: 6, seed: 9 }, FROM).request();
    expect(a).toEqual(b);
  });

  it('has one fingerprint per exception kind of a template, whatever the message varies in', () => {
    const r = rng(1);
    const partsOf = (scope: number, kind: number) => {
      const exception = exceptionOf(scope, '/v1/orders/:id', kind, r);
      const facts = { statusCode: 500, outcomeReason: 'exception', exception };
      const type = failureTypeOf(facts);
      return JSON.stringify(
        fingerprintParts({ ...facts, service: 'orders', template: '/v1/orders/:id', custom: null }, type),
      );
    };
    for (const scope of [0, 1, 37]) {
      const kinds = new Set<string>();
      for (let kind = 0; kind < EXCEPTION_KINDS; kind++) {
        const forms = new Set(Array.from({ length: 300 }, () => partsOf(scope, kind)));
        expect(forms.size).toBe(1);
        kinds.add([...forms][0]!);
      }
      expect(kinds.size).toBe(EXCEPTION_KINDS);
    }
    expect(EXCEPTION_KINDS).toBeLessThanOrEqual(EXCEPTIONS.length * 3);
  });
});
