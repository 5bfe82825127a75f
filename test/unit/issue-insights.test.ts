import { describe, expect, it } from 'vitest';
import { type InsightInput, issueInsights } from '../../query/issue-insights.js';

const base: InsightInput = {
  issueId: 'iss_0123456789abcdef',
  failureType: 'timeout',
  exceptionType: 'TimeoutError',
  fingerprintParts: [
    'checkout',
    '/pay',
    'timeout',
    'TimeoutError',
    'gave up after <num> ms',
    'charge (src/pay.ts)',
  ],
  method: 'POST',
  endpoint: '/pay',
  status: 'open',
  resolvedAt: null,
  regressedAt: null,
  total: 40,
  last24h: 40,
  firstSeenMs: Date.parse('2026-11-20T10:00:00Z'),
  now: Date.parse('2026-11-24T10:00:00Z'),
  evidence: {
    occurrences: 40,
    baseline: 400,
    factors: [{ field: 'context.region', value: 'eu-west-1', issueShare: 0.9, baselineShare: 0.2 }],
    occurrenceMedianMs: 5200,
    baselineMedianMs: 80,
    window: { from: Date.parse('2026-11-17T10:00:00Z'), to: Date.parse('2026-11-24T10:00:00Z') },
  },
};

describe('issue insights', () => {
  it('rests the hypothesis and the fix on the factor, the durations and the failure type', () => {
    const { hypothesis, suggestedFix } = issueInsights(base);
    expect(hypothesis.text).toMatch(/^Calls to POST \/pay run out of time; the failures are 65× slower/);
    expect(hypothesis.text).toContain(
      'tied to context.region = "eu-west-1": 90 % of the failures have it, against 20 %',
    );
    expect(hypothesis.facts).toContain(
      '36 of 40 failures (90 %) have context.region = "eu-west-1", against 20 % of successes',
    );
    expect(hypothesis.facts).toContain('failures took a median of 5.2 s, successes 80 ms');
    expect(hypothesis.text).not.toMatch(/Evidence is thin/);
    expect(suggestedFix.text).toContain('`issue:iss_0123456789abcdef context:region="eu-west-1"`');
    expect(suggestedFix.text).toContain('timeout shorter than the request');
  });

  it('names no factor when there is nothing to compare with, and says the evidence is thin', () => {
    const { hypothesis, suggestedFix } = issueInsights({
      ...base,
      total: 2,
      evidence: {
        ...base.evidence,
        occurrences: 2,
        baseline: 0,
        baselineMedianMs: null,
        factors: [{ field: 'environment', value: 'production', issueShare: 1, baselineShare: 0 }],
      },
    });
    expect(hypothesis.text).toMatch(
      /^Evidence is thin \(only 2 occurrences; no successful executions of POST \/pay/,
    );
    expect(hypothesis.text).not.toContain('tied to');
    expect(suggestedFix.text).not.toContain('Start with');
    expect(suggestedFix.text).toMatch(/^With evidence this thin/);
  });

  it('tells of a regression', () => {
    const { hypothesis } = issueInsights({
      ...base,
      status: 'regressed',
      resolvedAt: '2026-11-22T08:00:00.000Z',
      regressedAt: '2026-11-23T09:30:00.000Z',
    });
    expect(hypothesis.text).toContain(
      'came back on 2026-11-23 09:30 after it was resolved on 2026-11-22 08:00',
    );
  });
});
