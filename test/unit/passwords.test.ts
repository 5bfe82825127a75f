import { describe, expect, it } from 'vitest';
import { hashPassword, verifyPassword } from '../../control/passwords.js';

describe('passwords', () => {
  it('are stored with scrypt and a salt of their own, and verified', async () => {
    const a = await hashPassword('correct horse battery');
    const b = await hashPassword('correct horse battery');
    expect(a).toMatch(/^scrypt\$16384\$8\$1\$[0-9a-f]{32}\$[0-9a-f]{64}$/);
    expect(a).not.toBe(b); // per-user salt: equal passwords never look equal
    expect(a).not.toContain('correct horse');
    expect(await verifyPassword('correct horse battery', a)).toBe(true);
    expect(await verifyPassword('correct horse batterY', a)).toBe(false);
    // An unknown user is checked against a dummy hash (same work), and always fails.
    expect(await verifyPassword('correct horse battery', null)).toBe(false);
  });
});
