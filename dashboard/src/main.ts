import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { type ApiError, asApiError, get, onNotice, post, setUnauthorizedHandler } from './api.js';
import { AuthPage } from './auth.js';
import { ExecutionPage, ExecutionsPage } from './executions.js';
import { html } from './html.js';
import { IssuePage, IssuesPage } from './issues.js';
import { currentMode, navigate, onLinkClick, safeNext, useLocation, withParams } from './router.js';
import { ServicesPage } from './services.js';
import { SettingsPage } from './settings.js';
import './app.css';

interface Me {
  user: { id: string; email: string; name: string | null };
  workspace: { id: string; name: string };
  role: string;
}

/** A path segment decoded; a malformed one as it is (it names nothing, and the page says so). */
function decodePath(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment;
  }
}

const PAGES: [string, string][] = [
  ['/executions', 'Executions'],
  ['/issues', 'Issues'],
  ['/services', 'Services'],
  ['/settings', 'Settings'],
];

/** The views over a time range (executions, services) keep the one being looked at when the user moves between them. */
function withRange(href: string, params: URLSearchParams): string {
  if (href !== '/executions' && href !== '/services') return href;
  const out = new URLSearchParams();
  for (const k of ['range', 'from', 'to']) {
    const v = params.get(k);
    if (v) out.set(k, v);
  }
  const s = out.toString();
  return s ? `${href}?${s}` : href;
}

function Nav(props: { path: string; params: URLSearchParams; me: Me; onSignOut: () => void }) {
  return html`<header>
    <nav aria-label="Main">
      ${PAGES.map(
        ([href, label]) =>
          html`<a href=${withRange(href, props.params)} aria-current=${props.path.startsWith(href) ? 'page' : undefined}>${label}</a>`,
      )}
    </nav>
    <label for="mode" class="visually-hidden">Mode</label>
    <select id="mode" value=${currentMode()}
      onChange=${(e: Event) => {
        const mode = (e.target as HTMLSelectElement).value;
        const params = new URLSearchParams(location.search);
        navigate(withParams(params, { mode: mode === 'live' ? 'live' : null, page: null }));
      }}>
      <option value="test">Test data</option><option value="live">Live data</option>
    </select>
    <span class="who">${props.me.workspace.name} · ${props.me.user.email}</span>
    <button type="button" class="link" onClick=${props.onSignOut}>Log out</button>
  </header>`;
}

function Banner() {
  const [message, setMessage] = useState<string | null>(null);
  useEffect(() => onNotice(setMessage), []);
  return message ? html`<div class="banner" role="status">${message}</div>` : null;
}

function App() {
  const loc = useLocation();
  const [me, setMe] = useState<Me | null | undefined>(undefined);
  // Not knowing (the service away or busy past its retries) is not being signed out: the page says so.
  const [unknown, setUnknown] = useState<ApiError | null>(null);
  const load = (): Promise<void> =>
    get<Me>('/api/auth/me')
      .then((m) => {
        setUnknown(null);
        setMe(m);
      })
      .catch((err: unknown) => {
        const e = asApiError(err);
        if (e.status === 401) setMe(null);
        else setUnknown(e);
      });
  useEffect(() => {
    load();
  }, []);
  // An expired session mid-use: to sign-in, and back here after.
  useEffect(() =>
    setUnauthorizedHandler(() => {
      setMe(null);
      const here = location.pathname + location.search;
      if (!here.startsWith('/login')) navigate(`/login?next=${encodeURIComponent(here)}`, true);
    }),
  );
  const path = loc.path;
  useEffect(() => {
    if (me && path === '/') navigate('/executions', true);
  }, [me, path]);
  // Signed out on a view: to sign-in, which comes back to the view after.
  useEffect(() => {
    if (me !== null || path === '/login' || path === '/signup') return;
    const here = path === '/' ? '' : path + location.search;
    navigate(`/login${here ? `?next=${encodeURIComponent(here)}` : ''}`, true);
  }, [me, path]);
  // Whether anyone is signed in is unknown (also right after a sign-in whose check failed): say so, not sign-in.
  if (unknown || me === undefined)
    return unknown
      ? html`<main><h1>The service does not answer</h1>
          <p role="alert">${unknown.message}</p>
          <button type="button" onClick=${() => {
            setUnknown(null);
            load();
          }}>Try again</button></main>`
      : html`<p class="loading">Loading…</p>`;
  if (me === null || path === '/login' || path === '/signup') {
    const mode = path === '/signup' ? 'signup' : 'login';
    const next = safeNext(loc.params.get('next'));
    return html`<${AuthPage} mode=${mode} next=${next} onSignedIn=${load} />`;
  }
  const signOut = async () => {
    await post('/api/auth/logout', {}).catch(() => {});
    setMe(null);
    navigate('/login', true);
  };
  const detail = /^\/executions\/(.+)$/.exec(path);
  const page = detail
    ? html`<${ExecutionPage} key=${`${path} ${currentMode()}`} id=${decodePath(detail[1]!)} />`
    : path.startsWith('/issues/')
      ? html`<${IssuePage} key=${`${path} ${currentMode()}`} id=${decodePath(path.slice('/issues/'.length))} />`
      : path === '/issues'
        ? html`<${IssuesPage} loc=${loc} />`
        : path === '/services'
          ? html`<${ServicesPage} loc=${loc} />`
          : path === '/settings'
            ? html`<${SettingsPage} role=${me.role} userId=${me.user.id} />`
            : html`<${ExecutionsPage} loc=${loc} />`;
  return html`<${Nav} path=${path} params=${loc.params} me=${me} onSignOut=${signOut} /><${Banner} />${page}`;
}

document.addEventListener('click', onLinkClick);
render(html`<${App} />`, document.getElementById('app')!);
