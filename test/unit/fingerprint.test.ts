import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  endpointTemplate,
  failureTypeOf,
  fingerprintParts,
  issueIdOf,
  issueTitle,
  MAX_NORMALIZED_MESSAGE,
  normalizeMessage,
  type ScanSteps,
  topInAppFrame,
} from '../../pipeline/fingerprint.js';
import { rollupEndpointPattern, templatePattern } from '../../query/issues.js';
import { ISSUE_ID_SHAPE } from '../../schemas/issues.js';

describe('endpoint templates', () => {
  it('replaces numeric, UUID and long hex segments with :id, and drops the query string', () => {
    expect(endpointTemplate('/orders/12')).toBe('/orders/:id');
    expect(endpointTemplate('/orders/99')).toBe('/orders/:id');
    expect(endpointTemplate('/users/550e8400-e29b-41d4-a716-446655440000/cart')).toBe('/users/:id/cart');
    expect(endpointTemplate('/blobs/deadbeef00/raw')).toBe('/blobs/:id/raw');
    expect(endpointTemplate('/a/1/b/2?x=3#f')).toBe('/a/:id/b/:id');
    expect(endpointTemplate('/orders/12/')).toBe('/orders/:id/');
  });

  it('keeps words, short hex, versions and operation names as they are (the same string)', () => {
    for (const e of [
      '/health',
      '/v2/orders',
      '/cafe',
      '/users/me',
      'process-payment',
      '/',
      '/orders/abc123',
    ]) {
      expect(endpointTemplate(e)).toBe(e);
    }
    expect(endpointTemplate('/orders/deadbee')).toBe('/orders/deadbee'); // 7 hex characters
  });
});

describe('message normalization', () => {
  it('makes differently-numbered but same-shaped messages equal', () => {
    expect(normalizeMessage('order 123 not found')).toBe('order <num> not found');
    expect(normalizeMessage('order 456 not found')).toBe(normalizeMessage('order 123 not found'));
    expect(normalizeMessage('user bob@example.com has no cart')).toBe('user <email> has no cart');
    expect(normalizeMessage('row 550e8400-e29b-41d4-a716-446655440000 locked')).toBe('row <uuid> locked');
    expect(normalizeMessage('commit 9fceb02d0ae598e9 missing')).toBe('commit <hex> missing');
    expect(normalizeMessage('key "abc" and \'x y\' and `z`')).toBe('key <str> and <str> and <str>');
    expect(normalizeMessage('took 12.5ms on port 8080')).toBe('took <num>.<num>ms on port <num>');
    expect(normalizeMessage('retry v2 failed')).toBe('retry v<num> failed');
  });

  it('leaves apostrophes and unclosed quotes alone', () => {
    expect(normalizeMessage("can't read property 'id' of undefined")).toBe(
      "can't read property <str> of undefined",
    );
    expect(normalizeMessage('unterminated "quote here')).toBe('unterminated "quote here');
  });

  it('is cut to its maximum length', () => {
    expect(normalizeMessage('word '.repeat(1000)).length).toBe(MAX_NORMALIZED_MESSAGE);
  });

  it('does a bounded amount of work per character, whatever the 8 KiB message', () => {
    // Adversarial shapes for regex engines and for quote matching: each character may be looked at a fixed
    // number of times, never once per earlier character.
    const inputs = [
      'a'.repeat(8192),
      '1'.repeat(8192),
      '"'.repeat(8192),
      "'a".repeat(4096),
      ' "x'.repeat(2730),
      'a@'.repeat(4096),
      'a@b.'.repeat(2048),
      '0-'.repeat(4096),
      'deadbeef-'.repeat(910),
      `${'a'.repeat(8190)}"!`,
      '`'.repeat(4096) + "'".repeat(4096),
      'x"y'.repeat(2730),
    ];
    for (const input of inputs) {
      const count: ScanSteps = { steps: 0 };
      normalizeMessage(input, count);
      expect(count.steps, input.slice(0, 12)).toBeLessThanOrEqual(40 * input.length);
    }
  });

  it('is linear on random strings of its alphabet too', () => {
    fc.assert(
      fc.property(
        fc.array(fc.constantFrom('a', '1', 'f', '"', "'", '`', '@', '.', '-', ' ', '_'), {
          minLength: 1,
          maxLength: 2000,
        }),
        (chars) => {
          const s = chars.join('');
          const count: ScanSteps = { steps: 0 };
          normalizeMessage(s, count);
          return count.steps <= 40 * s.length;
        },
      ),
      { numRuns: 300, seed: 12 },
    );
  });

  it('templates endpoints in bounded work too', () => {
    for (const e of [
      '/1'.repeat(4096),
      `/${'a'.repeat(8000)}`,
      '/'.repeat(8192),
      `/${'0'.repeat(36)}`.repeat(200),
    ]) {
      const count: ScanSteps = { steps: 0 };
      endpointTemplate(e, count);
      expect(count.steps).toBeLessThanOrEqual(40 * e.length);
    }
  });
});

describe('top in-app frame', () => {
  it('takes the first frame marked in-app, without line numbers', () => {
    expect(
      topInAppFrame({
        frames: [
          { function: 'query', file: '/app/node_modules/pg/lib/client.js', inApp: false },
          { function: 'loadOrder', file: '/srv/app/src/orders.js', inApp: true },
        ],
      }),
    ).toBe('loadOrder (src/orders.js)');
    expect(topInAppFrame({ frames: [{ function: 'x', file: 'a.js', inApp: false }] })).toBe('');
  });

  it('reads a V8 stack when no frames were sent, skipping node_modules and Node internals', () => {
    const stack = [
      "TypeError: Cannot read properties of undefined (reading 'id')",
      '    at Object.get (node:internal/whatever:10:3)',
      '    at Layer.handle (/app/node_modules/express/lib/router/layer.js:95:5)',
      '    at async loadOrder (/srv/release-41/src/orders.ts:42:11)',
      '    at /srv/release-41/src/server.ts:9:1',
    ].join('\n');
    expect(topInAppFrame({ stack })).toBe('loadOrder (src/orders.ts)');
    expect(
      topInAppFrame({ stack: stack.replace('release-41', 'release-42').replace(':42:11', ':57:3') }),
    ).toBe('loadOrder (src/orders.ts)');
    expect(topInAppFrame({ stack: 'Error: boom' })).toBe('');
  });
});

describe('failure types', () => {
  const f = (over: Partial<Parameters<typeof failureTypeOf>[0]>) =>
    failureTypeOf({ statusCode: null, outcomeReason: 'sdk', exception: null, ...over });

  it('takes the first that applies, in the contract order', () => {
    expect(f({ statusCode: 504 })).toBe('timeout');
    expect(f({ statusCode: 408 })).toBe('timeout');
    expect(f({ exception: { type: 'TimeoutError', message: 'x' }, statusCode: 500 })).toBe('timeout');
    expect(f({ exception: { type: 'Error', message: 'connect ETIMEDOUT 10.0.0.1:443' } })).toBe('timeout');
    expect(f({ exception: { type: 'TypeError', message: 'x' }, statusCode: 500 })).toBe('exception');
    expect(f({ statusCode: 503 })).toBe('http_5xx');
    expect(f({ statusCode: 404 })).toBe('http_4xx');
    expect(f({ statusCode: 200, outcomeReason: 'field:response.success' })).toBe('response_error');
    expect(f({ outcomeReason: 'evidence:payment' })).toBe('response_error');
    expect(f({ outcomeReason: 'rule:0' })).toBe('response_error');
    expect(f({})).toBe('unknown');
  });
});

describe('fingerprint parts and issue ids', () => {
  const base = {
    statusCode: 500,
    outcomeReason: 'exception',
    service: 'checkout',
    template: '/orders/:id',
    exception: { type: 'NotFoundError', message: 'order 123 not found', stack: null, frames: null },
    custom: null,
  };

  it('defaults to service, template, failure type, exception type, normalized message and frame', () => {
    expect(fingerprintParts(base, 'exception')).toEqual([
      'checkout',
      '/orders/:id',
      'exception',
      'NotFoundError',
      'order <num> not found',
      '',
    ]);
  });

  it('expands {{default}} in place in a custom fingerprint', () => {
    expect(fingerprintParts({ ...base, custom: ['payments', '{{default}}', 'x'] }, 'exception')).toEqual([
      'payments',
      'checkout',
      '/orders/:id',
      'exception',
      'NotFoundError',
      'order <num> not found',
      '',
      'x',
    ]);
    expect(fingerprintParts({ ...base, custom: ['card-declined'] }, 'exception')).toEqual(['card-declined']);
  });

  it('makes one id per (workspace, mode, parts)', () => {
    const a = issueIdOf('ws_a', 'test', ['x', 'y']);
    expect(a).toMatch(ISSUE_ID_SHAPE);
    expect(issueIdOf('ws_a', 'test', ['x', 'y'])).toBe(a);
    expect(issueIdOf('ws_b', 'test', ['x', 'y'])).not.toBe(a);
    expect(issueIdOf('ws_a', 'live', ['x', 'y'])).not.toBe(a);
    expect(issueIdOf('ws_a', 'test', ['x', 'y', ''])).not.toBe(a);
    expect(issueIdOf('ws_a', 'test', ['x,y'])).not.toBe(a);
  });

  it('titles an issue by its exception type, else its failure type', () => {
    expect(issueTitle('TimeoutError', 'timeout', 'POST', '/orders/:id')).toBe(
      'TimeoutError in POST /orders/:id',
    );
    expect(issueTitle(null, 'http_5xx', 'GET', '/health')).toBe('HTTP 5xx in GET /health');
    expect(issueTitle(null, 'unknown', null, 'nightly-job')).toBe('Failure in nightly-job');
  });
});

describe('the endpoints of a template (the common factors’ baseline)', () => {
  const matches = (template: string, endpoint: string) => {
    const { prefix, regex } = templatePattern(template);
    return endpoint.startsWith(prefix) && new RegExp(`^(?:${regex})$`).test(endpoint);
  };

  it('matches exactly the endpoints the pipeline templates that way', () => {
    const endpoints = [
      '/orders/12',
      '/orders/99?expand=items',
      '/orders/550e8400-e29b-41d4-a716-446655440000',
      '/orders/deadbeef01',
      '/orders/new',
      '/orders/12/items',
      '/orders',
      '/orders.v2/12',
      '/api/v1/resource-3/12345',
      '/api/v1/resource-33/12345',
    ];
    for (const template of [
      '/orders/:id',
      '/orders/:id/items',
      '/api/v1/resource-3/:id',
      '/orders',
      '/orders.v2/:id',
    ]) {
      for (const e of endpoints)
        expect(matches(template, e), `${template} ~ ${e}`).toBe(endpointTemplate(e) === template);
    }
  });

  it('takes any one segment for a framework route parameter', () => {
    expect(matches('/users/:userId/orders', '/users/me/orders')).toBe(true);
    expect(matches('/users/:userId/orders', '/users/me/x/orders')).toBe(false);
    expect(matches('/a+b/(c)', '/a+b/(c)')).toBe(true);
    expect(matches('/a+b/(c)', '/aab/c')).toBe(false);
  });

  it('takes a literal id segment of a route for any id, as the rollups keep endpoints templated', () => {
    expect(matches('/v1/2024/report', '/v1/2024/report')).toBe(true);
    expect(matches('/v1/2024/report', '/v1/2025/report')).toBe(true);
    expect(matches('/v1/2024/report', '/v1/abc/report')).toBe(false);
    expect(templatePattern('/v1/2024/report').literal).toBe(false);
    expect(templatePattern('/v1/report').literal).toBe(true);
  });

  it('finds in the rollups the templated endpoints that the scan finds as sent', () => {
    const inRollup = (template: string, key: string) => {
      const p = rollupEndpointPattern(template);
      if ('exact' in p) return key === p.exact;
      return key.startsWith(p.prefix) && new RegExp(`^(?:${p.regex})$`).test(key);
    };
    const endpoints = [
      '/orders/12',
      '/orders/99?expand=items',
      '/orders/deadbeef01/items',
      '/orders/new',
      '/users/me/orders',
      '/users/42/orders',
      '/users/me/x/orders',
      '/v1/2024/report',
      '/v1/7/report',
      '/v1/abc/report',
    ];
    for (const template of [
      '/orders/:id',
      '/orders/:id/items',
      '/orders/new',
      '/users/:userId/orders',
      '/v1/2024/report',
    ]) {
      for (const e of endpoints)
        expect(inRollup(template, endpointTemplate(e)), `${template} ~ ${e}`).toBe(matches(template, e));
    }
    expect(rollupEndpointPattern('/v1/2024/report')).toEqual({ exact: '/v1/:id/report' });
  });
});
