import type { FailureType, IssueStatus } from '../schemas/issues.js';
import { DAY_MS } from '../schemas/time.js';
import type { CommonFactor, FactorEvidence, FactorValue } from './issues.js';

/**
 * An issue's `hypothesis` and `suggestedFix` (CONTRACT §9), derived by rules from its evidence and failure type:
 * no model, nothing that cannot be read here. Each comes with the facts it rests on, and says so when the
 * evidence is thin.
 */

export interface Insight {
  text: string;
  facts: string[];
}

export interface InsightInput {
  issueId: string;
  failureType: FailureType;
  exceptionType: string | null;
  /** CONTRACT §9 parts; with the default fingerprint, [4] is the normalized message and [5] the top frame. */
  fingerprintParts: string[];
  method: string | null;
  endpoint: string;
  status: IssueStatus;
  resolvedAt: string | null;
  regressedAt: string | null;
  total: number;
  last24h: number;
  firstSeenMs: number | null;
  evidence: FactorEvidence;
  now: number;
}

/** Fewer occurrences than this in the window make the evidence thin. */
export const THIN_OCCURRENCES = 5;
/** Failures this many times slower than successes point at waiting, not at the request's own work. */
const SLOW_RATIO = 5;

const pct = (share: number) => `${Math.round(share * 100)} %`;
const ms = (v: number) =>
  v >= 1000 ? `${(v / 1000).toFixed(v >= 10_000 ? 0 : 1)} s` : `${Math.round(v)} ms`;
const day = (v: number | string) => new Date(v).toISOString().slice(0, 16).replace('T', ' ');
const shown = (v: FactorValue) => (typeof v === 'string' ? `"${v}"` : String(v));

/** The query-language term that finds the executions with a factor (CONTRACT §6.2); null when there is none. */
export function factorTerm(f: CommonFactor): string | null {
  if (f.field.startsWith('context.')) return `context:${f.field.slice(8)}=${shown(f.value)}`;
  if (f.field === 'environment') return `environment:${shown(f.value)}`;
  if (f.field === 'method') return `method:${f.value}`;
  return null;
}

function factorFact(f: CommonFactor, occurrences: number, baseline: number): string {
  const hits = Math.round(f.issueShare * occurrences);
  const who =
    f.issueShare === 1
      ? `all ${occurrences} failures`
      : `${hits} of ${occurrences} failures (${pct(f.issueShare)})`;
  const against =
    baseline > 0 ? `against ${pct(f.baselineShare)} of successes` : 'with no successes to compare';
  return `${who} have ${f.field} = ${shown(f.value)}, ${against}`;
}

const FAILURE_HYPOTHESIS: Record<FailureType, (i: InsightInput, where: string) => string> = {
  timeout: (_i, where) => `Calls to ${where} run out of time`,
  exception: (i, where) => {
    const frame = i.fingerprintParts[5];
    const message = i.fingerprintParts[4];
    return `${i.exceptionType ?? 'An exception'} is thrown${frame ? ` in ${frame}` : ''} while handling ${where}${message ? ` ("${message}")` : ''}`;
  },
  http_5xx: (_i, where) =>
    `${where} answers 5xx with no exception reaching the SDK: an error is handled and turned into a 5xx, or a proxy or dependency in front of it fails`,
  http_4xx: (_i, where) =>
    `${where} refuses requests with 4xx and they count as failures (by the SDK or an outcome rule): callers send requests it rejects`,
  response_error: (_i, where) =>
    `${where} answers a success status while its response fields or evidence report a failure`,
  unknown: (_i, where) =>
    `Executions of ${where} are marked failed with no exception, status code or evidence saying why`,
};

const FAILURE_FIX: Record<FailureType, (i: InsightInput) => string> = {
  timeout: () =>
    "Find the call it waits on in the representative execution (its logs and spans); give that call a timeout shorter than the request's own, retry it with backoff where it is safe, or move the work out of the request.",
  exception: (i) => {
    const frame = i.fingerprintParts[5] ? ` in ${i.fingerprintParts[5]}` : '';
    return /TypeError|Null|undefined|null/i.test(`${i.exceptionType} ${i.fingerprintParts[4] ?? ''}`)
      ? `Guard the value that is missing${frame} (check it, or fail with a clear 4xx when a caller omits it), and add a test with the representative execution's input.`
      : `Handle ${i.exceptionType ?? 'the exception'}${frame}: reproduce it with the representative execution's context, then fix the cause or turn it into a deliberate error answer.`;
  },
  http_5xx: () =>
    "Read the representative execution's logs for the error behind the 5xx; if it comes from a dependency, add a retry or a fallback there; report the exception to the SDK so the next occurrences carry it.",
  http_4xx: () =>
    "Check what the failing callers send (the representative execution's request); if these refusals are expected, add an outcome rule so they stop counting as failures.",
  response_error: () =>
    'Look at the response field or evidence that reports the failure in the representative execution; fix what it reports, or change the outcome rule if it is not a failure.',
  unknown: () =>
    'Have the SDK record an exception, a status code or outcome evidence for these executions, so the failure can be classified and grouped by its cause.',
};

/** The hypothesis and the suggested fix of an issue. */
export function issueInsights(i: InsightInput): { hypothesis: Insight; suggestedFix: Insight } {
  const e = i.evidence;
  const where = `${i.method ? `${i.method} ` : ''}${i.endpoint}`;
  const facts: string[] = [];
  const thin: string[] = [];
  facts.push(
    `${e.occurrences} occurrence${e.occurrences === 1 ? '' : 's'} between ${day(e.window.from)} and ${day(e.window.to)} UTC (${i.last24h} in the last 24 h, ${i.total} stored in all)`,
  );
  if (e.occurrences < THIN_OCCURRENCES)
    thin.push(`only ${e.occurrences} occurrence${e.occurrences === 1 ? '' : 's'}`);
  if (e.baseline === 0) thin.push(`no successful executions of ${where} to compare with`);
  else facts.push(`${e.baseline} successful executions of ${where} in the same window to compare with`);

  let text = FAILURE_HYPOTHESIS[i.failureType](i, where);
  const slow =
    e.occurrenceMedianMs !== null &&
    e.baselineMedianMs !== null &&
    e.baselineMedianMs > 0 &&
    e.occurrenceMedianMs >= SLOW_RATIO * e.baselineMedianMs;
  if (e.occurrenceMedianMs !== null && e.baselineMedianMs !== null) {
    facts.push(`failures took a median of ${ms(e.occurrenceMedianMs)}, successes ${ms(e.baselineMedianMs)}`);
  }
  if (slow)
    text += `; the failures are ${Math.round(e.occurrenceMedianMs! / e.baselineMedianMs!)}× slower than the successes, which points at waiting on something (a dependency, a lock, a queue) rather than at the request's own work`;
  // With nothing to compare with, every value the failures share passes the thresholds: none is a lead.
  const top = e.baseline > 0 ? e.factors[0] : undefined;
  if (top) {
    text += `. It is tied to ${top.field} = ${shown(top.value)}: ${pct(top.issueShare)} of the failures have it, against ${pct(top.baselineShare)} of successes`;
    for (const f of e.factors.slice(0, 5)) facts.push(factorFact(f, e.occurrences, e.baseline));
  } else if (e.occurrences > 0 && e.baseline > 0) {
    facts.push('no attribute value is shared by most failures more than by successes');
  }
  if (i.status === 'regressed' && i.resolvedAt && i.regressedAt) {
    text += `. It came back on ${day(i.regressedAt)} after it was resolved on ${day(i.resolvedAt)}: the fix did not hold, or a later change undid it`;
    facts.push(`resolved ${day(i.resolvedAt)} UTC, regressed ${day(i.regressedAt)} UTC`);
  } else if (i.firstSeenMs !== null && i.now - i.firstSeenMs < DAY_MS && i.total >= THIN_OCCURRENCES) {
    text += `. It started on ${day(i.firstSeenMs)} UTC: look at what changed then (a deploy, a configuration, a dependency)`;
    facts.push(`first seen ${day(i.firstSeenMs)} UTC`);
  }
  text += '.';
  if (thin.length > 0)
    text = `Evidence is thin (${thin.join('; ')}), so take this as a lead, not a finding: ${text}`;
  facts.push(...thin.map((t) => `thin evidence: ${t}`));

  const fixFacts: string[] = [];
  let fix = FAILURE_FIX[i.failureType](i);
  const term = top ? factorTerm(top) : null;
  if (top && term) {
    fix = `Start with the executions where ${top.field} = ${shown(top.value)} (search \`issue:${i.issueId} ${term}\`): that is where it fails. ${fix}`;
    fixFacts.push(factorFact(top, e.occurrences, e.baseline));
  }
  if (slow)
    fixFacts.push(
      `failures are ${Math.round(e.occurrenceMedianMs! / e.baselineMedianMs!)}× slower than successes`,
    );
  fixFacts.push(`failure type ${i.failureType}${i.exceptionType ? `, exception ${i.exceptionType}` : ''}`);
  if (thin.length > 0) {
    fix = `With evidence this thin, first collect more occurrences. ${fix}`;
    fixFacts.push(...thin.map((t) => `thin evidence: ${t}`));
  }
  return { hypothesis: { text, facts }, suggestedFix: { text: fix, facts: fixFacts } };
}
