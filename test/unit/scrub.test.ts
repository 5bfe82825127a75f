import { describe, expect, it } from 'vitest';
import {
  MAX_STRING_LENGTH,
  REDACTED,
  redactServiceKeys,
  type ScrubState,
  scrubHeaders,
  scrubString,
  scrubTree,
} from '../../pipeline/scrub.js';

const KEY = 'svc_live_AbCdEfGhIjKlMnOpQrStUvWxYz012345';
const fresh = (): ScrubState => ({ truncated: false });

describe('scrubTree', () => {
  it('returns the very same objects when there is nothing to scrub', () => {
    const value = { a: { b: ['x', 1, null] }, c: true, d: 'plain text' };
    const state = fresh();
    expect(scrubTree(value, true, state)).toBe(value);
    expect(state.truncated).toBe(false);
  });

  it('copies only the path to a change, sharing untouched branches', () => {
    const untouched = { y: 'fine' };
    const value = { keep: untouched, change: { note: `key ${KEY}` } };
    const out = scrubTree(value, false, fresh());
    expect(out).not.toBe(value);
    expect(out.keep).toBe(untouched);
    expect(out.change).toEqual({ note: `key ${REDACTED}` });
    expect(value.change.note).toBe(`key ${KEY}`);
  });

  it('keeps key order when a key itself is scrubbed', () => {
    const out = scrubTree({ a: 1, [KEY]: 2, z: 3 }, false, fresh());
    expect(Object.keys(out)).toEqual(['a', REDACTED, 'z']);
  });

  it('redacts by key only when asked', () => {
    const value = { token: 't', nested: { Cookie: { a: 1 } } };
    expect(scrubTree(value, false, fresh())).toBe(value);
    expect(scrubTree(value, true, fresh())).toEqual({ token: REDACTED, nested: { Cookie: REDACTED } });
  });

  it('keeps an own "__proto__" key as a field, never as a prototype', () => {
    const value = JSON.parse(
      '{"__proto__": {"password": "x"}, "note": "svc_test_abcdefghijklmnop"}',
    ) as Record<string, unknown>;
    const out = scrubTree(value, true, fresh());
    expect(Object.getPrototypeOf(out)).toBe(Object.prototype);
    expect(JSON.stringify(out)).toBe('{"__proto__":{"password":"[redacted]"},"note":"[redacted]"}');
  });

  it('scrubs inside arrays', () => {
    const out = scrubTree({ list: ['a', KEY, { apiKey: 'k' }] }, true, fresh());
    expect(out).toEqual({ list: ['a', REDACTED, { apiKey: REDACTED }] });
  });
});

describe('scrubString', () => {
  it('replaces every service key or session token in a string', () => {
    expect(redactServiceKeys(`a ${KEY} b svc_test_x1234567890123456 c svc_sess_Y2345678901234567`)).toBe(
      `a ${REDACTED} b ${REDACTED} c ${REDACTED}`,
    );
    // Ordinary names that merely start like a key (a metric svc_live_requests) are left alone.
    expect(redactServiceKeys('svc_prod_abc svc_test_ svc_live svc_live_requests_total')).toBe(
      'svc_prod_abc svc_test_ svc_live svc_live_requests_total',
    );
  });

  it('truncates after redacting, so a key never survives in part', () => {
    const state = fresh();
    const text = `${'a'.repeat(MAX_STRING_LENGTH - 5)}${KEY}`;
    expect(scrubString(text, state)).toBe(`${'a'.repeat(MAX_STRING_LENGTH - 5)}[reda`);
    expect(state.truncated).toBe(true);
  });
});

describe('scrubHeaders', () => {
  it('drops credential headers whatever their case and returns the same object when none', () => {
    const plain = { accept: '*/*' };
    expect(scrubHeaders(plain, fresh())).toBe(plain);
    const out = scrubHeaders(
      { accept: '*/*', AUTHORIZATION: 'x', 'Set-Cookie': ['a'], 'x-api-key': 'k', 'X-Request-Id': 'r' },
      fresh(),
    );
    expect(out).toEqual({ accept: '*/*', 'X-Request-Id': 'r' });
  });
});
