import crypto from 'node:crypto';

const BASE62 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';

/** `prefix` + 32 base62 characters from a CSPRNG, without modulo bias (keys and session tokens). */
export function generateSecret(prefix: string): string {
  let out = '';
  while (out.length < 32) {
    for (const byte of crypto.randomBytes(48)) {
      if (byte < 248 && out.length < 32) out += BASE62[byte % 62];
    }
  }
  return prefix + out;
}

/** Secrets are stored and looked up only by this hash. */
export const sha256Hex = (text: string) => crypto.createHash('sha256').update(text).digest('hex');

export const newId = (prefix: string) => `${prefix}_${crypto.randomBytes(8).toString('hex')}`;
