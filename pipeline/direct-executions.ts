import {
  EXECUTION_ID_RE,
  epochMsOf,
  INGEST_ITEM_LIMITS,
  INGEST_STRING_LIMITS,
} from '../schemas/ingest-items.js';
import {
  EXECUTION_SOURCES,
  type ExecutionRecord,
  type ExecutionSource,
  LOG_LEVELS,
  type LogLevel,
  type LogRecord,
  type Mode,
  type Outcome,
} from '../schemas/records.js';
import { MAX_INDEXED_STRING } from '../storage/context-columns.js';
import { classifyByEvidence } from './classify.js';
import { deterministicUlid, type ResourceDefaults } from './normalize.js';
import { MAX_STRING_LENGTH, SENSITIVE_KEY_WORDS } from './scrub.js';

/**
 * The direct lane: the execution items of an /api/ingest body read straight from its bytes into records, for
 * the common shapes, without JSON.parse's objects, the fast path's copies, the scrubbing walks or JSON.stringify
 * of the stored JSON fields. Everything it does not take it declines, item by item: the item is then parsed
 * and processed as before (pipeline/process-payload.ts), which is never wrong, only slower. So the lane only
 * has to be exact for what it takes:
 *
 * - an item it takes gives the record (and inline log records) that JSON.parse, the fast path of
 *   pipeline/fast-items.ts (or zod), the scrub and the classification give for the same bytes;
 * - it takes an item only when no scrubbing would change it (no `svc_` anywhere, no string over
 *   MAX_STRING_LENGTH, no sensitive key in request headers, query or context), the workspace has no outcome
 *   rules (the caller's choice, ingest-body.ts), request, context, exception and inline logs are of the plain
 *   shapes below, and response, outcomeEvidence and fingerprint are absent or null. A failed one is classified
 *   here and its fingerprint stage run by the caller (`failure`);
 * - request, context and exception are stored as the item's own bytes (UTF-8 decoded), which must then be
 *   exactly what JSON.stringify of the parsed value writes: no whitespace, escapes only as it writes them, keys
 *   plain ASCII, unique and in an order an object keeps (no integer-like keys), numbers as JavaScript writes
 *   them; request's and exception's keys in the schema's order.
 *
 * test/unit/direct-executions.test.ts checks the agreement on generated bodies, each written out in many
 * equivalent spellings (whitespace, escapes, number forms), byte for byte on the column chunks.
 */

/** The record of an execution the lane took: `indexedContext` holds its indexed-context cells. */
export type DirectRecord = ExecutionRecord & { indexedContext: (string | number | boolean | null)[] };

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COMMA = 0x2c;
const COLON = 0x3a;
const OPEN_OBJECT = 0x7b;
const CLOSE_OBJECT = 0x7d;
const OPEN_ARRAY = 0x5b;
const CLOSE_ARRAY = 0x5d;
const MINUS = 0x2d;
const DOT = 0x2e;
const ZERO = 0x30;
const NINE = 0x39;

/** A string's flags (Reader.flags). */
const ESCAPED = 1;
const NON_ASCII = 2;
/** Holds `svc_`, which the scrub would look at. */
const SERVICE_KEY = 4;
/** Holds an escape JSON.stringify would not write (`\/`, `\u0041`…): the decoded string is written otherwise. */
const ODD_ESCAPE = 8;

/** Control characters JSON.stringify writes with a short escape (\b \t \n \f \r), not as \u00XY. */
const SHORT_ESCAPED = new Set([0x08, 0x09, 0x0a, 0x0c, 0x0d]);
const LOWER_HEX = new Uint8Array(256).fill(0xff);
for (const [k, c] of [...'0123456789abcdef'].entries()) LOWER_HEX[c.charCodeAt(0)] = k;
/** The letters JSON.stringify puts after a backslash, besides `u`: " \ b f n r t. */
const SHORT_ESCAPE = new Uint8Array(256);
for (const c of '"\\bfnrt') SHORT_ESCAPE[c.charCodeAt(0)] = 1;

const L = INGEST_STRING_LIMITS;
/**
 * Keys of one stored object the lane reads; one with more is declined. Each key is compared with the others of its
 * object for repeats, so this keeps the reading linear in the bytes whatever the body.
 */
const MAX_OBJECT_KEYS = 64;
/** Exact powers of ten: a mantissa below 2^53 divided by one is the correctly rounded value, as JSON.parse's. */
const POW10 = Array.from({ length: 23 }, (_, k) => 10 ** k);
const SOURCES: ReadonlySet<string> = new Set(EXECUTION_SOURCES);
const LEVELS: ReadonlySet<string> = new Set(LOG_LEVELS);

/** The item fields, as bits of a seen-mask. */
const FIELDS = [
  'executionId',
  'traceId',
  'spanId',
  'parentSpanId',
  'service',
  'environment',
  'mode',
  'source',
  'endpoint',
  'method',
  'startedAt',
  'durationMs',
  'duration',
  'statusCode',
  'outcome',
  'request',
  'response',
  'context',
  'exception',
  'outcomeEvidence',
  'fingerprint',
  'logs',
] as const;
type FieldName = (typeof FIELDS)[number];
const F = Object.fromEntries(FIELDS.map((name, i) => [name, i])) as Record<FieldName, number>;

const LOG_FIELDS = ['timestamp', 'level', 'message', 'logger', 'mode', 'attributes', 'exception'] as const;
const LF = Object.fromEntries(LOG_FIELDS.map((name, i) => [name, i])) as Record<
  (typeof LOG_FIELDS)[number],
  number
>;

const REQUEST_FIELDS = ['route', 'headers', 'query'] as const;
const EXCEPTION_FIELDS = ['type', 'message', 'stack', 'handled', 'frames'] as const;

/** Names by length, for matching a key's bytes without making a string of it. */
function keyTable(names: readonly string[]): { bytes: Uint8Array; index: number }[][] {
  const table: { bytes: Uint8Array; index: number }[][] = [];
  names.forEach((name, index) => {
    table[name.length] ??= [];
    table[name.length]!.push({ bytes: Buffer.from(name, 'latin1'), index });
  });
  return table;
}
const ITEM_KEYS = keyTable(FIELDS);
const LOG_KEYS = keyTable(LOG_FIELDS);
const REQUEST_KEYS = keyTable(REQUEST_FIELDS);
const EXCEPTION_KEYS = keyTable(EXCEPTION_FIELDS);

function keyIndex(table: ReturnType<typeof keyTable>, b: Buffer, at: number, length: number): number {
  const candidates = table[length];
  if (candidates === undefined) return -1;
  for (let k = 0; k < candidates.length; k++) {
    const name = candidates[k]!.bytes;
    let j = 0;
    while (j < length && b[at + j] === name[j]) j++;
    if (j === length) return candidates[k]!.index;
  }
  return -1;
}

/** An ASCII upper-case letter's byte lower-cased; any other byte as it is. */
const lower = (c: number) => (c >= 0x41 && c <= 0x5a ? c | 0x20 : c);

function wordAt(b: Buffer, at: number, end: number, word: string): boolean {
  if (at + word.length > end) return false;
  for (let j = 0; j < word.length; j++) if (lower(b[at + j]!) !== word.charCodeAt(j)) return false;
  return true;
}

/** scrub.ts's SENSITIVE_KEY_WORDS by their first letter (lower-case). */
const SENSITIVE_BY_LETTER: string[][] = Array.from({ length: 128 }, () => []);
for (const word of SENSITIVE_KEY_WORDS) SENSITIVE_BY_LETTER[word.charCodeAt(0)]!.push(word);

/**
 * Whether an ASCII key's bytes hold one of scrub.ts's SENSITIVE_KEY_WORDS in any letter case, as its
 * SENSITIVE_KEY_RE tests a key. Every header scrubHeaders drops also holds one.
 */
function sensitiveKey(b: Buffer, at: number, end: number): boolean {
  for (let j = at; j < end; j++) {
    const words = SENSITIVE_BY_LETTER[lower(b[j]!)];
    if (words === undefined) continue;
    for (let w = 0; w < words.length; w++) if (wordAt(b, j, end, words[w]!)) return true;
  }
  return false;
}

/** An exception of the plain shape (no frames), decoded. */
export interface DirectException {
  type: string;
  message: string;
  stack: string | null;
  handled: boolean | null;
  frames: null;
}

export interface DirectFailure {
  record: ExecutionRecord;
  exception: DirectException | null;
  route: string | null;
}

/** Pending inline log of a taken item: its fields, turned into a record once the item's own are known. */
interface PendingLog {
  timestamp: number;
  level: LogLevel;
  message: string;
  logger: string | null;
}

/** What DirectExecutions.next answers for an item it took. */
export const TAKEN = Symbol('taken');

/** Marks "declined" where a reader answers a value. */
const NO = Symbol('declined');
type NO = typeof NO;

/**
 * Reads one body's execution items in order, from just past the `[` of its `executions` array (the first of
 * its cuts) to its `]` (the last).
 */
export class DirectExecutions {
  readonly #b: Buffer;
  #i: number;
  readonly #end: number;
  readonly count: number;
  /** Items taken so far. */
  taken = 0;
  /**
   * The last item taken, when it failed: what the fingerprint stage reads besides its record (the caller runs
   * that stage: process-payload.ts). Null when it did not fail.
   */
  failure: DirectFailure | null = null;
  readonly #mode: Mode;
  readonly #requestId: string;
  readonly #paths: Uint8Array[][];
  #resource: ResourceDefaults | undefined;
  // The last string read: its bytes [s0, s1) and flags.
  #s0 = 0;
  #s1 = 0;
  #flags = 0;
  // The last number read was written as JSON.stringify writes it.
  #canonical = false;
  // The keys of the objects being read, outermost first: where each one's bytes are, and how many there are
  // (typed arrays with a count: setting an array's length is a runtime call).
  #keyAt = new Int32Array(64);
  #keyEnd = new Int32Array(64);
  #keys = 0;
  /** Per depth of the context being read (from 1), the position in #keyAt of the key that leads into it. */
  readonly #pathIndex = new Int32Array(INGEST_ITEM_LIMITS.contextMaxDepth + 1);
  #leaves = 0;
  /** The flags of the strings read since it was last cleared (for a stored object: whether to decode UTF-8). */
  #sliceFlags = 0;
  /** The request's route, when the item has one. */
  #route: string | null = null;
  /** The indexed-context cells of the item being read, and their starting value (all null). */
  #cells: (string | number | boolean | null)[] = [];
  readonly #noCells: (string | number | boolean | null)[];

  constructor(
    bytes: Buffer,
    range: { from: number; to: number; count: number },
    ctx: { mode: Mode; requestId: string },
    indexedPaths: readonly (readonly string[])[],
  ) {
    this.#b = bytes;
    this.#i = range.from;
    this.#end = range.to;
    this.count = range.count;
    this.#mode = ctx.mode;
    this.#requestId = ctx.requestId;
    this.#paths = indexedPaths.map((parts) => parts.map((p) => Buffer.from(p, 'latin1')));
    this.#noCells = new Array<null>(this.#paths.length * 3).fill(null);
  }

  /** The envelope's resource, whose service, environment and mode fill what an item leaves out. */
  useResource(resource: ResourceDefaults | undefined): void {
    this.#resource = resource;
  }

  /**
   * Reads item `index` (the next one). Taken: pushes its record, then its inline logs' records, and answers
   * TAKEN. Declined: answers the item as JSON.parse gives it. Throws when the bytes are not the array the
   * cuts said (the caller then parses the body whole).
   */
  next(index: number, executions: ExecutionRecord[], logs: LogRecord[]): unknown {
    const start = this.#i;
    if (this.#execution(index, executions, logs)) {
      this.#ws();
      if (!this.#separator()) throw new Error('executions: not an item list');
      this.taken++;
      return TAKEN;
    }
    this.#i = start;
    const end = this.#itemEnd();
    const raw: unknown = JSON.parse(this.#b.toString('utf8', start, end));
    this.#i = end;
    if (!this.#separator()) throw new Error('executions: not an item list');
    return raw;
  }

  /** Checks the list ended where its cuts said, after `count` items. */
  finish(): void {
    this.#ws();
    if (this.#i !== this.#end || this.#b[this.#i] !== CLOSE_ARRAY)
      throw new Error('executions: not cut here');
  }

  /** Past the comma after an item, or at the `]` after the last one; false when neither follows. */
  #separator(): boolean {
    const c = this.#b[this.#i];
    if (c === COMMA) {
      this.#i++;
      return true;
    }
    return c === CLOSE_ARRAY;
  }

  #ws(): void {
    const b = this.#b;
    let c = b[this.#i];
    while (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) c = b[++this.#i];
  }

  /** Where the item starting at #i ends: at the comma or `]` after it, outside strings and nesting. */
  #itemEnd(): number {
    const b = this.#b;
    let depth = 0;
    for (let j = this.#i; j < this.#end; j++) {
      const c = b[j];
      if (c === QUOTE) {
        for (j++; j < this.#end && b[j] !== QUOTE; j++) if (b[j] === BACKSLASH) j++;
      } else if (c === OPEN_OBJECT || c === OPEN_ARRAY) depth++;
      else if (c === CLOSE_OBJECT || c === CLOSE_ARRAY) {
        if (depth === 0) return j;
        depth--;
      } else if (c === COMMA && depth === 0) return j;
    }
    return this.#end;
  }

  /** Reads a string at #i into #s0, #s1, #flags, leaving #i past it; false: not a string, or a control char. */
  #string(): boolean {
    const b = this.#b;
    let j = this.#i;
    if (b[j] !== QUOTE) return false;
    const start = ++j;
    let flags = 0;
    for (;;) {
      const c = b[j];
      if (c === QUOTE) break;
      if (c === BACKSLASH) {
        flags |= ESCAPED;
        const e = b[j + 1]!;
        if (e === 0x75) {
          // Canonical only as \u00XY (lower-case hex) for a control character without a short escape.
          const hi = LOWER_HEX[b[j + 4]!]!;
          const code = hi * 16 + LOWER_HEX[b[j + 5]!]!;
          if (b[j + 2] !== ZERO || b[j + 3] !== ZERO || hi > 1 || code > 0x1f || SHORT_ESCAPED.has(code))
            flags |= ODD_ESCAPE;
          j += 6;
        } else {
          if (SHORT_ESCAPE[e] !== 1) flags |= ODD_ESCAPE;
          j += 2;
        }
        continue;
      }
      if (c === undefined || c < 0x20) return false;
      if (c >= 0x80) flags |= NON_ASCII;
      else if (c === 0x5f && j - start >= 3 && b[j - 1] === 0x63 && b[j - 2] === 0x76 && b[j - 3] === 0x73)
        flags |= SERVICE_KEY;
      j++;
    }
    this.#s0 = start;
    this.#s1 = j;
    this.#flags = flags;
    this.#i = j + 1;
    return true;
  }

  /** The string just read, as JSON.parse decodes it. */
  #stringValue(): string {
    const b = this.#b;
    if ((this.#flags & ESCAPED) !== 0) return JSON.parse(b.toString('utf8', this.#s0 - 1, this.#s1 + 1));
    return b.toString((this.#flags & NON_ASCII) !== 0 ? 'utf8' : 'latin1', this.#s0, this.#s1);
  }

  /**
   * A string value of min–max UTF-16 code units that the scrub leaves as it is; null for a JSON null; NO when
   * it is anything else.
   */
  #plainString(min: number, max: number, nullable: boolean): string | null | NO {
    if (nullable && this.#literal('null')) return null;
    if (!this.#string() || (this.#flags & SERVICE_KEY) !== 0) return NO;
    if (this.#flags === 0) {
      const length = this.#s1 - this.#s0;
      return length >= min && length <= max ? this.#b.toString('latin1', this.#s0, this.#s1) : NO;
    }
    const value = this.#stringValue();
    if (value.length < min || value.length > max || value.includes('svc_')) return NO;
    return value;
  }

  #literal(word: 'null' | 'true' | 'false'): boolean {
    const b = this.#b;
    const at = this.#i;
    for (let j = 0; j < word.length; j++) if (b[at + j] !== word.charCodeAt(j)) return false;
    this.#i = at + word.length;
    return true;
  }

  /** A JSON number at #i (NaN when there is none), and whether it is written as JSON.stringify writes it. */
  #number(): number {
    const b = this.#b;
    const start = this.#i;
    let j = start;
    const negative = b[j] === MINUS;
    if (negative) j++;
    let mantissa = 0;
    // Significant digits (from the first non-zero one), and those after the point.
    let significant = 0;
    let decimals = 0;
    let leadingZeros = 0;
    let lastDigit = 0;
    let c = b[j];
    if (c === ZERO) c = b[++j];
    else if (c !== undefined && c > ZERO && c <= NINE) {
      while (c !== undefined && c >= ZERO && c <= NINE) {
        mantissa = mantissa * 10 + (c - ZERO);
        significant++;
        c = b[++j];
      }
    } else return Number.NaN;
    if (c === DOT) {
      c = b[++j];
      if (c === undefined || c < ZERO || c > NINE) return Number.NaN;
      while (c !== undefined && c >= ZERO && c <= NINE) {
        mantissa = mantissa * 10 + (c - ZERO);
        if (significant > 0 || c !== ZERO) significant++;
        else leadingZeros++;
        decimals++;
        lastDigit = c;
        c = b[++j];
      }
    }
    let exponent = false;
    if (c === 0x65 || c === 0x45) {
      exponent = true;
      c = b[++j];
      if (c === 0x2b || c === MINUS) c = b[++j];
      if (c === undefined || c < ZERO || c > NINE) return Number.NaN;
      while (c !== undefined && c >= ZERO && c <= NINE) c = b[++j];
    }
    this.#i = j;
    if (exponent || significant > 15 || decimals > 22) {
      this.#canonical = false;
      return Number(b.toString('latin1', start, j));
    }
    // Written as JavaScript writes it: no trailing zero after the point, no -0, and not so small that it
    // would be written with an exponent (below 1e-6).
    this.#canonical =
      (decimals === 0 || lastDigit !== ZERO) && !(negative && mantissa === 0) && leadingZeros < 6;
    const value = mantissa / POW10[decimals]!;
    return negative ? -value : value;
  }

  /** The item at #i as a record (with its logs), or false when the lane declines it. */
  #execution(index: number, executions: ExecutionRecord[], logs: LogRecord[]): boolean {
    const b = this.#b;
    this.#ws();
    if (b[this.#i] !== OPEN_OBJECT) return false;
    this.#i++;
    let seen = 0;
    let executionId: string | null = null;
    let traceId: string | null = null;
    let spanId: string | null = null;
    let parentSpanId: string | null = null;
    let service: string | null | undefined;
    let environment: string | null | undefined;
    let mode: string | null | undefined;
    let source: string | null = null;
    let endpoint: string | null = null;
    let method: string | null = null;
    let startedAt = -1;
    let durationMs: number | null = null;
    let duration: number | null = null;
    let statusCode: number | null = null;
    let outcome: string | null = null;
    let request: string | null = null;
    let context: string | null = null;
    let pending: PendingLog[] | null = null;
    let exception: DirectException | null = null;
    let exceptionText: string | null = null;
    this.#route = null;
    this.#cells = this.#noCells.slice();
    this.#ws();
    if (b[this.#i] === CLOSE_OBJECT) return false;
    for (;;) {
      const field = this.#member(ITEM_KEYS, seen);
      if (field < 0) return false;
      seen |= 1 << field;
      switch (field) {
        case F.executionId: {
          if (this.#literal('null')) break;
          if (!this.#string() || this.#flags !== 0) return false;
          executionId = b.toString('latin1', this.#s0, this.#s1);
          if (!EXECUTION_ID_RE.test(executionId)) return false;
          break;
        }
        case F.traceId:
        case F.spanId:
        case F.parentSpanId: {
          const v = this.#plainString(1, L.id, true);
          if (v === NO) return false;
          if (field === F.traceId) traceId = v;
          else if (field === F.spanId) spanId = v;
          else parentSpanId = v;
          break;
        }
        case F.service: {
          const v = this.#plainString(1, L.service, true);
          if (v === NO) return false;
          service = v;
          break;
        }
        case F.environment: {
          const v = this.#plainString(1, L.environment, true);
          if (v === NO) return false;
          environment = v;
          break;
        }
        case F.endpoint: {
          const v = this.#plainString(1, L.endpoint, false);
          if (v === NO) return false;
          endpoint = v;
          break;
        }
        case F.method: {
          const v = this.#plainString(1, L.method, true);
          if (v === NO) return false;
          method = v === null ? null : v.toUpperCase();
          break;
        }
        case F.mode:
        case F.source:
        case F.outcome: {
          const v = this.#plainString(0, 16, true);
          if (v === NO) return false;
          if (field === F.mode) mode = v;
          else if (field === F.source) {
            if (v !== null && !SOURCES.has(v)) return false;
            source = v;
          } else {
            if (v !== null && v !== 'success' && v !== 'unknown' && v !== 'failed') return false;
            outcome = v;
          }
          break;
        }
        case F.startedAt: {
          const v = this.#timestamp();
          if (v < 0) return false;
          startedAt = v;
          break;
        }
        case F.durationMs:
        case F.duration: {
          if (this.#literal('null')) break;
          const v = this.#number();
          if (!(v >= 0 && v <= INGEST_ITEM_LIMITS.maxDurationMs)) return false;
          if (field === F.durationMs) durationMs = v;
          else duration = v;
          break;
        }
        case F.statusCode: {
          if (this.#literal('null')) break;
          const v = this.#number();
          if (!(Number.isSafeInteger(v) && v >= 100 && v <= 599)) return false;
          statusCode = v;
          break;
        }
        case F.request: {
          if (this.#literal('null')) break;
          const from = this.#i;
          this.#sliceFlags = 0;
          if (!this.#request()) return false;
          request = this.#slice(from);
          break;
        }
        case F.context: {
          if (this.#literal('null')) break;
          const from = this.#i;
          this.#leaves = 0;
          this.#sliceFlags = 0;
          if (!this.#scalarTree(1)) return false;
          context = this.#slice(from);
          // JSON.stringify's length, in UTF-16 code units.
          if (context.length > INGEST_ITEM_LIMITS.contextMaxChars) return false;
          break;
        }
        case F.exception: {
          if (this.#literal('null')) break;
          const from = this.#i;
          this.#sliceFlags = 0;
          exception = this.#exception();
          if (exception === null) return false;
          exceptionText = this.#slice(from);
          break;
        }
        case F.logs: {
          if (this.#literal('null')) break;
          pending = this.#logs();
          if (pending === null) return false;
          break;
        }
        default:
          // response, outcomeEvidence, fingerprint: only when null.
          if (!this.#literal('null')) return false;
      }
      this.#ws();
      const c = b[this.#i++];
      if (c === CLOSE_OBJECT) break;
      if (c !== COMMA) return false;
    }
    // Resource defaults (normalize.ts fillResourceDefaults), then the mode.
    const resource = this.#resource;
    if (resource !== undefined) {
      if (service == null && resource.service != null) {
        if (typeof resource.service !== 'string') return false;
        service = resource.service;
      }
      if (environment == null && resource.environment != null) {
        if (typeof resource.environment !== 'string') return false;
        environment = resource.environment;
      }
      if (mode == null && resource.mode != null) mode = resource.mode as string;
    }
    if (mode != null && mode !== this.#mode) return false;
    if (typeof service !== 'string' || !plainField(service, L.service)) return false;
    if (environment == null) environment = 'default';
    else if (!plainField(environment, L.environment)) return false;
    if (endpoint === null || startedAt < 0) return false;
    const took = durationMs ?? duration;
    if (took === null) return false;
    // Without rules (the caller's condition), evidence or response fields.
    const verdict = classifyByEvidence({ outcome: outcome as Outcome | null, exception, statusCode });
    const record: DirectRecord = {
      executionId: executionId ?? deterministicUlid(startedAt, this.#requestId, index),
      traceId,
      spanId,
      parentSpanId,
      service,
      environment,
      source: (source ?? 'http') as ExecutionSource,
      endpoint,
      method,
      startedAt,
      durationMs: took,
      statusCode,
      outcome: verdict.outcome,
      outcomeReason: verdict.reason,
      exceptionType: exception?.type ?? null,
      exceptionMessage: exception?.message ?? null,
      context,
      contextTree: null,
      request,
      response: null,
      exception: exceptionText,
      outcomeEvidence: null,
      fingerprint: null,
      issueId: null,
      failureType: null,
      endpointTemplate: null,
      truncated: false,
      indexedContext: this.#cells,
    };
    executions.push(record);
    this.failure = verdict.outcome === 'failed' ? { record, exception, route: this.#route } : null;
    if (pending !== null) {
      for (const p of pending) {
        logs.push({
          timestamp: p.timestamp,
          level: p.level,
          message: p.message,
          service: record.service,
          environment: record.environment,
          executionId: record.executionId,
          traceId: record.traceId,
          spanId: null,
          logger: p.logger,
          attributes: null,
          exception: null,
          truncated: false,
        });
      }
    }
    return true;
  }

  /**
   * The next member's key (whitespace around it allowed) as its index in `table`, #i at its value; -1 when the key
   * is not one of the table's written plainly, or is in the `seen` mask already (JSON.parse would keep the last).
   */
  #member(table: ReturnType<typeof keyTable>, seen: number): number {
    const b = this.#b;
    this.#ws();
    if (!this.#string() || this.#flags !== 0) return -1;
    const field = keyIndex(table, b, this.#s0, this.#s1 - this.#s0);
    if (field < 0 || (seen & (1 << field)) !== 0) return -1;
    this.#ws();
    if (b[this.#i] !== COLON) return -1;
    this.#i++;
    this.#ws();
    return field;
  }

  /** epochMsSchema: epoch milliseconds (floored) or RFC 3339 text; -1 when it is neither. */
  #timestamp(): number {
    const b = this.#b;
    if (b[this.#i] === QUOTE) {
      if (!this.#string()) return -1;
      return epochMsOf(this.#stringValue()) ?? -1;
    }
    const v = this.#number();
    return Number.isFinite(v) ? (epochMsOf(v) ?? -1) : -1;
  }

  /** Inline logs of the plain shape (timestamp, level, message, logger); null: declined. */
  #logs(): PendingLog[] | null {
    const b = this.#b;
    if (b[this.#i] !== OPEN_ARRAY) return null;
    this.#i++;
    const out: PendingLog[] = [];
    this.#ws();
    if (b[this.#i] === CLOSE_ARRAY) {
      this.#i++;
      return out;
    }
    for (;;) {
      this.#ws();
      const log = this.#log();
      if (log === null) return null;
      out.push(log);
      this.#ws();
      const c = b[this.#i++];
      if (c === CLOSE_ARRAY) return out;
      if (c !== COMMA) return null;
    }
  }

  #log(): PendingLog | null {
    const b = this.#b;
    if (b[this.#i] !== OPEN_OBJECT) return null;
    this.#i++;
    let seen = 0;
    let timestamp = -1;
    let level: string | null = null;
    let message: string | null = null;
    let logger: string | null = null;
    this.#ws();
    if (b[this.#i] === CLOSE_OBJECT) return null;
    for (;;) {
      const field = this.#member(LOG_KEYS, seen);
      if (field < 0) return null;
      seen |= 1 << field;
      switch (field) {
        case LF.timestamp:
          timestamp = this.#timestamp();
          if (timestamp < 0) return null;
          break;
        case LF.level: {
          const v = this.#plainString(1, 16, false);
          if (v === NO || v === null) return null;
          level = LEVELS.has(v) ? v : v.toLowerCase();
          if (!LEVELS.has(level)) return null;
          break;
        }
        case LF.message:
        case LF.logger: {
          const v = this.#plainString(0, MAX_STRING_LENGTH, field === LF.logger);
          if (v === NO) return null;
          if (field === LF.message) message = v;
          else logger = v;
          break;
        }
        case LF.mode: {
          const v = this.#plainString(0, 16, true);
          if (v === NO || (v !== null && v !== this.#mode)) return null;
          break;
        }
        default:
          // attributes, exception: only when null.
          if (!this.#literal('null')) return null;
      }
      this.#ws();
      const c = b[this.#i++];
      if (c === CLOSE_OBJECT) break;
      if (c !== COMMA) return null;
    }
    if (timestamp < 0 || level === null || message === null) return null;
    return { timestamp, level: level as LogLevel, message, logger };
  }

  /**
   * A request object written as JSON.stringify writes the fast path's copy: route, headers and query, each
   * at most once and in that order, no whitespace.
   */
  #request(): boolean {
    const b = this.#b;
    if (b[this.#i] !== OPEN_OBJECT) return false;
    this.#i++;
    if (b[this.#i] === CLOSE_OBJECT) {
      this.#i++;
      return true;
    }
    let last = -1;
    for (;;) {
      if (!this.#string() || this.#flags !== 0) return false;
      const field = keyIndex(REQUEST_KEYS, b, this.#s0, this.#s1 - this.#s0);
      if (field <= last) return false;
      last = field;
      if (b[this.#i++] !== COLON) return false;
      if (!this.#literal('null')) {
        if (field === 0) {
          if (!this.#canonicalString()) return false;
          this.#route = this.#stringValue();
        } else if (!this.#flatObject(field === 1)) return false;
      }
      const c = b[this.#i++];
      if (c === CLOSE_OBJECT) return true;
      if (c !== COMMA) return false;
    }
  }

  /**
   * An exception written as JSON.stringify writes the fast path's copy (fast-items.ts fastException): type and
   * message, then stack, handled and frames (null only) when present, in that order, no whitespace.
   */
  #exception(): DirectException | null {
    const b = this.#b;
    if (b[this.#i] !== OPEN_OBJECT) return null;
    this.#i++;
    const out: DirectException = { type: '', message: '', stack: null, handled: null, frames: null };
    let last = -1;
    for (;;) {
      if (!this.#string() || this.#flags !== 0) return null;
      const field = keyIndex(EXCEPTION_KEYS, b, this.#s0, this.#s1 - this.#s0);
      // type, then message, then the others in order.
      if (field <= last || (last < 1 && field !== last + 1)) return null;
      last = field;
      if (b[this.#i++] !== COLON) return null;
      if (field <= 2) {
        if (field === 2 && this.#literal('null')) out.stack = null;
        else {
          if (!this.#canonicalString()) return null;
          const text = this.#stringValue();
          if (field === 0) {
            if (text.length === 0) return null;
            out.type = text;
          } else if (field === 1) out.message = text;
          else out.stack = text;
        }
      } else if (field === 3) {
        if (this.#literal('true')) out.handled = true;
        else if (this.#literal('false')) out.handled = false;
        else if (!this.#literal('null')) return null;
      } else if (!this.#literal('null')) return null;
      const c = b[this.#i++];
      if (c === CLOSE_OBJECT) return last >= 1 ? out : null;
      if (c !== COMMA) return null;
    }
  }

  /**
   * A string JSON.stringify would write as it is here (its escapes as it writes them; other characters as they
   * are, UTF-8 decoded), that the scrub leaves alone. Adds its flags to #sliceFlags.
   */
  #canonicalString(): boolean {
    if (!this.#string()) return false;
    const flags = this.#flags;
    this.#sliceFlags |= flags;
    return (flags & (ODD_ESCAPE | SERVICE_KEY)) === 0 && this.#s1 - this.#s0 <= MAX_STRING_LENGTH;
  }

  /** The bytes from `from` to #i (an object read with #canonicalString's strings) as the text they decode to. */
  #slice(from: number): string {
    return this.#b.toString((this.#sliceFlags & NON_ASCII) !== 0 ? 'utf8' : 'latin1', from, this.#i);
  }

  /**
   * An object's key at #i, written canonically, neither sensitive nor integer-like (V8 would move it first)
   * nor `__proto__`, nor one already seen in this object (keys at [keyAt[k], keyEnd[k]) for k ≥ first).
   */
  #objectKey(first: number): boolean {
    const b = this.#b;
    // Keys as plain ASCII: two spellings could otherwise decode to one key.
    if (!this.#canonicalString() || this.#flags !== 0) return false;
    const s0 = this.#s0;
    const s1 = this.#s1;
    const c = b[s0];
    if (c !== undefined && c >= ZERO && c <= NINE) return false;
    if (s1 - s0 === 9 && b.toString('latin1', s0, s1) === '__proto__') return false;
    if (sensitiveKey(b, s0, s1)) return false;
    // Duplicates: the other keys of this object so far.
    const keys = this.#keys;
    if (keys - first >= MAX_OBJECT_KEYS) return false;
    for (let k = first; k < keys; k++) {
      const at = this.#keyAt[k]!;
      if (this.#keyEnd[k]! - at === s1 - s0 && b.compare(b, s0, s1, at, this.#keyEnd[k]!) === 0) return false;
    }
    if (keys === this.#keyAt.length) {
      const at = new Int32Array(keys * 2);
      const end = new Int32Array(keys * 2);
      at.set(this.#keyAt);
      end.set(this.#keyEnd);
      this.#keyAt = at;
      this.#keyEnd = end;
    }
    this.#keyAt[keys] = s0;
    this.#keyEnd[keys] = s1;
    this.#keys = keys + 1;
    return b[this.#i++] === COLON;
  }

  /** Headers (string or string[] values) or query (scalar or scalar[] values), as fast-items.ts checks them. */
  #flatObject(headers: boolean): boolean {
    const b = this.#b;
    if (b[this.#i] !== OPEN_OBJECT) return false;
    this.#i++;
    const first = this.#keys;
    try {
      if (b[this.#i] === CLOSE_OBJECT) {
        this.#i++;
        return true;
      }
      for (;;) {
        if (!this.#objectKey(first)) return false;
        if (b[this.#i] === OPEN_ARRAY) {
          this.#i++;
          if (b[this.#i] === CLOSE_ARRAY) this.#i++;
          else
            for (;;) {
              if (!(headers ? this.#canonicalString() : this.#scalar())) return false;
              const c = b[this.#i++];
              if (c === CLOSE_ARRAY) break;
              if (c !== COMMA) return false;
            }
        } else if (!(headers ? this.#canonicalString() : this.#scalar())) return false;
        const c = b[this.#i++];
        if (c === CLOSE_OBJECT) return true;
        if (c !== COMMA) return false;
      }
    } finally {
      this.#keys = first;
    }
  }

  /** A canonical scalar: string, number, true, false or null. */
  #scalar(): boolean {
    const c = this.#b[this.#i];
    if (c === QUOTE) return this.#canonicalString();
    if (this.#literal('null') || this.#literal('true') || this.#literal('false')) return true;
    return !Number.isNaN(this.#number()) && this.#canonical;
  }

  /**
   * A context object (contextProblem of schemas/ingest-items.ts: objects and scalar leaves, no arrays, keys at
   * most contextMaxDepth deep), written canonically, nothing for the scrub; counts #leaves and fills the
   * indexed paths' cells.
   */
  #scalarTree(depth: number): boolean {
    const b = this.#b;
    if (depth > INGEST_ITEM_LIMITS.contextMaxDepth || b[this.#i] !== OPEN_OBJECT) return false;
    this.#i++;
    const first = this.#keys;
    try {
      if (b[this.#i] === CLOSE_OBJECT) {
        this.#i++;
        return true;
      }
      for (;;) {
        if (!this.#objectKey(first)) return false;
        if (b[this.#i] === OPEN_OBJECT) {
          // The key just read leads into the nested object, whose keys go after it.
          this.#pathIndex[depth] = this.#keys - 1;
          if (!this.#scalarTree(depth + 1)) return false;
        } else {
          if (++this.#leaves > INGEST_ITEM_LIMITS.contextMaxLeaves || !this.#leaf(depth)) return false;
        }
        const next = b[this.#i++];
        if (next === CLOSE_OBJECT) return true;
        if (next !== COMMA) return false;
      }
    } finally {
      this.#keys = first;
    }
  }

  /** A context leaf at `depth`, its key the last in #keyAt: checked, and put in the cells of its indexed path. */
  #leaf(depth: number): boolean {
    const b = this.#b;
    const c = b[this.#i];
    let value: string | number | boolean | null;
    if (c === QUOTE) {
      if (!this.#canonicalString()) return false;
      value = null;
      // Made into a string only when indexed (below).
    } else if (this.#literal('null')) value = null;
    else if (this.#literal('true')) value = true;
    else if (this.#literal('false')) value = false;
    else {
      value = this.#number();
      if (Number.isNaN(value) || !this.#canonical) return false;
    }
    const paths = this.#paths;
    for (let p = 0; p < paths.length; p++) {
      const parts = paths[p]!;
      if (parts.length !== depth || !this.#onPath(parts)) continue;
      if (c === QUOTE) {
        const text = this.#stringValue();
        if (text.length <= MAX_INDEXED_STRING) this.#cells[p * 3] = text;
      } else if (typeof value === 'number') this.#cells[p * 3 + 1] = value;
      else if (typeof value === 'boolean') this.#cells[p * 3 + 2] = value;
    }
    return true;
  }

  /** Whether the keys leading to the current leaf are `parts`. */
  #onPath(parts: readonly Uint8Array[]): boolean {
    const b = this.#b;
    const last = parts.length - 1;
    for (let d = 0; d <= last; d++) {
      const k = d === last ? this.#keys - 1 : this.#pathIndex[d + 1]!;
      const at = this.#keyAt[k]!;
      const part = parts[d]!;
      if (this.#keyEnd[k]! - at !== part.length) return false;
      for (let j = 0; j < part.length; j++) if (b[at + j] !== part[j]) return false;
    }
    return true;
  }
}

/** A top-level string field's value from the resource: as the fast path checks it, and nothing to scrub. */
function plainField(value: string, max: number): boolean {
  return value.length >= 1 && value.length <= max && !value.includes('svc_');
}
