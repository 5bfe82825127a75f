import { describe, expect, it } from 'vitest';
import {
  contextSchema,
  executionItemSchema,
  logItemSchema,
  metricPointSchema,
  parseRfc3339,
  resourceSchema,
  responseFieldsSchema,
  sdkSchema,
} from '../../schemas/ingest-items.js';

describe('parseRfc3339', () => {
  it.each([
    ['2026-11-21T10:00:00Z', Date.UTC(2026, 10, 21, 10)],
    ['2026-11-21t10:00:00.5z', Date.UTC(2026, 10, 21, 10, 0, 0, 500)],
    ['2026-11-21T10:00:00.12+01:00', Date.UTC(2026, 10, 21, 9, 0, 0, 120)],
    ['2024-02-29T23:59:59.999-00:30', Date.UTC(2024, 2, 1, 0, 29, 59, 999)],
    ['1970-01-01T00:00:00Z', 0],
  ])('reads %s', (text, ms) => {
    expect(parseRfc3339(text)).toBe(ms);
  });

  it.each([
    '2026-11-21T10:00:00',
    '2026-11-21 10:00:00Z',
    '2026-11-31T10:00:00Z',
    '2026-11-21T24:00:00Z',
    '2026-11-21T10:00:00+24:00',
    '2026-11-21T10:00Z',
    '0075-01-01T00:00:00Z',
  ])('refuses %s', (text) => {
    expect(parseRfc3339(text)).toBeNull();
  });
});

describe('executionItemSchema', () => {
  const base = { service: 's', endpoint: '/e', startedAt: 0, durationMs: 1 };

  it('settles the duration alias, upper-cases the method and strips unknown fields', () => {
    const item = executionItemSchema.parse({
      ...base,
      durationMs: undefined,
      duration: 7,
      method: 'patch',
      x: 1,
    });
    expect(item.durationMs).toBe(7);
    expect(item.method).toBe('PATCH');
    expect('x' in item).toBe(false);
    expect(item.source).toBe('http');
    expect(item.environment).toBe('default');
  });

  it('treats null optional fields as absent', () => {
    const item = executionItemSchema.parse({ ...base, traceId: null, environment: null, source: null });
    expect([item.traceId, item.environment, item.source]).toEqual([null, 'default', 'http']);
  });
});

describe('contextSchema and responseFieldsSchema', () => {
  it('returns the context itself (no copy) when valid', () => {
    const context = { a: { b: 1 } };
    expect(contextSchema.parse(context)).toBe(context);
  });

  it('rejects non-finite numbers', () => {
    expect(contextSchema.safeParse({ a: Number.NaN }).error?.issues[0]?.path).toEqual(['a']);
  });

  it('flattens nested fields to dotted paths in key order', () => {
    expect(responseFieldsSchema.parse({ z: 1, a: { b: { c: 'x' }, d: null }, 'e.f': true })).toEqual({
      z: 1,
      'a.b.c': 'x',
      'a.d': null,
      'e.f': true,
    });
  });

  it('rejects arrays and too deep nesting in fields, with the path', () => {
    expect(responseFieldsSchema.safeParse({ a: { list: [1] } }).error?.issues[0]?.path).toEqual([
      'a',
      'list',
    ]);
    let deep: Record<string, unknown> = { x: 1 };
    for (let i = 0; i < 8; i++) deep = { n: deep };
    expect(responseFieldsSchema.safeParse(deep).success).toBe(false);
  });
});

describe('logItemSchema and metricPointSchema', () => {
  it('lower-cases the level', () => {
    expect(logItemSchema.parse({ timestamp: 0, level: 'FATAL', message: '', service: 's' }).level).toBe(
      'fatal',
    );
  });

  it('bounds log attributes to 16 levels', () => {
    let deep: Record<string, unknown> = { x: 1 };
    for (let i = 0; i < 16; i++) deep = { n: deep };
    const log = { timestamp: 0, level: 'info', message: '', service: 's' };
    expect(logItemSchema.safeParse({ ...log, attributes: deep }).error?.issues[0]?.path).toEqual([
      'attributes',
    ]);
    expect(logItemSchema.safeParse({ ...log, attributes: deep.n }).success).toBe(true);
  });

  it('narrows the value type by metric type', () => {
    const point = metricPointSchema.parse({
      name: 'h',
      type: 'histogram',
      value: { count: 1, sum: 2, min: 2, max: 2 },
      timestamp: 0,
      service: 's',
    });
    expect(point.type === 'histogram' ? point.value.sum : null).toBe(2);
  });
});

describe('resourceSchema and sdkSchema', () => {
  it('accept the envelope parts and strip the rest', () => {
    expect(resourceSchema.parse({ service: 'a', environment: 'b', mode: 'live', extra: 1 })).toEqual({
      service: 'a',
      environment: 'b',
      mode: 'live',
    });
    expect(resourceSchema.safeParse({ mode: 'prod' }).success).toBe(false);
    expect(sdkSchema.parse({ name: 'svc-node', version: '0.3.1' })).toEqual({
      name: 'svc-node',
      version: '0.3.1',
    });
  });
});
