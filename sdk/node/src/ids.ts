import { randomBytes } from 'node:crypto';

/** W3C Trace Context (https://www.w3.org/TR/trace-context/): ids and the `traceparent` header. */

export interface TraceParent {
  traceId: string;
  /** The caller's span: the parent of this execution. */
  parentId: string;
  sampled: boolean;
}

const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(?:-.*)?$/;
const ZEROS = /^0+$/;

/** Random ids drawn from one pool of bytes, refilled when used up (one syscall per 512 ids, not one per id). */
let pool = Buffer.alloc(0);
let at = 0;
function hex(bytes: number): string {
  if (at + bytes > pool.length) {
    pool = randomBytes(4096);
    at = 0;
  }
  const out = pool.toString('hex', at, at + bytes);
  at += bytes;
  return ZEROS.test(out) ? hex(bytes) : out;
}

export const newTraceId = () => hex(16);
export const newSpanId = () => hex(8);

/** A new trace id and span id, from one read of the pool. */
export function newTraceAndSpan(): { traceId: string; spanId: string } {
  const both = hex(24);
  return { traceId: both.slice(0, 32), spanId: both.slice(32) };
}

/** A `traceparent` header's value, or null when it is absent or malformed (then a new trace starts). */
export function parseTraceParent(header: string | string[] | undefined): TraceParent | null {
  const value = Array.isArray(header) ? header[0] : header;
  if (typeof value !== 'string') return null;
  const m = TRACEPARENT.exec(value.trim().toLowerCase());
  if (!m || m[1] === 'ff' || ZEROS.test(m[2]!) || ZEROS.test(m[3]!)) return null;
  // Version 00 has exactly four fields; later versions may add more.
  if (m[1] === '00' && value.trim().length !== 55) return null;
  return { traceId: m[2]!, parentId: m[3]!, sampled: (Number.parseInt(m[4]!, 16) & 1) === 1 };
}

export const formatTraceParent = (traceId: string, spanId: string) => `00-${traceId}-${spanId}-01`;
