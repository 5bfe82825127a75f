import { hash } from 'node:crypto';
import { type FailureType, ISSUE_ID_PREFIX } from '../schemas/issues.js';

/**
 * The fingerprint stage (CONTRACT §9): what groups a failed execution with its kin. Everything here is a pure
 * function of the execution, so the issue id is too: the hot path needs no lookup, and two pipeline processes
 * can never make two issues of one fingerprint.
 *
 * The normalizers are hand-written single passes, not regexes: a message is client data up to 8 KiB, and a
 * backtracking pattern over it could take seconds. Each character is looked at a bounded number of times
 * (test/unit/fingerprint.test.ts counts the steps on adversarial inputs).
 */

/** Optional step counter: the unit tests prove the normalizers linear with it. */
export interface ScanSteps {
  steps: number;
}

const NO_STEPS: ScanSteps = { steps: 0 };

const isDigit = (c: number) => c >= 48 && c <= 57;
const isHexLetter = (c: number) => (c >= 97 && c <= 102) || (c >= 65 && c <= 70);
const isHex = (c: number) => isDigit(c) || isHexLetter(c);
const isAlnum = (c: number) => isDigit(c) || (c >= 65 && c <= 90) || (c >= 97 && c <= 122);

/** 8-4-4-4-12 hex digits at `at` in `s`, read no further than `end`. */
function isUuidAt(s: string, at: number, end: number, count: ScanSteps): boolean {
  if (end - at < 36) return false;
  for (let k = 0; k < 36; k++) {
    count.steps++;
    const c = s.charCodeAt(at + k);
    if (k === 8 || k === 13 || k === 18 || k === 23) {
      if (c !== 45) return false;
    } else if (!isHex(c)) return false;
  }
  return true;
}

/** A path segment or word that stands for an identifier: all digits, a UUID, or hex of 8 or more characters. */
function isIdToken(s: string, from: number, to: number, count: ScanSteps): 'num' | 'uuid' | 'hex' | null {
  const n = to - from;
  if (n === 0) return null;
  if (n === 36 && isUuidAt(s, from, to, count)) return 'uuid';
  let hexLetters = 0;
  for (let i = from; i < to; i++) {
    count.steps++;
    const c = s.charCodeAt(i);
    if (isHexLetter(c)) hexLetters++;
    else if (!isDigit(c)) return null;
  }
  if (hexLetters === 0) return 'num';
  return n >= 8 ? 'hex' : null;
}

export const ID_PLACEHOLDER = ':id';

/**
 * The endpoint with each path segment that is numeric, a UUID or hex of 8 or more characters replaced by `:id`
 * (`/orders/12` → `/orders/:id`); a query string or fragment is dropped. The same string when nothing changes.
 */
export function endpointTemplate(endpoint: string, count: ScanSteps = NO_STEPS): string {
  let end = endpoint.length;
  for (let i = 0; i < end; i++) {
    count.steps++;
    const c = endpoint.charCodeAt(i);
    if (c === 63 || c === 35) end = i; // ? #
  }
  let out: string | null = null;
  let start = 0;
  for (let i = 0; i <= end; i++) {
    count.steps++;
    if (i < end && endpoint.charCodeAt(i) !== 47) continue;
    if (i > start && isIdToken(endpoint, start, i, count) !== null) {
      out = (out ?? endpoint.slice(0, start)) + ID_PLACEHOLDER;
    } else if (out !== null) out += endpoint.slice(start, i);
    if (i < end) {
      if (out !== null) out += '/';
      start = i + 1;
    }
  }
  if (out !== null) return out;
  return end === endpoint.length ? endpoint : endpoint.slice(0, end);
}

/** Longest normalized message kept as a fingerprint part (it is shown, hashed and stored with the issue). */
export const MAX_NORMALIZED_MESSAGE = 512;

// A word: the characters of numbers, identifiers and e-mail addresses.
const isWordChar = (c: number) =>
  isAlnum(c) || c === 46 || c === 95 || c === 45 || c === 43 || c === 37 || c === 64; // . _ - + % @
const QUOTES = [34, 39, 96]; // " ' `

/** Whether `s[from, to)` is an e-mail address: one @, a local part, and a domain with an inner dot. */
function isEmail(s: string, from: number, to: number, count: ScanSteps): boolean {
  let at = -1;
  for (let i = from; i < to; i++) {
    count.steps++;
    if (s.charCodeAt(i) === 64) {
      if (at !== -1) return false;
      at = i;
    }
  }
  if (at <= from || at >= to - 3 || s.charCodeAt(to - 1) === 46) return false;
  for (let i = at + 2; i < to - 1; i++) {
    count.steps++;
    if (s.charCodeAt(i) === 46) return true;
  }
  return false;
}

/**
 * A word with its numbers, UUIDs and long hex runs replaced: it is split at . _ - + % @ into pieces, a piece
 * that is an id becomes its placeholder, and digit runs inside other pieces become `<num>`.
 */
function normalizeWord(s: string, from: number, to: number, count: ScanSteps): string {
  let out = '';
  let i = from;
  while (i < to) {
    if (isUuidAt(s, i, to, count) && (i + 36 === to || !isHex(s.charCodeAt(i + 36)))) {
      out += '<uuid>';
      i += 36;
      continue;
    }
    let j = i;
    while (j < to && isAlnum(s.charCodeAt(j))) {
      count.steps++;
      j++;
    }
    if (j > i) {
      const kind = isIdToken(s, i, j, count);
      if (kind !== null) out += `<${kind}>`;
      else {
        // Digit runs inside a word: `v2` → `v<num>`.
        let k = i;
        while (k < j) {
          const run = k;
          while (k < j && isDigit(s.charCodeAt(k))) k++;
          if (k > run) out += '<num>';
          const text = k;
          while (k < j && !isDigit(s.charCodeAt(k))) k++;
          out += s.slice(text, k);
          count.steps += k - run;
        }
      }
      i = j;
    } else {
      count.steps++;
      out += s[i];
      i++;
    }
  }
  return out;
}

/**
 * An exception message with what varies between occurrences replaced by placeholders: quoted strings (`<str>`),
 * e-mail addresses (`<email>`), UUIDs (`<uuid>`), hex of 8 or more characters (`<hex>`) and numbers (`<num>`).
 * `order 123 not found` and `order 456 not found` both become `order <num> not found`. A quote opens a string only
 * at the start of a word (so `don't` stays as it is) and closes it only at the end of one; one with no closing
 * quote is kept as it is. Cut to MAX_NORMALIZED_MESSAGE characters.
 */
export function normalizeMessage(message: string, count: ScanSteps = NO_STEPS): string {
  const s = message;
  const n = s.length;
  // Per quote character, where its next possible closer is (-1: none left): each search goes forward only, so
  // quotes with no closer cost a linear scan in all, not one per quote.
  const nextCloser = [0, 0, 0];
  let out = '';
  let i = 0;
  while (i < n && out.length < MAX_NORMALIZED_MESSAGE) {
    const c = s.charCodeAt(i);
    const q = QUOTES.indexOf(c);
    if (q !== -1 && (i === 0 || !isAlnum(s.charCodeAt(i - 1)))) {
      let close = -1;
      let from = Math.max(i + 1, nextCloser[q]!);
      while (nextCloser[q] !== -1) {
        const k = s.indexOf(s[i]!, from);
        count.steps += (k === -1 ? n : k) - from + 1;
        if (k === -1) {
          nextCloser[q] = -1;
          break;
        }
        nextCloser[q] = k;
        if (k + 1 >= n || !isAlnum(s.charCodeAt(k + 1))) {
          close = k;
          break;
        }
        from = k + 1;
      }
      if (close !== -1) {
        out += '<str>';
        i = close + 1;
        nextCloser[q] = i;
        continue;
      }
      count.steps++;
      out += s[i];
      i++;
      continue;
    }
    if (isWordChar(c)) {
      let j = i;
      while (j < n && isWordChar(s.charCodeAt(j))) {
        count.steps++;
        j++;
      }
      out += isEmail(s, i, j, count) ? '<email>' : normalizeWord(s, i, j, count);
      i = j;
      continue;
    }
    count.steps++;
    out += s[i];
    i++;
  }
  return out.length > MAX_NORMALIZED_MESSAGE ? out.slice(0, MAX_NORMALIZED_MESSAGE) : out;
}

export interface StackFrame {
  function?: string | null;
  file?: string | null;
  inApp?: boolean | null;
}

/** The last two segments of a file path, without a `file://` scheme: stable across install directories. */
function shortFile(file: string): string {
  const clean = file.startsWith('file://') ? file.slice(7) : file;
  const parts = clean.split(/[\\/]/);
  return parts.slice(-2).join('/');
}

const frameLabel = (fn: string | null | undefined, file: string | null | undefined) =>
  `${fn || '<anonymous>'} (${file ? shortFile(file) : '?'})`;

/** Longest stack text read for a frame, and the lines looked at. */
const STACK_LINES = 100;

/** A V8 stack line: `    at fn (file:line:col)` or `    at file:line:col`; null when it is not one. */
function parseStackLine(line: string): { fn: string | null; file: string } | null {
  const t = line.trim();
  if (!t.startsWith('at ')) return null;
  const body = t.slice(3);
  const open = body.lastIndexOf(' (');
  const fn = open === -1 ? null : body.slice(0, open).replace(/^async /, '');
  let loc = open === -1 ? body : body.slice(open + 2, body.endsWith(')') ? -1 : undefined);
  // file:line:col → file
  for (let k = 0; k < 2; k++) {
    const colon = loc.lastIndexOf(':');
    if (colon > 0 && /^\d+$/.test(loc.slice(colon + 1))) loc = loc.slice(0, colon);
  }
  return { fn, file: loc };
}

const notInApp = (file: string) =>
  file.includes('node_modules') ||
  file.startsWith('node:') ||
  file.startsWith('internal/') ||
  file === '<anonymous>' ||
  file === 'native';

/**
 * The top in-app frame as `function (dir/file)`, without line numbers (they move with every change): the first
 * frame marked `inApp`, else the first V8 stack line outside node_modules and Node's own modules; "" when none.
 */
export function topInAppFrame(exception: {
  frames?: readonly StackFrame[] | null;
  stack?: string | null;
}): string {
  const frames = exception.frames;
  if (frames && frames.length > 0) {
    const f = frames.find((x) => x.inApp === true);
    return f ? frameLabel(f.function, f.file) : '';
  }
  const stack = exception.stack;
  if (!stack) return '';
  let start = 0;
  for (let n = 0; n < STACK_LINES && start < stack.length; n++) {
    let end = stack.indexOf('\n', start);
    if (end === -1) end = stack.length;
    const frame = parseStackLine(stack.slice(start, Math.min(end, start + 2048)));
    if (frame && !notInApp(frame.file)) return frameLabel(frame.fn, frame.file);
    start = end + 1;
  }
  return '';
}

/** What classification says of a failed execution, and its evidence, for its failure type. */
export interface FailureFacts {
  statusCode: number | null;
  outcomeReason: string;
  exception: { type: string; message: string } | null;
}

const TIMEOUT_TYPE = /time[-_ ]?out|timedout/i;
const TIMEOUT_CODE = /\bE(?:SOCKET)?TIMEDOUT\b/;

/** CONTRACT §9 failure types, the first that applies. */
export function failureTypeOf(f: FailureFacts): FailureType {
  const status = f.statusCode;
  if (
    status === 408 ||
    status === 504 ||
    (f.exception !== null &&
      (TIMEOUT_TYPE.test(f.exception.type) || TIMEOUT_CODE.test(f.exception.message.slice(0, 1024))))
  )
    return 'timeout';
  if (f.exception !== null) return 'exception';
  if (status !== null && status >= 500) return 'http_5xx';
  if (status !== null && status >= 400) return 'http_4xx';
  if (/^(field|evidence|rule):/.test(f.outcomeReason)) return 'response_error';
  return 'unknown';
}

export const DEFAULT_FINGERPRINT = '{{default}}';

export interface FingerprintInput extends FailureFacts {
  service: string;
  /** The endpoint template: request.route when sent, else endpointTemplate(endpoint). */
  template: string;
  exception: { type: string; message: string; stack?: string | null; frames?: StackFrame[] | null } | null;
  /** The SDK's own list, when it sent one. */
  custom: readonly string[] | null | undefined;
}

/**
 * The fingerprint parts: the SDK's list with `{{default}}` expanded in place, else the default: service,
 * endpoint template, failure type, exception type, normalized message, top in-app frame ("" when absent).
 */
export function fingerprintParts(f: FingerprintInput, failureType: FailureType): string[] {
  const defaults = (): string[] => [
    f.service,
    f.template,
    failureType,
    f.exception?.type ?? '',
    f.exception ? normalizeMessage(f.exception.message) : '',
    f.exception ? topInAppFrame(f.exception) : '',
  ];
  if (!f.custom || f.custom.length === 0) return defaults();
  return f.custom.flatMap((p) => (p === DEFAULT_FINGERPRINT ? defaults() : [p]));
}

/** `iss_` + 16 hex of a hash of (workspace, mode, parts): the same fingerprint is the same issue everywhere. */
export function issueIdOf(workspaceId: string, mode: string, parts: readonly string[]): string {
  return ISSUE_ID_PREFIX + hash('sha256', `${workspaceId}\n${mode}\n${JSON.stringify(parts)}`).slice(0, 16);
}

const FAILURE_LABEL: Record<FailureType, string> = {
  exception: 'Exception',
  timeout: 'Timeout',
  http_5xx: 'HTTP 5xx',
  http_4xx: 'HTTP 4xx',
  response_error: 'Failure response',
  unknown: 'Failure',
};

/** `TimeoutError in POST /orders/:id`: the exception type (else the failure type) where it happened. */
export function issueTitle(
  exceptionType: string | null,
  failureType: FailureType,
  method: string | null,
  template: string,
): string {
  const what = exceptionType ?? FAILURE_LABEL[failureType];
  return `${what} in ${method ? `${method} ` : ''}${template}`.slice(0, 300);
}
