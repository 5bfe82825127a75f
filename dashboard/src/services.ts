import { get, qs, useAnswer } from './api.js';
import { Chart } from './chart.js';
import { RANGES, rangeOf } from './executions.js';
import { html, ms } from './html.js';
import { type Location, navigate, withParams } from './router.js';

interface Figures {
  requests: number;
  throughputPerMin: number;
  failed: number;
  failureRate: number;
  latency: { avg: number | null; p50: number | null; p95: number | null; p99: number | null };
}
interface ServiceCard extends Figures {
  service: string;
  health: 'healthy' | 'degraded' | 'critical';
  previous: Figures;
}
interface Timeseries {
  series: { group: Record<string, string | null>; points: { t: string; value: number | null }[] }[];
}
interface EndpointRow {
  service: string;
  method: string | null;
  endpoint: string;
  requests: number;
  failureRate: number;
  p50: number | null;
  p95: number | null;
  p99: number | null;
}

/** The interval that keeps a range's charts near a few hundred points. */
function intervalOf(span: number): string {
  if (span <= 3 * 3_600_000) return '1m';
  if (span <= 24 * 3_600_000) return '5m';
  if (span <= 3 * 86_400_000) return '15m';
  return '1h';
}

const pct = (n: number) => `${(n * 100).toFixed(n < 0.01 ? 2 : 1)} %`;

/** The change from the previous period, as the card says it. */
function delta(now: number | null, before: number | null, unit: (n: number) => string) {
  if (now === null || before === null || before === 0) return '';
  const d = (now - before) / before;
  return ` (${d >= 0 ? '+' : ''}${Math.round(d * 100)} % vs previous, was ${unit(before)})`;
}

/** A value of the query language, quoted (it may hold spaces or quotes). */
const quoted = (v: string) => `"${v.replace(/"/g, '\\"')}"`;

/**
 * The executions of an endpoint over the page's range: the search that lists them. Endpoints are grouped by their
 * template (`/items/:id`) while executions keep the path as sent, so a template with an id segment is searched as
 * the prefix before it (`/items/*`, which also holds any deeper path under it).
 */
function executionsOf(e: EndpointRow, params: URLSearchParams): string {
  const id = e.endpoint.indexOf('/:id');
  const endpoint = id >= 0 ? `${e.endpoint.slice(0, id + 1)}*` : e.endpoint;
  const terms = [`service:${quoted(e.service)}`, `endpoint:${quoted(endpoint)}`];
  if (e.method) terms.push(`method:${e.method}`);
  const out = new URLSearchParams({ q: terms.join(' ') });
  for (const k of ['range', 'from', 'to']) {
    const v = params.get(k);
    if (v) out.set(k, v);
  }
  return `/executions?${out}`;
}

const ENDPOINT_SORTS: [string, string][] = [
  ['requests', 'Requests'],
  ['failure_rate', 'Failure rate'],
  ['p95', 'p95'],
  ['p99', 'p99'],
];

/**
 * Services (CONTRACT §14): a card per service against the previous period; for the chosen one, charts of requests,
 * failure rate and latency (regions `Requests`, `Failure rate`, `Latency`) and its top endpoints.
 */
export function ServicesPage(props: { loc: Location }) {
  const { params } = props.loc;
  const range = params.get('range') ?? '24h';
  const sort = params.get('sort') ?? 'requests';
  const from = params.get('from');
  const to = params.get('to');
  const mode = params.get('mode');
  const asked = () => {
    const w = rangeOf(params);
    return { from: new Date(w.from).toISOString(), to: new Date(w.to).toISOString(), span: w.to - w.from };
  };
  const overview = useAnswer(
    (signal) => {
      const w = asked();
      return get<{ services: ServiceCard[] }>(
        `/api/metrics/overview${qs({ from: w.from, to: w.to })}`,
        signal,
      ).then((r) => r.services);
    },
    [range, from, to, mode],
  );
  const cards = overview.data;
  // The service asked for, else the first card of the current overview (not of the one before a change of range
  // or mode: its charts would be asked for nothing).
  const chosen = params.get('service') ?? (overview.loading ? '' : (cards?.[0]?.service ?? ''));
  // Each answer names the service it is of: while another one's are asked, the old ones are not shown as its.
  const charts = useAnswer(
    async (signal) => {
      if (!chosen) return null;
      const w = asked();
      const ts = (metric: string) =>
        get<Timeseries>(
          `/api/metrics/timeseries${qs({ serviceName: chosen, from: w.from, to: w.to, metric, interval: intervalOf(w.span) })}`,
          signal,
        ).then((r) => r.series[0]?.points ?? []);
      const [requests, failures, p50, p95, p99] = await Promise.all([
        ts('requests'),
        ts('failure_rate'),
        ts('latency_p50'),
        ts('latency_p95'),
        ts('latency_p99'),
      ]);
      const values = (points: { value: number | null }[]) => points.map((p) => p.value);
      return {
        service: chosen,
        times: requests.map((p) => Date.parse(p.t) / 1000),
        requests: [{ label: 'requests', values: values(requests), color: '#2754c5' }],
        failures: [
          {
            label: 'failure rate',
            values: failures.map((p) => (p.value === null ? null : p.value * 100)),
            color: '#b3261e',
          },
        ],
        latency: [
          { label: 'p50', values: values(p50), color: '#1e7b34' },
          { label: 'p95', values: values(p95), color: '#c77700' },
          { label: 'p99', values: values(p99), color: '#b3261e' },
        ],
      };
    },
    [chosen, range, from, to, mode],
  );
  const endpoints = useAnswer(
    async (signal) => {
      if (!chosen) return { service: chosen, rows: [] as EndpointRow[] };
      const w = asked();
      const r = await get<{ data: EndpointRow[] }>(
        `/api/metrics/endpoints${qs({ serviceName: chosen, from: w.from, to: w.to, sort, limit: 20 })}`,
        signal,
      );
      return { service: chosen, rows: r.data };
    },
    [chosen, range, sort, from, to, mode],
  );
  const error = overview.error ?? charts.error ?? endpoints.error;
  const shown = charts.data?.service === chosen ? charts.data : null;
  const rows = endpoints.data?.service === chosen ? endpoints.data.rows : [];
  const set = (changes: Record<string, string | null>) => navigate(withParams(params, changes));
  return html`<main>
    <h1>Services</h1>
    <div class="search">
      <label for="range">Time range</label>
      <select id="range" value=${range} onChange=${(e: Event) => set({ range: (e.target as HTMLSelectElement).value, from: null, to: null })}>
        ${Object.keys(RANGES).map((r) => html`<option value=${r}>Last ${r}</option>`)}
      </select>
    </div>
    ${error ? html`<p role="alert" class="error">${error.message}</p>` : null}
    ${cards && cards.length === 0 ? html`<p>No requests in this range. Send some (see Executions).</p>` : null}
    <div class="cards">${(cards ?? []).map(
      (
        c,
      ) => html`<a class=${`card ${c.health}${c.service === chosen ? ' chosen' : ''}`} href=${withParams(params, { service: c.service })}>
        <h2>${c.service}</h2>
        <p class="health">${c.health}</p>
        <p>${c.requests.toLocaleString()} requests${delta(c.requests, c.previous.requests, (n) => n.toLocaleString())}</p>
        <p>failure rate ${pct(c.failureRate)}${delta(c.failureRate, c.previous.failureRate, pct)}</p>
        <p>p50 ${ms(c.latency.p50)} · p95 ${ms(c.latency.p95)} · p99 ${ms(c.latency.p99)}${delta(c.latency.p95, c.previous.latency.p95, ms)}</p>
      </a>`,
    )}</div>
    ${
      chosen && shown
        ? html`<h2>${chosen}</h2>
          <div class="charts">
            <${Chart} label="Requests" times=${shown.times} series=${shown.requests} />
            <${Chart} label="Failure rate" times=${shown.times} series=${shown.failures} unit="%" />
            <${Chart} label="Latency" times=${shown.times} series=${shown.latency} unit=" ms" />
          </div>
          <h2>Top endpoints</h2>
          <div class="search"><label for="endpoint-sort">Sort by</label>
            <select id="endpoint-sort" value=${sort} onChange=${(e: Event) => set({ sort: (e.target as HTMLSelectElement).value })}>
              ${ENDPOINT_SORTS.map(([v, l]) => html`<option value=${v}>${l}</option>`)}
            </select></div>
          <div class="scroll"><table aria-label="Top endpoints"><thead><tr><th>Endpoint</th><th>Requests</th><th>Failure rate</th><th>p50</th><th>p95</th><th>p99</th></tr></thead>
            <tbody>${rows.map(
              (e) => html`<tr><td><a href=${executionsOf(e, params)}>${e.method ?? ''} ${e.endpoint}</a></td>
                <td class="num">${e.requests.toLocaleString()}</td><td class="num">${pct(e.failureRate)}</td>
                <td class="num">${ms(e.p50)}</td><td class="num">${ms(e.p95)}</td><td class="num">${ms(e.p99)}</td></tr>`,
            )}</tbody></table></div>`
        : null
    }
  </main>`;
}
