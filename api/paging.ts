import { validationError } from '../schemas/errors.js';
import type { ErrorDetail } from '../schemas/records.js';

export interface PagingLimits {
  PAGE_SIZE_DEFAULT: number;
  PAGE_SIZE_MAX: number;
  MAX_RESULT_WINDOW: number;
}

/**
 * The page size to answer with and what is wrong with the paging (CONTRACT §1): the bounds that come from
 * configuration, checked after the schema. A page deeper than the result window is refused rather than
 * clamped, so a client never takes a short page for the end of the list.
 */
export function checkPaging(
  q: { page: number; pageSize?: number | undefined },
  limits: PagingLimits,
): { pageSize: number; problems: ErrorDetail[] } {
  const pageSize = q.pageSize ?? limits.PAGE_SIZE_DEFAULT;
  const problems: ErrorDetail[] = [];
  if (pageSize > limits.PAGE_SIZE_MAX) {
    problems.push({ path: 'pageSize', message: `must be at most ${limits.PAGE_SIZE_MAX}` });
  }
  if (q.page * pageSize > limits.MAX_RESULT_WINDOW) {
    problems.push({
      path: 'page',
      message: `page × pageSize must not exceed ${limits.MAX_RESULT_WINDOW}; narrow the time range`,
    });
  }
  return { pageSize, problems };
}

/** checkPaging, refusing with VALIDATION_ERROR when anything is wrong. */
export function resolvePaging(
  q: { page: number; pageSize?: number | undefined },
  limits: PagingLimits,
): { page: number; pageSize: number } {
  const { pageSize, problems } = checkPaging(q, limits);
  if (problems.length > 0) throw validationError(`${problems[0]!.path}: ${problems[0]!.message}`, problems);
  return { page: q.page, pageSize };
}

/** The list answer of CONTRACT §1. */
export function pageAnswer<T>(result: { data: T[]; total: number }, page: number, pageSize: number) {
  return { data: result.data, page, pageSize, hasMore: page * pageSize < result.total, total: result.total };
}
