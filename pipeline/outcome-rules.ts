import type { ExecutionItem } from '../schemas/ingest-items.js';
import type { OutcomeRule } from '../schemas/settings.js';
import type { ClassifyRules } from './classify.js';

/**
 * A workspace's outcomeRules (CONTRACT §10) as step 1 of the classification: the first rule whose every
 * condition holds decides, with reason `rule:<index>`. service and method are exact, endpoint a glob (`*` any
 * run of characters), statusCodes one code or a range, field a dotted path into the response fields compared
 * by type and value.
 */

const globToRegExp = (glob: string) =>
  new RegExp(
    `^${glob
      .split('*')
      .map((part) => part.replace(/[.+?^${}()|[\]\\]/g, '\\$&'))
      .join('.*')}$`,
  );

type Test = (e: ExecutionItem) => boolean;

function compileRule(rule: OutcomeRule): Test {
  const tests: Test[] = [];
  const m = rule.match;
  if (m.service !== undefined) tests.push((e) => e.service === m.service);
  if (m.method !== undefined) tests.push((e) => e.method === m.method);
  if (m.endpoint !== undefined) {
    const re = globToRegExp(m.endpoint);
    tests.push((e) => re.test(e.endpoint));
  }
  if (m.statusCodes !== undefined) {
    const [lo, hi] = m.statusCodes.split('-').map(Number) as [number, number | undefined];
    tests.push((e) => e.statusCode != null && e.statusCode >= lo && e.statusCode <= (hi ?? lo));
  }
  if (m.exceptionType !== undefined) tests.push((e) => e.exception?.type === m.exceptionType);
  if (m.field !== undefined) {
    const { path, equals } = m.field;
    tests.push((e) => {
      const fields = e.response?.fields;
      return fields != null && Object.hasOwn(fields, path) && fields[path] === equals;
    });
  }
  return (e) => tests.every((t) => t(e));
}

export function compileOutcomeRules(rules: readonly OutcomeRule[]): ClassifyRules | undefined {
  if (rules.length === 0) return undefined;
  const compiled = rules.map(compileRule);
  return (e) => {
    for (let i = 0; i < compiled.length; i++) {
      if (compiled[i]!(e)) return { outcome: rules[i]!.outcome, reason: `rule:${i}` };
    }
    return null;
  };
}

/** Workers see the same few rule sets over and over: compile each once (keyed by its JSON text). */
const cache = new Map<string, ClassifyRules | undefined>();

export function cachedOutcomeRules(rulesJson: string | undefined): ClassifyRules | undefined {
  if (!rulesJson) return undefined;
  let hit = cache.get(rulesJson);
  if (hit === undefined && !cache.has(rulesJson)) {
    hit = compileOutcomeRules(JSON.parse(rulesJson) as OutcomeRule[]);
    if (cache.size > 1000) cache.clear();
    cache.set(rulesJson, hit);
  }
  return hit;
}
