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
const notice = (m: string | null) => {
  for (const l of listeners) l(m);
};

/** Called when a request finds no valid session: the app goes to sign-in, to come back here. */
let onUnauthorized: () => void = () => {};
export function setUnauthorizedHandler(fn: () => void): void {
  onUnauthorized = fn;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

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

export async function api<T>(method: string, path: string, body?: unknown): Promise<T> {
  const url = inViewMode(path);
  for (let attempt = 0; ; attempt++) {
    const res = await fetch(url, {
      method,
      headers: body === undefined ? {} : { 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
      credentials: 'same-origin',
    });
    if ((res.status === 429 || res.status === 503) && attempt < 5) {
      const wait = Math.max(1, Number(res.headers.get('retry-after')) || 1);
      notice(
        res.status === 429
          ? `Too many requests: trying again in ${wait} s`
          : `The service is busy: trying again in ${wait} s`,
      );
      await sleep(wait * 1000);
      notice(null);
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

export const get = <T>(url: string) => api<T>('GET', url);
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
  /** The latest answer of the view; the previous view's stays while the new one is asked (no blank flash). */
  data: T | null;
  error: ApiError | null;
  loading: boolean;
  /** Asks again, for the same view. */
  reload: () => void;
}

/**
 * The answer of `load` for the view that `deps` name. An answer that arrives after the view changed is dropped, so
 * a slow answer never overwrites a newer view's.
 */
export function useAnswer<T>(load: () => Promise<T>, deps: unknown[]): Answer<T> {
  const [state, setState] = useState<Omit<Answer<T>, 'reload'>>({ data: null, error: null, loading: true });
  const [tick, setTick] = useState(0);
  useEffect(() => {
    let live = true;
    setState((s) => (s.loading ? s : { ...s, loading: true }));
    load().then(
      (data) => live && setState({ data, error: null, loading: false }),
      (err: unknown) => live && setState((s) => ({ data: s.data, error: asApiError(err), loading: false })),
    );
    return () => {
      live = false;
    };
  }, [...deps, tick]);
  return { ...state, reload: () => setTick((n) => n + 1) };
}
