/**
 * One pass over a JSON body's UTF-8 bytes that answers what the envelope check needs (CONTRACT §5) without
 * building the value: whether the bytes are JSON exactly as `JSON.parse(buf.toString('utf8'))` takes them, and
 * the kinds and sizes of the few top-level fields the check looks at. The ingest route forwards the raw bytes
 * and a worker parses them later, so parsing them here too only to throw the result away cost the main thread
 * a quarter of its time.
 *
 * Equivalence with JSON.parse, point by point:
 * - whitespace is space, tab, LF and CR only; a UTF-8 BOM is not whitespace (Buffer#toString keeps U+FEFF and
 *   JSON.parse refuses it);
 * - bytes ≥ 0x80 are taken as they come inside strings and refused outside them: toString replaces invalid
 *   UTF-8 with U+FFFD but never swallows an ASCII byte into a bad sequence, so string boundaries, escapes and
 *   control characters are where the bytes say they are;
 * - nesting depth is unbounded, as in JSON.parse: values below the fields of interest are skipped by an
 *   iterative walk over an explicit stack, never by recursion;
 * - a key repeated in one object: the last one wins, as in JSON.parse, for `executions`, `logs`, `metrics` and
 *   `resource` at the top, `logs` in an execution and `mode` in resource. Keys are compared after decoding
 *   escapes; only a key that contains a backslash is decoded, so the common path allocates nothing.
 *
 * Error messages follow V8's wording, but the position is a byte offset, not a UTF-16 index.
 */

import { JSON_GROUP_BYTES, type JsonCuts } from '../schemas/broker-messages.js';

/** The kind of a JSON value, known from its first byte. */
export type JsonKind = 'object' | 'array' | 'string' | 'number' | 'boolean' | 'null';

/**
 * What the envelope check reads of a body. A kind is `undefined` when its key is absent; a count is the number
 * of elements when the value is an array and 0 otherwise.
 */
export interface EnvelopeShape {
  top: JsonKind;
  executions: JsonKind | undefined;
  executionCount: number;
  /** Sum, over the elements of `executions` that are objects, of the length of their `logs` when an array. */
  inlineLogs: number;
  logs: JsonKind | undefined;
  logCount: number;
  metrics: JsonKind | undefined;
  metricCount: number;
  resource: JsonKind | undefined;
  /** `resource.mode`, when resource is an object; the decoded value when it is a string. */
  mode: JsonKind | undefined;
  modeValue: string | undefined;
  /**
   * Per top-level item array (the last of its key, as JSON.parse keeps), where its items may be cut into groups
   * of whole items: the offset just past its `[`, the offsets of the commas that end a group of at least
   * `groupBytes`, and the offset of its `]` (schemas/broker-messages.ts JsonCuts; pipeline/grouped-json.ts).
   */
  cuts: JsonCuts;
}

export type EnvelopeScan =
  | { ok: true; shape: EnvelopeShape }
  | {
      ok: false;
      /** Byte offset of the error in the body. */
      offset: number;
      /** V8's wording, then `at byte <offset>`. */
      message: string;
    };

// Kinds as small integers while scanning; 0 is "absent" or "no value starts with this byte".
const ABSENT = 0;
const OBJECT = 1;
const ARRAY = 2;
const STRING = 3;
const NUMBER = 4;
const BOOLEAN = 5;
const NULL_KIND = 6;
const KIND_NAMES: (JsonKind | undefined)[] = [
  undefined,
  'object',
  'array',
  'string',
  'number',
  'boolean',
  'null',
];

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COMMA = 0x2c;
const COLON = 0x3a;
const MINUS = 0x2d;
const PLUS = 0x2b;
const DOT = 0x2e;
const ZERO = 0x30;
const LBRACE = 0x7b;
const RBRACE = 0x7d;
const LBRACKET = 0x5b;
const RBRACKET = 0x5d;

/** The kind of the value a byte starts; 0 when no value starts with it. */
const KIND_OF = new Uint8Array(256);
KIND_OF[LBRACE] = OBJECT;
KIND_OF[LBRACKET] = ARRAY;
KIND_OF[QUOTE] = STRING;
KIND_OF[MINUS] = NUMBER;
for (let c = 0x30; c <= 0x39; c++) KIND_OF[c] = NUMBER;
KIND_OF[0x74] = BOOLEAN; // t
KIND_OF[0x66] = BOOLEAN; // f
KIND_OF[0x6e] = NULL_KIND; // n

/** The characters allowed after a backslash, `u` aside. */
const SIMPLE_ESCAPE = new Uint8Array(256);
for (const ch of '"\\/bfnrt') SIMPLE_ESCAPE[ch.charCodeAt(0)] = 1;

const HEX = new Uint8Array(256);
for (const ch of '0123456789abcdefABCDEF') HEX[ch.charCodeAt(0)] = 1;

const isDigit = (c: number) => c >= 0x30 && c <= 0x39;

const ascii = (s: string) => Uint8Array.from(s, (ch) => ch.charCodeAt(0));
const TRUE = ascii('true');
const FALSE = ascii('false');
const NULL = ascii('null');

// Which object (ROLE_*) or array (LIST_*) is being read, for the few whose fields the check needs.
const ROLE_TOP = 0;
const ROLE_EXECUTION = 1;
const ROLE_RESOURCE = 2;
const LIST_COUNT = 0;
const LIST_EXECUTIONS = 1;

const EOF = 'Unexpected end of JSON input';

/*
 * Scanner state. The scan is synchronous and never re-entered, so module state is safe and saves passing a
 * context object around (and allocating one per call). Every scanning function takes the index to start at
 * and returns the index just past what it read, or -1 after recording the error here. The generic walk writes
 * none of this state on its way, only on an error or an escape: it runs for nearly every byte.
 */
let errAt = -1;
let errMessage = '';
/** Set by scanString when the string holds a backslash; only cleared by the callers that ask. */
let strEscaped = false;
/** Elements of the last array read by scanArray. */
let listCount = 0;
/** Inline logs of the last executions array, and the length of `logs` in the last execution object (-1: none). */
let listInlineLogs = 0;
let execLogs = -1;
// The shape being filled.
let executions = ABSENT;
let executionCount = 0;
let inlineLogs = 0;
let logs = ABSENT;
let logCount = 0;
let metrics = ABSENT;
let metricCount = 0;
let resource = ABSENT;
let mode = ABSENT;
let modeStart = 0;
let modeEnd = 0;
let modeEscaped = false;
/** The cuts of the item arrays read so far, and the bytes a group of items reaches before it is cut. */
let cuts: JsonCuts = {};
let groupBytes = JSON_GROUP_BYTES;
/** Container kinds (OBJECT, ARRAY) of the generic walk, one per open level; grown, never shrunk. */
let stack = new Uint8Array(1024);

function fail(at: number, message: string): number {
  errAt = at;
  errMessage = message;
  return -1;
}

function unexpected(b: Uint8Array, at: number): number {
  if (at >= b.length) return fail(b.length, EOF);
  const c = b[at]!;
  const shown =
    c >= 0x20 && c < 0x7f ? `'${String.fromCharCode(c)}'` : `byte 0x${c.toString(16).padStart(2, '0')}`;
  return fail(at, `Unexpected token ${shown}`);
}

function skipWs(b: Uint8Array, i: number): number {
  const n = b.length;
  while (i < n) {
    const c = b[i]!;
    if (c > 0x20 || (c !== 0x20 && c !== 0x0a && c !== 0x0d && c !== 0x09)) break;
    i++;
  }
  return i;
}

/** `i` is just past the opening quote; returns the index past the closing one. Sets strEscaped on an escape. */
function scanString(b: Uint8Array, i: number): number {
  const n = b.length;
  for (;;) {
    // Most of a body's bytes are here: run until a quote, a backslash or a control character. Comparisons
    // measured faster than a 256-byte table, and faster than jumping with indexOf (strings are ~9 bytes).
    while (i < n) {
      const c = b[i]!;
      if (c > BACKSLASH || (c > QUOTE && c < BACKSLASH) || c === 0x20 || c === 0x21) i++;
      else break;
    }
    if (i >= n) return fail(n, 'Unterminated string in JSON');
    const c = b[i]!;
    if (c === QUOTE) return i + 1;
    if (c !== BACKSLASH) return fail(i, 'Bad control character in string literal in JSON');
    strEscaped = true;
    if (i + 1 >= n) return fail(n, 'Unterminated string in JSON');
    const e = b[i + 1]!;
    if (e === 0x75) {
      for (let k = i + 2; k < i + 6; k++) {
        if (k >= n) return fail(n, 'Unterminated string in JSON');
        if (HEX[b[k]!] === 0) return fail(k, 'Bad Unicode escape in JSON');
      }
      i += 6;
    } else if (SIMPLE_ESCAPE[e] === 1) i += 2;
    else return fail(i + 1, 'Bad escaped character in JSON');
  }
}

function scanNumber(b: Uint8Array, i: number): number {
  const n = b.length;
  if (b[i] === MINUS) {
    i++;
    if (i >= n) return fail(n, 'No number after minus sign in JSON');
    if (!isDigit(b[i]!)) return fail(i, 'No number after minus sign in JSON');
  }
  if (b[i] === ZERO) i++;
  else while (i < n && isDigit(b[i]!)) i++;
  if (i < n && b[i] === DOT) {
    i++;
    if (i >= n || !isDigit(b[i]!)) return fail(i, 'Unterminated fractional number in JSON');
    while (i < n && isDigit(b[i]!)) i++;
  }
  if (i < n && (b[i] === 0x65 || b[i] === 0x45)) {
    i++;
    if (i < n && (b[i] === PLUS || b[i] === MINUS)) i++;
    if (i >= n || !isDigit(b[i]!)) return fail(i, 'Exponent part is missing a number in JSON');
    while (i < n && isDigit(b[i]!)) i++;
  }
  return i;
}

function scanWord(b: Uint8Array, i: number, word: Uint8Array): number {
  for (let k = 0; k < word.length; k++, i++) {
    if (i >= b.length) return fail(b.length, EOF);
    if (b[i] !== word[k]) return unexpected(b, i);
  }
  return i;
}

/** A string, number or literal starting at `i` (not whitespace, not end of input). */
function scanScalar(b: Uint8Array, i: number): number {
  const c = b[i]!;
  if (c === QUOTE) return scanString(b, i + 1);
  if (c === MINUS || isDigit(c)) return scanNumber(b, i);
  if (c === 0x74) return scanWord(b, i, TRUE);
  if (c === 0x66) return scanWord(b, i, FALSE);
  if (c === 0x6e) return scanWord(b, i, NULL);
  return unexpected(b, i);
}

/**
 * A property name and its colon, `i` at the first byte after `{` or `,` and its whitespace; returns the index
 * of the value (whitespace skipped). The name is the bytes from `i + 1` to the quote before the colon.
 */
function scanName(b: Uint8Array, i: number, afterComma: boolean): number {
  if (i >= b.length) return fail(b.length, EOF);
  if (b[i] !== QUOTE) {
    return fail(
      i,
      afterComma ? 'Expected double-quoted property name in JSON' : "Expected property name or '}' in JSON",
    );
  }
  i = scanString(b, i + 1);
  if (i < 0) return -1;
  if (i < b.length && b[i] === COLON) return skipWs(b, i + 1);
  i = skipWs(b, i);
  if (i >= b.length) return fail(b.length, EOF);
  if (b[i] !== COLON) return fail(i, "Expected ':' after property name in JSON");
  return skipWs(b, i + 1);
}

/** Any value, at any depth, without recursion: `i` may point at whitespace before it. */
function skipValue(b: Uint8Array, i: number): number {
  const n = b.length;
  let depth = 0;
  let inObject = false;
  value: for (;;) {
    i = skipWs(b, i);
    if (i >= n) return fail(n, EOF);
    const c = b[i]!;
    if (c === QUOTE) i = scanString(b, i + 1);
    else if (c === LBRACE || c === LBRACKET) {
      i = skipWs(b, i + 1);
      if (i < n && b[i] === (c === LBRACE ? RBRACE : RBRACKET)) i++;
      else {
        if (depth === stack.length) {
          const grown = new Uint8Array(depth * 2);
          grown.set(stack);
          stack = grown;
        }
        inObject = c === LBRACE;
        stack[depth++] = inObject ? OBJECT : ARRAY;
        if (inObject) {
          i = scanName(b, i, false);
          if (i < 0) return -1;
        }
        continue;
      }
    } else i = scanScalar(b, i);
    if (i < 0) return -1;
    // A value is complete: close the containers it completes, or move to the next member or element.
    for (;;) {
      if (depth === 0) return i;
      i = skipWs(b, i);
      if (i >= n) return fail(n, EOF);
      const d = b[i]!;
      if (d === COMMA) {
        i = skipWs(b, i + 1);
        if (inObject) {
          i = scanName(b, i, true);
          if (i < 0) return -1;
        }
        continue value;
      }
      if (d !== (inObject ? RBRACE : RBRACKET)) {
        return fail(
          i,
          inObject
            ? "Expected ',' or '}' after property value in JSON"
            : "Expected ',' or ']' after array element in JSON",
        );
      }
      i++;
      depth--;
      inObject = depth > 0 && stack[depth - 1] === OBJECT;
    }
  }
}

/** The string between the quotes at start - 1 and end, decoded exactly as JSON.parse would. */
function decodeString(b: Uint8Array, start: number, end: number): string {
  const quoted = Buffer.from(b.buffer, b.byteOffset + start - 1, end - start + 2);
  return JSON.parse(quoted.toString('utf8')) as string;
}

/** Whether the name between start and end is `word` (ASCII) once decoded. */
function nameIs(b: Uint8Array, start: number, end: number, escaped: boolean, word: string): boolean {
  if (end - start < word.length) return false;
  if (!escaped) {
    if (end - start !== word.length) return false;
    for (let k = 0; k < word.length; k++) if (b[start + k] !== word.charCodeAt(k)) return false;
    return true;
  }
  // Only when the name holds a backslash. A decoded string is never longer than its bytes.
  return decodeString(b, start, end) === word;
}

/**
 * An array, `i` just past `[`; sets listCount (and listInlineLogs for executions). With `at`, a top-level item
 * array's cuts go there (EnvelopeShape.cuts).
 */
function scanArray(b: Uint8Array, i: number, list: number, at?: number[]): number {
  const n = b.length;
  let count = 0;
  let inline = 0;
  at?.push(i);
  let groupStart = i;
  i = skipWs(b, i);
  if (i < n && b[i] === RBRACKET) {
    at?.push(i);
    i++;
  } else {
    for (;;) {
      i = skipWs(b, i);
      if (list === LIST_EXECUTIONS && i < n && b[i] === LBRACE) {
        execLogs = -1;
        i = scanObject(b, i + 1, ROLE_EXECUTION);
        if (execLogs > 0) inline += execLogs;
      } else i = skipValue(b, i);
      if (i < 0) return -1;
      count++;
      i = skipWs(b, i);
      if (i >= n) return fail(n, EOF);
      const c = b[i]!;
      if (c === RBRACKET) {
        at?.push(i);
        i++;
        break;
      }
      if (c !== COMMA) return fail(i, "Expected ',' or ']' after array element in JSON");
      if (at && i - groupStart >= groupBytes) {
        at.push(i);
        groupStart = i;
      }
      i++;
    }
  }
  listCount = count;
  listInlineLogs = inline;
  return i;
}

/** An object, `i` just past `{`, reading the members its role needs and skipping the rest. */
function scanObject(b: Uint8Array, i: number, role: number): number {
  const n = b.length;
  i = skipWs(b, i);
  if (i < n && b[i] === RBRACE) return i + 1;
  for (let afterComma = false; ; afterComma = true) {
    const start = i + 1;
    strEscaped = false;
    i = scanName(b, i, afterComma);
    if (i < 0) return -1;
    if (i >= n) return fail(n, EOF);
    const escaped = strEscaped;
    // Only whitespace and the colon lie between the name's closing quote and the value: walking back finds
    // the quote without making the generic walk record where names end.
    let end = i - 1;
    while (b[end] !== COLON) end--;
    while (b[end] !== QUOTE) end--;
    const kind = KIND_OF[b[i]!]!;
    if (role === ROLE_TOP) {
      if (nameIs(b, start, end, escaped, 'executions')) {
        executions = kind;
        executionCount = 0;
        inlineLogs = 0;
        cuts.executions = kind === ARRAY ? [] : undefined;
        if (kind === ARRAY) {
          i = scanArray(b, i + 1, LIST_EXECUTIONS, cuts.executions);
          executionCount = listCount;
          inlineLogs = listInlineLogs;
        } else i = skipValue(b, i);
      } else if (nameIs(b, start, end, escaped, 'logs')) {
        logs = kind;
        logCount = 0;
        cuts.logs = kind === ARRAY ? [] : undefined;
        if (kind === ARRAY) {
          i = scanArray(b, i + 1, LIST_COUNT, cuts.logs);
          logCount = listCount;
        } else i = skipValue(b, i);
      } else if (nameIs(b, start, end, escaped, 'metrics')) {
        metrics = kind;
        metricCount = 0;
        cuts.metrics = kind === ARRAY ? [] : undefined;
        if (kind === ARRAY) {
          i = scanArray(b, i + 1, LIST_COUNT, cuts.metrics);
          metricCount = listCount;
        } else i = skipValue(b, i);
      } else if (nameIs(b, start, end, escaped, 'resource')) {
        resource = kind;
        mode = ABSENT;
        i = kind === OBJECT ? scanObject(b, i + 1, ROLE_RESOURCE) : skipValue(b, i);
      } else i = skipValue(b, i);
    } else if (role === ROLE_EXECUTION && nameIs(b, start, end, escaped, 'logs')) {
      execLogs = -1;
      if (kind === ARRAY) {
        i = scanArray(b, i + 1, LIST_COUNT);
        execLogs = listCount;
      } else i = skipValue(b, i);
    } else if (role === ROLE_RESOURCE && nameIs(b, start, end, escaped, 'mode')) {
      mode = kind;
      if (kind === STRING) {
        modeStart = i + 1;
        strEscaped = false;
        i = scanString(b, i + 1);
        modeEnd = i - 1;
        modeEscaped = strEscaped;
      } else i = skipValue(b, i);
    } else i = skipValue(b, i);
    if (i < 0) return -1;
    i = skipWs(b, i);
    if (i >= n) return fail(n, EOF);
    const c = b[i]!;
    if (c === RBRACE) return i + 1;
    if (c !== COMMA) return fail(i, "Expected ',' or '}' after property value in JSON");
    i = skipWs(b, i + 1);
  }
}

function modeString(b: Uint8Array): string {
  if (!modeEscaped && nameIs(b, modeStart, modeEnd, false, 'test')) return 'test';
  if (!modeEscaped && nameIs(b, modeStart, modeEnd, false, 'live')) return 'live';
  return decodeString(b, modeStart, modeEnd);
}

/**
 * Reads `buf` once; see the module comment for what it accepts and reports. `group` is the bytes a group of items
 * reaches before the array is cut (EnvelopeShape.cuts).
 */
export function scanEnvelope(buf: Uint8Array, group = JSON_GROUP_BYTES): EnvelopeScan {
  executions = logs = metrics = resource = mode = ABSENT;
  executionCount = inlineLogs = logCount = metricCount = 0;
  cuts = {};
  groupBytes = group;
  const n = buf.length;
  let i = skipWs(buf, 0);
  const top = i < n ? KIND_OF[buf[i]!]! : ABSENT;
  i = top === OBJECT ? scanObject(buf, i + 1, ROLE_TOP) : skipValue(buf, i);
  if (i >= 0) {
    i = skipWs(buf, i);
    if (i < n) i = fail(i, 'Unexpected non-whitespace character after JSON');
  }
  if (i < 0) return { ok: false, offset: errAt, message: `${errMessage} at byte ${errAt}` };
  return {
    ok: true,
    shape: {
      top: KIND_NAMES[top]!,
      executions: KIND_NAMES[executions],
      executionCount,
      inlineLogs,
      logs: KIND_NAMES[logs],
      logCount,
      metrics: KIND_NAMES[metrics],
      metricCount,
      resource: KIND_NAMES[resource],
      mode: KIND_NAMES[mode],
      modeValue: mode === STRING ? modeString(buf) : undefined,
      cuts: Object.fromEntries(Object.entries(cuts).filter(([, c]) => c !== undefined)),
    },
  };
}
