import { useEffect, useState } from 'preact/hooks';
import { get, qs } from './api.js';
import { Chart, type ChartSeries } from './chart.js';
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
  const [cards, setCards] = useState<ServiceCard[] | null>(null);
  const [charts, setCharts] = useState<{
    times: number[];
    requests: ChartSeries[];
    failures: ChartSeries[];
    latency: ChartSeries[];
  } | null>(null);
  const [endpoints, setEndpoints] = useState<EndpointRow[]>([]);
  const [error, setError] = useState<string | null>(null);
  const range = params.get('range') ?? '24h';
  const sort = params.get('sort') ?? 'requests';
  const chosen = params.get('service') ?? cards?.[0]?.service ?? '';
  useEffect(() => {
    const { from, to } = rangeOf(params);
    get<{ services: ServiceCard[] }>(
      `/api/metrics/overview${qs({ from: new Date(from).toISOString(), to: new Date(to).toISOString() })}`,
    )
      .then((r) => setCards(r.services))
      .catch((err) => setError(String(err.message ?? err)));
  }, [range, params.get('from'), params.get('to')]);
  useEffect(() => {
    if (!chosen) return;
    const { from, to } = rangeOf(params);
    const base = { serviceName: chosen, from: new Date(from).toISOString(), to: new Date(to).toISOString() };
    const interval = intervalOf(to - from);
    const ts = (metric: string) =>
      get<Timeseries>(`/api/metrics/timeseries${qs({ ...base, metric, interval })}`).then(
        (r) => r.series[0]?.points ?? [],
      );
    Promise.all([ts('requests'), ts('failure_rate'), ts('latency_p50'), ts('latency_p95'), ts('latency_p99')])
      .then(([requests, failures, p50, p95, p99]) => {
        const times = requests.map((p) => Date.parse(p.t) / 1000);
        const values = (points: { value: number | null }[]) => points.map((p) => p.value);
        setCharts({
          times,
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
        });
      })
      .catch((err) => setError(String(err.message ?? err)));
    get<{ data: EndpointRow[] }>(`/api/metrics/endpoints${qs({ ...base, sort, limit: 20 })}`)
      .then((r) => setEndpoints(r.data))
      .catch(() => setEndpoints([]));
  }, [chosen, range, sort, params.get('from'), params.get('to')]);
  const set = (changes: Record<string, string | null>) => navigate(withParams(params, changes));
  return html`<main>
    <h1>Services</h1>
    <div class="search">
      <label for="range">Time range</label>
      <select id="range" value=${range} onChange=${(e: Event) => set({ range: (e.target as HTMLSelectElement).value })}>
        ${Object.keys(RANGES).map((r) => html`<option value=${r}>Last ${r}</option>`)}
      </select>
    </div>
    ${error ? html`<p role="alert" class="error">${error}</p>` : null}
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
      chosen && charts
        ? html`<h2>${chosen}</h2>
          <div class="charts">
            <${Chart} label="Requests" times=${charts.times} series=${charts.requests} />
            <${Chart} label="Failure rate" times=${charts.times} series=${charts.failures} unit="%" />
            <${Chart} label="Latency" times=${charts.times} series=${charts.latency} unit=" ms" />
          </div>
          <h2>Top endpoints</h2>
          <div class="search"><label for="endpoint-sort">Sort by</label>
            <select id="endpoint-sort" value=${sort} onChange=${(e: Event) => set({ sort: (e.target as HTMLSelectElement).value })}>
              ${ENDPOINT_SORTS.map(([v, l]) => html`<option value=${v}>${l}</option>`)}
            </select></div>
          <div class="scroll"><table aria-label="Top endpoints"><thead><tr><th>Endpoint</th><th>Requests</th><th>Failure rate</th><th>p50</th><th>p95</th><th>p99</th></tr></thead>
            <tbody>${endpoints.map(
              (
                e,
              ) => html`<tr><td><a href=${`/executions?q=${encodeURIComponent(`service:${e.service} endpoint:${e.endpoint}`)}&range=${range}`}>${e.method ?? ''} ${e.endpoint}</a></td>
                <td class="num">${e.requests.toLocaleString()}</td><td class="num">${pct(e.failureRate)}</td>
                <td class="num">${ms(e.p50)}</td><td class="num">${ms(e.p95)}</td><td class="num">${ms(e.p99)}</td></tr>`,
            )}</tbody></table></div>`
        : null
    }
  </main>`;
}
