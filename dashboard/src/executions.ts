import { useEffect, useRef, useState } from 'preact/hooks';
import type { ApiError, ErrorDetail } from './api.js';
import { get, qs, useAnswer } from './api.js';
import { freshTestKey } from './auth.js';
import { copy, html, ms, when } from './html.js';
import { currentMode, type Location, navigate, withParams } from './router.js';

interface ExecutionRow {
  executionId: string;
  service: string;
  environment: string;
  method: string | null;
  endpoint: string;
  statusCode: number | null;
  durationMs: number;
  outcome: string;
  startedAt: string;
  exceptionType: string | null;
  issueId: string | null;
}

interface Page<T> {
  data: T[];
  page: number;
  pageSize: number;
  hasMore: boolean;
  total: number;
}

/** Quick ranges; the URL keeps the name (`range=1h`), so a link shows the latest hour when it is opened. */
export const RANGES: Record<string, number> = {
  '15m': 15 * 60_000,
  '1h': 3_600_000,
  '24h': 86_400_000,
  '7d': 7 * 86_400_000,
};

/** The range of a location: `from`/`to` when given, else the quick range (24 h by default). */
export function rangeOf(params: URLSearchParams): { from: number; to: number } {
  const from = params.get('from');
  const to = params.get('to');
  if (from)
    return { from: Date.parse(from) || Number(from), to: to ? Date.parse(to) || Number(to) : Date.now() };
  const span = RANGES[params.get('range') ?? '24h'] ?? RANGES['24h']!;
  const now = Date.now();
  return { from: now - span, to: now };
}

const SORTS: [string, string][] = [
  ['-startedAt', 'Newest first'],
  ['startedAt', 'Oldest first'],
  ['-durationMs', 'Slowest first'],
  ['durationMs', 'Fastest first'],
];

/** The query text with the part an error names marked (its term at its offset). */
function MarkedQuery(props: { q: string; detail: ErrorDetail }) {
  const { q, detail } = props;
  const at = detail.offset ?? -1;
  if (at < 0 || at > q.length) return html`<code>${q}</code>`;
  const end = Math.min(q.length, at + Math.max(1, detail.term?.length ?? 1));
  return html`<code>${q.slice(0, at)}<mark>${q.slice(at, end)}</mark>${q.slice(end)}</code>`;
}

interface KeyListed {
  mode: 'test' | 'live';
  prefix: string;
  last4: string;
  permissions: string[];
  revokedAt: string | null;
}

/**
 * What to send when the workspace has nothing in this view's mode (CONTRACT §14): a curl with the full test key
 * right after sign-up (kept in memory from its answer, never stored); elsewhere the key named by prefix and last 4,
 * with the way to Settings, where a new one can be made.
 */
function EmptyState(props: { mode: 'test' | 'live' }) {
  const origin = location.origin;
  const fresh = props.mode === 'test' ? freshTestKey : null;
  const keys = useAnswer(
    (signal) => (fresh ? Promise.resolve({ data: [] }) : get<{ data: KeyListed[] }>('/api/keys', signal)),
    [fresh],
  );
  // Shown once the key is known: no placeholder that turns into a key a moment later.
  if (keys.loading) return null;
  const named = keys.data?.data.find(
    (k) => k.mode === props.mode && !k.revokedAt && k.permissions.includes('ingest'),
  );
  const key = fresh ?? (named ? `${named.prefix}…${named.last4}` : `svc_${props.mode}_…`);
  const curl = `curl -s -X POST ${origin}/api/ingest \\
  -H "authorization: Bearer ${key}" -H 'content-type: application/json' \\
  -d '{"resource":{"service":"checkout"},"executions":[{"endpoint":"/orders/42","method":"POST",
       "startedAt":"'$(date -u +%Y-%m-%dT%H:%M:%SZ)'","durationMs":182,"statusCode":500}]}'`;
  return html`<section class="empty" aria-label="No executions yet">
    <h2>No executions yet</h2>
    ${
      fresh
        ? html`<p>Send one with your test key:</p>`
        : html`<p>Send one with your ${props.mode} key ${named ? html`<code>${named.prefix}…${named.last4}</code>` : null}
            (its full value was shown once, when it was made; owners and admins make new ones in
            <a href="/settings">Settings</a>):</p>`
    }
    <pre>${curl}</pre>
    <button type="button" onClick=${(e: Event) => copy(curl, (e.target as Element).previousElementSibling)}>Copy</button>
    <p>Or instrument an app: the Node SDK (<code>init()</code>) or any OpenTelemetry SDK pointed at ${origin}.</p>
  </section>`;
}

/** The probe of an empty range: the workspace's latest execution in the last 30 days, if any. */
const PROBE_DAYS = 30;

/** Executions (CONTRACT §14): the search bar, range, status and sort, the table, paging; all in the URL. */
export function ExecutionsPage(props: { loc: Location }) {
  const { params } = props.loc;
  const q = params.get('q') ?? '';
  const [text, setText] = useState(q);
  const timer = useRef<number | undefined>(undefined);
  const page = Number(params.get('page') ?? '1') || 1;
  const status = params.get('status') ?? '';
  const sort = params.get('sort') ?? '-startedAt';
  const range = params.get('range') ?? '24h';

  // The box follows the URL (back button, a link).
  useEffect(() => setText(q), [q]);

  const answer = useAnswer(
    (signal) => {
      const { from, to } = rangeOf(params);
      return get<Page<ExecutionRow>>(
        `/api/executions${qs({ q, status, sort, page, pageSize: 50, from: new Date(from).toISOString(), to: new Date(to).toISOString() })}`,
        signal,
      );
    },
    [props.loc],
  );
  const { data: result, error, loading } = answer;

  // As the user types: the query goes into the URL (replacing the entry) after a pause, and is checked then. The
  // URL is read when the pause ends (a filter changed meanwhile stays), and a page left meanwhile is left alone.
  useEffect(() => () => clearTimeout(timer.current), []);
  const onInput = (e: Event) => {
    const value = (e.target as HTMLInputElement).value;
    setText(value);
    clearTimeout(timer.current);
    timer.current = window.setTimeout(() => {
      if (location.pathname !== '/executions') return;
      navigate(withParams(new URLSearchParams(location.search), { q: value, page: null }), true);
    }, 350);
  };
  const onSubmit = (e: Event) => {
    e.preventDefault();
    clearTimeout(timer.current);
    navigate(withParams(params, { q: text, page: null }));
  };
  const set = (changes: Record<string, string | number | null>) => navigate(withParams(params, changes));
  const qError = error?.details.find((d) => d.path === 'q');
  const nothing = !!result && result.total === 0 && !q && !status;
  // Nothing in the range: is there anything at all? If not, the empty state; if so, where the latest one is. (Its
  // data is null until it has answered: nothing is shown on a guess.)
  const latest = useAnswer(
    (signal) =>
      nothing
        ? get<Page<ExecutionRow>>(
            `/api/executions${qs({ pageSize: 1, from: new Date(Date.now() - PROBE_DAYS * 86_400_000).toISOString() })}`,
            signal,
          ).then((r) => ({ latest: r.data[0] ?? null }))
        : Promise.resolve(null),
    [nothing, currentMode()],
  );
  const empty = nothing && latest.data !== null && latest.data.latest === null;
  // A failure that is not the request's own (the network, the service restarting) is tried again.
  const transient = (e: ApiError | null) => !!e && (e.status === 0 || e.status >= 500);
  // While the workspace is empty, or the last answer failed that way, look again every few seconds: the first
  // executions show up as they arrive, and the page comes back by itself.
  const retry = empty || transient(error) || transient(latest.error);
  useEffect(() => {
    if (!retry) return;
    const t = window.setTimeout(() => {
      answer.reload();
      if (nothing) latest.reload();
    }, 3000);
    return () => clearTimeout(t);
  }, [retry, result, error, latest.data, latest.error]);
  const shown = error ?? (nothing ? latest.error : null);

  return html`<main>
    <h1>Executions</h1>
    <form class="search" role="search" onSubmit=${onSubmit}>
      <label for="search" class="visually-hidden">Search</label>
      <input id="search" type="search" placeholder="service:checkout status:failed endpoint:/orders/* duration:>=100"
        value=${text} onInput=${onInput} aria-invalid=${qError ? 'true' : 'false'}
        aria-describedby=${error ? 'search-error' : undefined} />
      <label for="range">Time range</label>
      <select id="range" value=${range} onChange=${(e: Event) => set({ range: (e.target as HTMLSelectElement).value, from: null, to: null, page: null })}>
        ${Object.keys(RANGES).map((r) => html`<option value=${r}>Last ${r}</option>`)}
      </select>
      <label for="status">Status</label>
      <select id="status" value=${status} onChange=${(e: Event) => set({ status: (e.target as HTMLSelectElement).value, page: null })}>
        <option value="">Any</option><option value="failed">Failed</option><option value="success">Success</option>
        <option value="unknown">Unknown</option>
      </select>
      <label for="sort">Sort</label>
      <select id="sort" value=${sort} onChange=${(e: Event) => set({ sort: (e.target as HTMLSelectElement).value, page: null })}>
        ${SORTS.map(([v, label]) => html`<option value=${v}>${label}</option>`)}
      </select>
    </form>
    ${
      shown
        ? html`<div role="alert" id="search-error" class="error">
            <p>${qError ? qError.message : shown.message}${transient(shown) ? ' (trying again in a few seconds)' : ''}</p>
            ${qError ? html`<${MarkedQuery} q=${q} detail=${qError} />` : null}
          </div>`
        : null
    }
    ${empty ? html`<${EmptyState} mode=${currentMode()} />` : null}
    ${
      nothing && latest.data?.latest
        ? html`<p class="meta">No executions in this range. The latest was at
            <a href=${`/executions/${encodeURIComponent(latest.data.latest.executionId)}`}>${when(latest.data.latest.startedAt)}</a>;
            <button type="button" class="link" onClick=${() => set({ from: new Date(Date.parse(latest.data!.latest!.startedAt) - 3_600_000).toISOString(), to: null, range: null, page: null })}>show from an hour before it</button>.</p>`
        : null
    }
    ${
      result && !nothing && !error
        ? html`<p class="meta" aria-live="polite">${result.total.toLocaleString()} executions${loading ? ' (updating…)' : ''}</p>
          <div class="scroll"><table>
            <thead><tr><th>Started</th><th>Service</th><th>Endpoint</th><th>Status</th><th>Duration</th><th>Outcome</th></tr></thead>
            <tbody>${result.data.map(
              (e) => html`<tr class=${e.outcome}>
                <td><a href=${`/executions/${encodeURIComponent(e.executionId)}`}>${when(e.startedAt)}</a></td>
                <td>${e.service}</td>
                <td>${e.method ?? ''} ${e.endpoint}${e.exceptionType ? html` <span class="exc">${e.exceptionType}</span>` : null}</td>
                <td>${e.statusCode ?? '–'}</td>
                <td class="num">${ms(e.durationMs)}</td>
                <td>${e.outcome}</td>
              </tr>`,
            )}</tbody>
          </table></div>
          <nav class="pager" aria-label="Pages">
            <button type="button" disabled=${page <= 1} onClick=${() => set({ page: page - 1 })}>Previous</button>
            <span>Page ${page}</span>
            <button type="button" disabled=${!result.hasMore} onClick=${() => set({ page: page + 1 })}>Next</button>
          </nav>`
        : null
    }
  </main>`;
}

interface Detail extends ExecutionRow {
  traceId: string | null;
  spanId: string | null;
  parentSpanId: string | null;
  mode: string;
  source: string;
  outcomeReason: string;
  context: Record<string, unknown> | null;
  request: Record<string, unknown> | null;
  response: Record<string, unknown> | null;
  exception: { type: string; message: string; stack?: string | null } | null;
  outcomeEvidence: { kind: string; verdict?: string | null; detail?: string | null }[] | null;
  issue: { id: string; title: string; status: string } | null;
  logs: { timestamp: string; level: string; message: string; spanId: string | null }[];
  logsTruncated: boolean;
  spans: {
    spanId: string;
    parentSpanId: string | null;
    name: string;
    kind: string;
    startedAt: string;
    durationMs: number;
    status: string;
  }[];
}

const pretty = (v: unknown) => JSON.stringify(v, null, 2);

/** One execution (CONTRACT §14): a heading with its id, every field, its exception, logs and spans, its issue. */
export function ExecutionPage(props: { id: string }) {
  const { data: e, error } = useAnswer(
    (signal) => get<Detail>(`/api/executions/${encodeURIComponent(props.id)}`, signal),
    [props.id],
  );
  if (error)
    return html`<main><h1>${props.id}</h1><p role="alert">${error.status === 404 ? 'No such execution.' : error.message}</p></main>`;
  if (!e || e.executionId !== props.id) return html`<main><h1>${props.id}</h1><p>Loading…</p></main>`;
  const fields: [string, unknown][] = [
    ['Service', e.service],
    ['Environment', e.environment],
    ['Mode', e.mode],
    ['Source', e.source],
    ['Endpoint', `${e.method ?? ''} ${e.endpoint}`],
    ['Status', e.statusCode ?? '–'],
    ['Outcome', `${e.outcome} (${e.outcomeReason})`],
    ['Started', when(e.startedAt)],
    ['Duration', ms(e.durationMs)],
    [
      'Trace',
      e.traceId
        ? html`<a href=${`/executions?q=${encodeURIComponent(`trace:${e.traceId}`)}`}>${e.traceId}</a>`
        : '–',
    ],
    ['Span', e.spanId ?? '–'],
    ['Parent span', e.parentSpanId ?? '–'],
  ];
  return html`<main class="detail">
    <h1>${e.executionId}</h1>
    ${e.issue ? html`<p>Issue: <a href=${`/issues/${e.issue.id}`}>${e.issue.title}</a> (${e.issue.status})</p>` : null}
    <dl class="fields">${fields.map(([k, v]) => html`<dt>${k}</dt><dd>${v}</dd>`)}</dl>
    ${
      e.exception
        ? html`<section aria-label="Exception"><h2>Exception</h2>
            <p><strong>${e.exception.type}</strong>: ${e.exception.message}</p>
            ${e.exception.stack ? html`<pre>${e.exception.stack}</pre>` : null}</section>`
        : null
    }
    ${e.outcomeEvidence?.length ? html`<section aria-label="Evidence"><h2>Evidence</h2><pre>${pretty(e.outcomeEvidence)}</pre></section>` : null}
    ${e.context ? html`<section aria-label="Context"><h2>Context</h2><pre>${pretty(e.context)}</pre></section>` : null}
    ${e.request ? html`<section aria-label="Request"><h2>Request</h2><pre>${pretty(e.request)}</pre></section>` : null}
    ${e.response ? html`<section aria-label="Response"><h2>Response</h2><pre>${pretty(e.response)}</pre></section>` : null}
    <section aria-label="Logs"><h2>Logs (${e.logs.length}${e.logsTruncated ? '+' : ''})</h2>
      ${
        e.logs.length === 0
          ? html`<p>No logs.</p>`
          : html`<div class="scroll"><table><thead><tr><th>Time</th><th>Level</th><th>Message</th></tr></thead>
              <tbody>${e.logs.map((l) => html`<tr class=${`level-${l.level}`}><td>${when(l.timestamp)}</td><td>${l.level}</td><td>${l.message}</td></tr>`)}</tbody></table></div>`
      }
    </section>
    ${
      e.spans.length > 0
        ? html`<section aria-label="Spans"><h2>Spans (${e.spans.length})</h2>
            <div class="scroll"><table><thead><tr><th>Name</th><th>Kind</th><th>Started</th><th>Duration</th><th>Status</th></tr></thead>
            <tbody>${e.spans.map((s) => html`<tr><td>${s.name}</td><td>${s.kind}</td><td>${when(s.startedAt)}</td><td class="num">${ms(s.durationMs)}</td><td>${s.status}</td></tr>`)}</tbody></table></div></section>`
        : null
    }
  </main>`;
}
