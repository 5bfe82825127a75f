import { useEffect, useState } from 'preact/hooks';

/**
 * The URL is the page's state (CONTRACT §14): the path names the page, the query string its search, filters, range
 * and page. Navigation pushes a history entry, so the back button and a reload show the same view.
 */

export interface Location {
  path: string;
  params: URLSearchParams;
}

const current = (): Location => ({ path: location.pathname, params: new URLSearchParams(location.search) });

const EVENT = 'svc:navigate';

export function navigate(url: string, replace = false): void {
  if (url === location.pathname + location.search) return;
  if (replace) history.replaceState(null, '', url);
  else history.pushState(null, '', url);
  window.dispatchEvent(new Event(EVENT));
  if (!replace) window.scrollTo(0, 0);
}

export function useLocation(): Location {
  const [loc, setLoc] = useState(current);
  useEffect(() => {
    const update = () => setLoc(current());
    window.addEventListener('popstate', update);
    window.addEventListener(EVENT, update);
    return () => {
      window.removeEventListener('popstate', update);
      window.removeEventListener(EVENT, update);
    };
  }, []);
  return loc;
}

/**
 * The data's mode (CONTRACT §2): `live` when the URL says so, else `test` (a session's default). It is part of the
 * view's state, so in-app links keep it.
 */
export const currentMode = (): 'test' | 'live' =>
  new URLSearchParams(location.search).get('mode') === 'live' ? 'live' : 'test';

/** A click on an in-app link navigates without reloading (a modified click opens a tab as usual). */
export function onLinkClick(e: MouseEvent): void {
  if (e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
  const a = (e.target as Element | null)?.closest('a');
  if (!a || a.target || a.origin !== location.origin || a.hasAttribute('download')) return;
  e.preventDefault();
  const params = new URLSearchParams(a.search);
  if (currentMode() === 'live' && !params.has('mode')) params.set('mode', 'live');
  const s = params.toString();
  navigate(a.pathname + (s ? `?${s}` : ''));
}

/**
 * This page's URL with `changes` applied to its query (null or '' removes a parameter): path and query, so that
 * removing the last parameter really removes it (an empty URL would keep the current one).
 */
export function withParams(params: URLSearchParams, changes: Record<string, string | number | null>): string {
  const next = new URLSearchParams(params);
  for (const [k, v] of Object.entries(changes)) {
    if (v === null || v === '') next.delete(k);
    else next.set(k, String(v));
  }
  const s = next.toString();
  return `${location.pathname}${s ? `?${s}` : ''}`;
}

/** A `next` to come back to after sign-in: a path of this site only (not `//elsewhere`). */
export const safeNext = (next: string | null): string => (next && /^\/(?![/\\])/.test(next) ? next : '');
