import { SENSITIVE_KEY, scrubString } from './scrub.js';

/**
 * `setContext` values as the service takes an execution's context (CONTRACT §4, §5): nested objects with scalar
 * leaves, depth 8, 256 leaves; an array or anything deeper becomes its JSON text; values under sensitive keys are
 * replaced.
 */

const MAX_DEPTH = 8;
const MAX_LEAVES = 256;

export type ContextTree = { [key: string]: string | number | boolean | null | ContextTree };

function leafOf(value: unknown): string | number | boolean | null {
  if (value === null || value === undefined) return null;
  if (typeof value === 'string') return scrubString(value);
  if (typeof value === 'number') return Number.isFinite(value) ? value : String(value);
  if (typeof value === 'boolean') return value;
  if (typeof value === 'bigint') return value.toString();
  try {
    return scrubString(JSON.stringify(value) ?? String(value));
  } catch {
    return '[unserializable]';
  }
}

/** A context node without a prototype: a key such as `__proto__` from a parsed body is an ordinary key. */
export const newContext = (): ContextTree => Object.create(null) as ContextTree;

const set = (tree: ContextTree, key: string, value: ContextTree[string]) =>
  Object.defineProperty(tree, key, { value, enumerable: true, writable: true, configurable: true });

/** Merges `value` into `into` (in place), counting the leaves it adds in `leaves`. */
export function mergeContext(into: ContextTree, value: unknown, depth = 1, leaves = { n: 0 }): void {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return;
  for (const [k, v] of Object.entries(value as Record<string, unknown>)) {
    if (v === undefined || typeof v === 'function') continue;
    const has = Object.hasOwn(into, k);
    if (SENSITIVE_KEY.test(k)) {
      set(into, k, '[redacted]');
      continue;
    }
    const isTree = v !== null && typeof v === 'object' && !Array.isArray(v) && !(v instanceof Date);
    if (isTree && depth < MAX_DEPTH) {
      const existing = has ? into[k] : undefined;
      const child = existing && typeof existing === 'object' ? existing : newContext();
      set(into, k, child);
      mergeContext(child, v, depth + 1, leaves);
      continue;
    }
    if (!has && leaves.n >= MAX_LEAVES) continue;
    if (!has) leaves.n++;
    set(into, k, v instanceof Date ? v.toISOString() : leafOf(v));
  }
}

/** How many leaves a tree holds. */
export function countLeaves(tree: ContextTree): number {
  let n = 0;
  for (const v of Object.values(tree)) n += v !== null && typeof v === 'object' ? countLeaves(v) : 1;
  return n;
}
