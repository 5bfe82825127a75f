import { decodeTime, isValid } from 'ulid';
import { describe, expect, it } from 'vitest';
import { encodeUlid, newUlid } from '../../schemas/ulid.js';

describe('newUlid', () => {
  it('makes valid ULIDs of the time given, or of now', () => {
    const at = Date.UTC(2026, 10, 28, 10, 40, 12, 345);
    const id = newUlid(at);
    expect(isValid(id)).toBe(true);
    expect(decodeTime(id)).toBe(at);
    const before = Date.now();
    const now = newUlid();
    expect(decodeTime(now)).toBeGreaterThanOrEqual(before);
    expect(decodeTime(now)).toBeLessThanOrEqual(Date.now());
  });

  it('gives each id its own random bits, across refills of its pool', () => {
    const at = 1_700_000_000_000;
    // 4 KiB of pool holds 409 ids: 50,000 cross it over a hundred times.
    const ids = Array.from({ length: 50_000 }, () => newUlid(at));
    expect(new Set(ids).size).toBe(ids.length);
    // The random part uses the whole alphabet in every position, not a fixed pattern.
    for (const pos of [10, 17, 18, 25]) expect(new Set(ids.map((id) => id[pos])).size).toBe(32);
    // Its bits are those encodeUlid writes: the same encoding as the derived ids of executions.
    expect(encodeUlid(at, new Uint8Array(10)).slice(0, 10)).toBe(ids[0]!.slice(0, 10));
  });
});
