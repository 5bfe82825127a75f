import { decodeJsonCuts } from '../schemas/broker-messages.js';

/**
 * JSON.parse of an /api/ingest body, by groups of whole items where the API said the item arrays may be cut
 * (schemas/broker-messages.ts JsonCuts): the body without those arrays' contents, then each group as an array of
 * its own, its items appended in order. The answer is the value `JSON.parse(bytes.toString('utf8'))` makes: the
 * cuts lie at commas and brackets outside strings, so each group decodes to the same text as in the whole, and a
 * key given twice keeps its last value either way (the cuts are those of the last, the first stays in the rest).
 * Whatever does not agree (a header that is not one, a group that does not parse, a count that differs) falls
 * back to parsing the body whole, which is never wrong, only slower.
 */
export function parseIngestJson(
  bytes: Buffer,
  cutsHeader: string | undefined,
  leaveExecutions = false,
): ParsedIngestJson {
  const lists = cutsHeader ? decodeJsonCuts(cutsHeader) : null;
  if (lists && lists.length > 0) {
    try {
      const executions = leaveExecutions ? lists.find((l) => l.list === 'executions') : undefined;
      const value = parseGrouped(bytes, lists, executions?.list);
      if (executions === undefined) return { value, grouped: true };
      const { cuts, count } = executions;
      return { value, grouped: true, executions: { from: cuts[0]!, to: cuts[cuts.length - 1]!, count } };
    } catch {
      // Not as the API said: the whole body, below.
    }
  }
  return { value: JSON.parse(bytes.toString('utf8')), grouped: false };
}

export interface ParsedIngestJson {
  value: unknown;
  grouped: boolean;
  /**
   * With `leaveExecutions`, when the body has cuts for it: the `executions` array was left out of `value` (an
   * empty array there), for the direct lane (pipeline/direct-executions.ts): its bytes from just past its `[`
   * to its `]`, and its item count.
   */
  executions?: { from: number; to: number; count: number };
}

function parseGrouped(
  bytes: Buffer,
  lists: NonNullable<ReturnType<typeof decodeJsonCuts>>,
  leave?: string,
): unknown {
  // A list named twice would be parsed into the value once and, left out for the direct lane, read again.
  if (new Set(lists.map((l) => l.list)).size !== lists.length) throw new Error('a list cut twice');
  const ordered = [...lists].sort((a, b) => a.cuts[0]! - b.cuts[0]!);
  let rest = '';
  let at = 0;
  for (const { cuts } of ordered) {
    const from = cuts[0]!;
    if (from < at || cuts[cuts.length - 1]! > bytes.length) throw new Error('overlapping cuts');
    rest += bytes.toString('utf8', at, from);
    at = cuts[cuts.length - 1]!;
  }
  rest += bytes.toString('utf8', at);
  const top = JSON.parse(rest) as Record<string, unknown>;
  for (const { list, count, cuts } of ordered) {
    if (!Array.isArray(top[list]) || (top[list] as unknown[]).length !== 0)
      throw new Error(`${list} is not cut`);
    if (list === leave) continue;
    const items: unknown[] = [];
    for (let g = 0; g + 1 < cuts.length; g++) {
      // The first group starts just past `[`, the others just past the comma that ended the one before.
      const from = g === 0 ? cuts[0]! : cuts[g]! + 1;
      const to = cuts[g + 1]!;
      if (to <= from) continue;
      const group = JSON.parse(`[${bytes.toString('utf8', from, to)}]`) as unknown[];
      for (let k = 0; k < group.length; k++) items.push(group[k]);
    }
    if (items.length !== count) throw new Error(`${list}: ${items.length} items, ${count} expected`);
    top[list] = items;
  }
  return top;
}
