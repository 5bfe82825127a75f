import type { ProcessedPayload } from '../schemas/records.js';
import { splitPaths } from '../storage/context-columns.js';
import { DirectExecutions } from './direct-executions.js';
import { parseIngestJson } from './grouped-json.js';
import { type ProcessContext, type ProcessOptions, processPayload } from './process-payload.js';

export interface IngestBodyResult {
  out: ProcessedPayload;
  /** The body was parsed in groups by its cuts (grouped-json.ts), not whole. */
  grouped: boolean;
  /** Execution items the direct lane took (pipeline/direct-executions.ts). */
  direct: number;
}

/**
 * An /api/ingest body, parsed and processed (CONTRACT §5). Its execution items go through the direct lane where
 * the body has cuts for them (schemas/broker-messages.ts JsonCuts) and the workspace has no outcome rules (the
 * lane classifies without them); otherwise, or when the lane finds the bytes are not the list the cuts said,
 * the body is parsed and processed as a whole. Either way the answer is the same.
 */
export function processIngestBody(
  bytes: Buffer,
  cuts: string | undefined,
  ctx: ProcessContext,
  options: ProcessOptions,
  indexedKeys: readonly string[] = [],
): IngestBodyResult {
  const parsed = parseIngestJson(bytes, cuts, options.classifyRules === undefined);
  if (parsed.executions === undefined) {
    return { out: processPayload(parsed.value, ctx, options), grouped: parsed.grouped, direct: 0 };
  }
  try {
    const lane = new DirectExecutions(bytes, parsed.executions, ctx, splitPaths(indexedKeys));
    return { out: processPayload(parsed.value, ctx, options, lane), grouped: true, direct: lane.taken };
  } catch {
    // Parsed whole, below.
  }
  const whole = parseIngestJson(bytes, cuts);
  return { out: processPayload(whole.value, ctx, options), grouped: whole.grouped, direct: 0 };
}
