import type { ExecutionItem, Scalar } from '../schemas/ingest-items.js';
import type { Outcome } from '../schemas/records.js';

export interface Classification {
  outcome: Outcome;
  /** CONTRACT §5: `rule:<i>`, `sdk`, `exception`, `status_5xx`, `evidence:<kind>`, `field:<path>`, `status`, `no_evidence`. */
  reason: string;
}

/**
 * Step 1 of the classification, the workspace's `outcomeRules` (CONTRACT §10), supplied by the caller: the
 * first matching rule's verdict with reason `rule:<index>`, or null when none matches. It sees the execution
 * after normalization and scrubbing (response fields flattened to dotted paths, method upper-cased).
 */
export type ClassifyRules = (execution: ExecutionItem) => Classification | null;

/** Which response field, if any, says the call failed. Only the last path segment names the field. */
function failingField(fields: Readonly<Record<string, Scalar>>): string | null {
  for (const path of Object.keys(fields)) {
    const value = fields[path];
    const dot = path.lastIndexOf('.');
    const name = dot === -1 ? path : path.slice(dot + 1);
    if (
      ((name === 'success' || name === 'ok') && value === false) ||
      (name === 'error' && typeof value === 'string' && value !== '') ||
      (name === 'errors' && typeof value === 'number' && value > 0)
    ) {
      return path;
    }
  }
  return null;
}

/** What steps 2 on of the classification read of an execution. */
export type ClassifyEvidence = Pick<
  ExecutionItem,
  'outcome' | 'exception' | 'statusCode' | 'outcomeEvidence' | 'response'
>;

/** CONTRACT §5 "Outcome classification": the first step that applies wins. */
export function classifyExecution(execution: ExecutionItem, rules?: ClassifyRules): Classification {
  const byRule = rules?.(execution);
  return byRule ?? classifyByEvidence(execution);
}

/** Steps 2 on of the classification: the SDK's verdict, the exception, the status, the evidence, the fields. */
export function classifyByEvidence(execution: ClassifyEvidence): Classification {
  if (execution.outcome != null) return { outcome: execution.outcome, reason: 'sdk' };
  if (execution.exception != null && execution.exception.handled !== true) {
    return { outcome: 'failed', reason: 'exception' };
  }
  const status = execution.statusCode;
  if (status != null && status >= 500) return { outcome: 'failed', reason: 'status_5xx' };
  const evidence = execution.outcomeEvidence?.find((entry) => entry.verdict === 'failed');
  if (evidence !== undefined) return { outcome: 'failed', reason: `evidence:${evidence.kind}` };
  const fields = execution.response?.fields;
  const field = fields == null ? null : failingField(fields);
  if (field !== null) return { outcome: 'failed', reason: `field:${field}` };
  // statusCode is validated to 100–599, so anything below 500 is 1xx–4xx.
  if (status != null) return { outcome: 'success', reason: 'status' };
  return { outcome: 'unknown', reason: 'no_evidence' };
}
