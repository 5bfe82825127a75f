import { useEffect, useState } from 'preact/hooks';

/**
 * The HTTP API as the page uses it: same origin, the session cookie (CONTRACT §2), JSON. A 401 sends the user to
 * sign-in and back; a 429 or 503 is retried after its `retry-after` while the page says so; any other error is
 * the contract's error body (CONTRACT §3), thrown as ApiError.
 */

export interface ErrorDetail {
  path: string;
  message: string;
  term?: string;
  offset?: number;
}

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details: ErrorDetail[],
  ) {
    super(message);
  }
}

type Listener = (message: string | null) => void;
const listeners = new Set<Listener>();

/** The banner's message (a wait before a retry), or null when there is none. */
export function onNotice(l: Listener): () => void {
  listeners.add(l);
  return () => listeners.delete(l);
}
/** The requests waiting out a 429 or 503, with what each says: the banner shows while any waits. */
const waiting = new Map<object, string>();
const notice = () => {
  const m = [...waiting.values()].at(-1) ?? null;
  for (const l of listeners) l(m);
};

/** Called when a request finds no valid session: the app goes to sign-in, to come back here. */
let onUnauthorized: () => void = () => {};
export function setUnauthorizedHandler(fn: () => void): void {
  onUnauthorized = fn;
}

/** A pause that ends early, rejecting, when the signal aborts (the view that asked is gone). */
function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const t = setTimeout(() => {
      signal?.removeEventListener('abort', stop);
      resolve();
    }, ms);
    const stop = () => {
      clearTimeout(t);
      reject(signal!.reason);
    };
    signal?.addEventListener('abort', stop, { once: true });
  });
}

/** The API paths whose data has a mode: they are asked in the view's mode (the URL's `mode`, else test). */
const MODED = /^\/api\/(executions|issues|metrics|logs|ingest\/rejections)\b/;

function inViewMode(url: string): string {
  if (
    !MODED.test(url) ||
    new URLSearchParams(location.search).get('mode') !== 'live' ||
    /[?&]mode=/.test(url)
  )
    return url;
  return `${url}${url.includes('?') ? '&' : '?'}mode=live`;
}

/**
 * One API call. `signal` is the asking view's: when it aborts (the view changed), the call stops, waits included,
 * so a gone view's retries neither spend the read budget nor show the banner over the next view.
 */
export async function api<T>(method: string, path: string, body?: unknown, signal?: AbortSignal): Promise<T> {
  const url = inViewMode(path);
  for (let attempt = 0; ; attempt++) {
    const res = await fetch(url, {
      method,
      headers: body === undefined ? {} : { 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
      credentials: 'same-origin',
      signal,
    });
    if ((res.status === 429 || res.status === 503) && attempt < 5) {
      const wait = Math.max(1, Number(res.headers.get('retry-after')) || 1);
      const me = {};
      waiting.set(
        me,
        res.status === 429
          ? `Too many requests: trying again in ${wait} s`
          : `The service is busy: trying again in ${wait} s`,
      );
      notice();
      try {
        await sleep(wait * 1000, signal);
      } finally {
        waiting.delete(me);
        notice();
      }
      continue;
    }
    if (res.status === 204) return undefined as T;
    const text = await res.text();
    const json = text ? (JSON.parse(text) as unknown) : undefined;
    if (res.ok) return json as T;
    const err = (json as { error?: { code: string; message: string; details?: ErrorDetail[] } } | undefined)
      ?.error;
    if (res.status === 401 && !url.startsWith('/api/auth/')) onUnauthorized();
    throw new ApiError(res.status, err?.code ?? 'ERROR', err?.message ?? res.statusText, err?.details ?? []);
  }
}

export const get = <T>(url: string, signal?: AbortSignal) => api<T>('GET', url, undefined, signal);
export const post = <T>(url: string, body: unknown) => api<T>('POST', url, body);

/** A query string from parameters, leaving out empty ones. */
export function qs(params: Record<string, string | number | undefined | null>): string {
  const out = new URLSearchParams();
  for (const [k, v] of Object.entries(params))
    if (v !== undefined && v !== null && v !== '') out.set(k, String(v));
  const s = out.toString();
  return s ? `?${s}` : '';
}

/** Any failure as an ApiError (a network failure has status 0). */
export const asApiError = (err: unknown): ApiError =>
  err instanceof ApiError
    ? err
    : new ApiError(0, 'NETWORK_ERROR', String((err as Error)?.message ?? err), []);

export interface Answer<T> {
  /**
   * The latest answer: the previous one stays while the same view asks again or a changed view is asked (no blank
   * flash); null before the first answer and after a failure (a failed view never shows another view's data).
   */
  data: T | null;
  error: ApiError | null;
  loading: boolean;
  /** Asks again, for the same view. */
  reload: () => void;
}

/**
 * The answer of `load` for the view that `deps` name. When the view changes, the call for the old one is aborted
 * (its retries too) and an answer that still arrives is dropped, so a slow answer never overwrites a newer view's.
 */
export function useAnswer<T>(load: (signal: AbortSignal) => Promise<T>, deps: unknown[]): Answer<T> {
  const [state, setState] = useState<Omit<Answer<T>, 'reload'>>({ data: null, error: null, loading: true });
  const [tick, setTick] = useState(0);
  useEffect(() => {
    const view = new AbortController();
    setState((s) => (s.loading ? s : { ...s, loading: true }));
    load(view.signal).then(
      (data) => !view.signal.aborted && setState({ data, error: null, loading: false }),
      (err: unknown) =>
        !view.signal.aborted && setState({ data: null, error: asApiError(err), loading: false }),
    );
    return () => view.abort();
  }, [...deps, tick]);
  return { ...state, reload: () => setTick((n) => n + 1) };
}
