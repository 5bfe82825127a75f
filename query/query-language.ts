import type { ErrorDetail, Outcome } from '../schemas/records.js';
import { CONTEXT_PATH, type ContextFilter, type ContextValue, parseContextValue } from './context-filter.js';

/**
 * The query language (CONTRACT §6.2): space-separated `key:value` terms, ANDed. Values may be double-quoted to
 * hold spaces, with `\"` for a quote. Errors carry the term and its 0-based character offset in `q`.
 *
 *   service:checkout status:failed,unknown endpoint:/orders/* context:customer.tier="gold" duration:>=250
 */

export interface ParsedQuery {
  service?: string;
  environment?: string;
  method?: string;
  endpoint?: string;
  status?: Outcome[];
  traceId?: string;
  issueId?: string;
  duration: DurationBound[];
  context: ContextFilter[];
}

export interface DurationBound {
  op: '>' | '>=' | '<' | '<=';
  ms: number;
}

export interface QueryLanguageDetail extends ErrorDetail {
  term: string;
  offset: number;
}

export class QueryLanguageError extends Error {
  constructor(readonly detail: QueryLanguageDetail) {
    super(detail.message);
  }
}

interface Token {
  text: string;
  offset: number;
}

/** Splits on unquoted spaces; quotes stay in the token (they decide types). */
function tokenize(q: string): Token[] {
  const tokens: Token[] = [];
  let i = 0;
  while (i < q.length) {
    if (q[i] === ' ' || q[i] === '\t') {
      i++;
      continue;
    }
    const start = i;
    let quoted = false;
    while (i < q.length && (quoted || (q[i] !== ' ' && q[i] !== '\t'))) {
      if (q[i] === '\\' && quoted && q[i + 1] === '"') i += 2;
      else {
        if (q[i] === '"') quoted = !quoted;
        i++;
      }
    }
    const text = q.slice(start, i);
    if (quoted)
      throw new QueryLanguageError({ path: 'q', message: 'unterminated quote', term: text, offset: start });
    tokens.push({ text, offset: start });
  }
  return tokens;
}

const STRING_KEYS = {
  service: 'service',
  environment: 'environment',
  method: 'method',
  endpoint: 'endpoint',
  trace: 'traceId',
  issue: 'issueId',
} as const;
const OUTCOMES = new Set(['success', 'failed', 'unknown']);
const DURATION = /^(>=|<=|>|<)(\d+(\.\d+)?)$/;

/** A plain value: `"…"` unquoted (and unescaped), or the bare text. */
function plainValue(raw: string): string | null {
  if (raw.length >= 2 && raw.startsWith('"') && raw.endsWith('"'))
    return raw.slice(1, -1).replace(/\\"/g, '"');
  if (raw.includes('"')) return null;
  return raw;
}

export function parseQuery(q: string): ParsedQuery {
  const out: ParsedQuery = { duration: [], context: [] };
  const seen = new Set<string>();
  for (const { text, offset } of tokenize(q)) {
    const fail = (message: string): never => {
      throw new QueryLanguageError({ path: 'q', message, term: text, offset });
    };
    const colon = text.indexOf(':');
    if (colon <= 0) fail('expected key:value');
    const key = text.slice(0, colon);
    const rest = text.slice(colon + 1);
    if (rest === '') fail(`${key}: needs a value`);

    if (key === 'context') {
      const eq = rest.indexOf('=');
      if (eq <= 0) fail('expected context:<dotted.path>=<value>');
      const path = rest.slice(0, eq);
      const raw = rest.slice(eq + 1);
      if (!CONTEXT_PATH.test(path)) fail(`${path} is not a dotted path`);
      if (raw === '') fail(`context:${path}= needs a value`);
      if (raw.includes('"') && !(raw.length >= 2 && raw.startsWith('"') && raw.endsWith('"')))
        fail('a quote must enclose the whole value');
      const value: ContextValue = parseContextValue(raw);
      // Repeating a key means OR, as repeating the parameter does.
      const existing = out.context.find((c) => c.path === path);
      if (existing) existing.values.push(value);
      else out.context.push({ path, values: [value] });
      continue;
    }
    if (key === 'duration') {
      const m = DURATION.exec(rest);
      if (!m) fail('expected duration:>N, >=N, <N or <=N (milliseconds)');
      out.duration.push({ op: m![1] as DurationBound['op'], ms: Number(m![2]) });
      continue;
    }
    if (seen.has(key)) fail(`${key} is given twice`);
    seen.add(key);
    const value = plainValue(rest);
    if (value === null || value === '') fail('a quote must enclose the whole value');
    if (key === 'status') {
      const parts = value!.split(',').map((p) => p.trim());
      const bad = parts.find((p) => !OUTCOMES.has(p));
      if (bad !== undefined) fail(`status must be success, failed or unknown, not ${bad}`);
      out.status = parts as Outcome[];
      continue;
    }
    const field = STRING_KEYS[key as keyof typeof STRING_KEYS];
    if (!field)
      fail(
        `unknown key ${key}; one of service, environment, method, endpoint, status, context, trace, issue, duration`,
      );
    out[field] = key === 'method' ? value!.toUpperCase() : value!;
  }
  return out;
}
