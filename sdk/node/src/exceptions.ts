import { scrubString } from './scrub.js';

/** An error as the service takes an execution's or a log's `exception` (CONTRACT §5). */
export interface ExceptionItem {
  type: string;
  message: string;
  stack: string | null;
  handled?: boolean;
}

export function exceptionOf(err: unknown, handled?: boolean): ExceptionItem {
  if (err instanceof Error) {
    const type = err.constructor?.name && err.constructor.name !== 'Object' ? err.constructor.name : err.name;
    return {
      type: scrubString(type || 'Error'),
      message: scrubString(String(err.message ?? '')),
      stack: typeof err.stack === 'string' ? scrubString(err.stack) : null,
      ...(handled === undefined ? {} : { handled }),
    };
  }
  let message: string;
  try {
    message = typeof err === 'string' ? err : (JSON.stringify(err) ?? String(err));
  } catch {
    message = String(err);
  }
  return {
    type: 'NonError',
    message: scrubString(message),
    stack: null,
    ...(handled === undefined ? {} : { handled }),
  };
}
