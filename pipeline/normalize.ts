import { hash } from 'node:crypto';

/** Crockford base32, the ULID alphabet (no I, L, O, U). */
const CROCKFORD = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';
const TWO_POW_32 = 0x1_0000_0000;

/**
 * A ULID that is a pure function of its inputs: the 48-bit time part is `timeMs` (the execution's start),
 * the 80 "random" bits are the first 10 bytes of sha256(`${requestId}:${index}`). A redelivered or
 * reprocessed request therefore gets the same ids, and a row is never stored twice under two ids.
 * `timeMs` must be a whole number in [0, 2^48).
 */
export function deterministicUlid(timeMs: number, requestId: string, index: number): string {
  const chars = new Array<string>(26);
  let time = timeMs;
  for (let i = 9; i >= 0; i--) {
    const digit = time % 32;
    chars[i] = CROCKFORD[digit]!;
    time = (time - digit) / 32;
  }
  const digest = hash('sha256', `${requestId}:${index}`, 'buffer');
  // 80 bits as two 40-bit halves, each exact in a double, each 8 base32 digits.
  for (let half = 0; half < 2; half++) {
    const offset = half * 5;
    let bits = digest[offset]! * TWO_POW_32 + digest.readUInt32BE(offset + 1);
    for (let i = 7; i >= 0; i--) {
      const digit = bits % 32;
      chars[10 + half * 8 + i] = CROCKFORD[digit]!;
      bits = (bits - digit) / 32;
    }
  }
  return chars.join('');
}

export interface ResourceDefaults {
  service?: unknown;
  environment?: unknown;
  mode?: unknown;
}

/**
 * Fills `service`, `environment` and `mode` from the envelope's resource where the item omits them (absent
 * or null), in place: the item belongs to a freshly parsed body, and copying every item cost about a third
 * of the pipeline's throughput. Filling is idempotent, so processing the same body again gives the same
 * records. Resource values are copied as sent: a bad one then fails the item's own validation, under the
 * item's field name.
 */
export function fillResourceDefaults(
  item: Record<string, unknown>,
  resource: ResourceDefaults | undefined,
): void {
  if (resource === undefined) return;
  if (item.service == null && resource.service != null) item.service = resource.service;
  if (item.environment == null && resource.environment != null) item.environment = resource.environment;
  if (item.mode == null && resource.mode != null) item.mode = resource.mode;
}
