import { hash } from 'node:crypto';
import { encodeUlid } from '../schemas/ulid.js';

/**
 * A ULID that is a pure function of its inputs: the 48-bit time part is `timeMs` (the execution's start),
 * the 80 "random" bits are the first 10 bytes of sha256(`${requestId}:${index}`). A redelivered or
 * reprocessed request therefore gets the same ids, and a row is never stored twice under two ids.
 * `timeMs` must be a whole number in [0, 2^48).
 */
export function deterministicUlid(timeMs: number, requestId: string, index: number): string {
  return encodeUlid(timeMs, hash('sha256', `${requestId}:${index}`, 'buffer'));
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
