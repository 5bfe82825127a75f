import { describe, expect, it } from 'vitest';
import { formatTraceParent, newTraceAndSpan, parseTraceParent } from '../src/ids.js';
import { ignoreMatcher, templatePath } from '../src/paths.js';

describe('paths', () => {
  it('templates ids as the service does (CONTRACT §9): digits, UUIDs, hex of 8 or more', () => {
    expect(
      [
        '/hello',
        '/orders/42',
        '/users/12345/cart',
        '/a/deadbeef/b',
        '/a/deadbee',
        '/x/550e8400-e29b-41d4-a716-446655440000/y',
        '/1/2/',
        '/v1/abc123',
      ].map(templatePath),
    ).toEqual([
      '/hello',
      '/orders/:id',
      '/users/:id/cart',
      '/a/:id/b',
      '/a/deadbee',
      '/x/:id/y',
      '/:id/:id/',
      '/v1/abc123',
    ]);
  });

  it('ignores exact paths, globs, regular expressions and functions', () => {
    const ignored = ignoreMatcher([
      '/healthz',
      '/internal/**',
      '/static/*.css',
      /^\/metrics/,
      (p, m) => m === 'OPTIONS' && p === '/x',
    ]);
    expect(
      ['/healthz', '/internal/a/b', '/static/site.css', '/static/a/site.css', '/metrics/x', '/x', '/y'].map(
        (p) => ignored(p, p === '/x' ? 'OPTIONS' : 'GET'),
      ),
    ).toEqual([true, true, true, false, true, true, false]);
    // A rule that throws ignores nothing.
    expect(
      ignoreMatcher([
        () => {
          throw new Error('x');
        },
      ])('/a', 'GET'),
    ).toBe(false);
  });
});

describe('trace context', () => {
  it('reads a W3C traceparent, and refuses malformed ones', () => {
    const { traceId, spanId } = newTraceAndSpan();
    expect(traceId).toMatch(/^[0-9a-f]{32}$/);
    expect(spanId).toMatch(/^[0-9a-f]{16}$/);
    expect(parseTraceParent(formatTraceParent(traceId, spanId))).toEqual({
      traceId,
      parentId: spanId,
      sampled: true,
    });
    for (const bad of [
      undefined,
      'garbage',
      `00-${'0'.repeat(32)}-${spanId}-01`,
      `00-${traceId}-${'0'.repeat(16)}-01`,
      `ff-${traceId}-${spanId}-01`,
      `00-${traceId}-${spanId}-01-extra`,
    ]) {
      expect(parseTraceParent(bad), String(bad)).toBeNull();
    }
    // A later version may carry more fields.
    expect(parseTraceParent(`01-${traceId}-${spanId}-00-more`)).toMatchObject({ traceId, sampled: false });
  });
});
