import { existsSync } from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { gzipSync } from 'node:zlib';
import { type Browser, type CDPSession, chromium, type Page, type Request } from 'playwright-core';
import { nodeFlags } from '../main.js';
import { HOUR_MS } from '../schemas/time.js';
import { type DatasetMarker, prepareDataset } from './support/dataset.js';
import { timeGets } from './support/http-timer.js';
import { wholeNumber } from './support/options.js';
import { serviceEntry } from './support/service-process.js';
import {
  type BenchService,
  OWNER_EMAIL,
  OWNER_PASSWORD,
  startBenchService,
} from './support/service-session.js';
import { quantile } from './support/stats.js';

/**
 * The web dashboard (CONTRACT §14) in a real headless Chromium over a realistic workspace (default 1M executions
 * over 6 hours, the query benchmark's dataset): the page weight gzipped, and the time from navigation to the
 * executions table and to the services charts being drawn, split into what waits for the API and what the page
 * does after the API answers (the issue's aim: ≤ 300 ms after the API answers).
 *
 * The service runs as its own process, as `npm start` runs it, so the bench's own work (Playwright's protocol, the
 * dataset) does not share its thread. The times are taken inside the page: a script installed before the app
 * (addInitScript) watches the DOM and marks `performance.now()` when the executions table has its first row and
 * when the three chart regions (`Requests`, `Failure rate`, `Latency`) have their canvas, then the next frame
 * after that (drawn); the API's share comes from the page's resource timings of its `/api/` requests. A full
 * load starts at navigation (time origin 0), with the HTTP cache cleared (a first visit) unless --warm-cache; an
 * in-app navigation starts at the click on the nav link (the event's timestamp). Every load is checked before it
 * counts: the table has rows and its total is above 0, the charts' canvases hold their series' coloured pixels.
 *
 * The views: /executions and /services over the dataset's window (explicit `from`/`to`, so a dataset reused from
 * another day still shows data); the quick ranges `24h` (the default) and `1h` when they reach into the window;
 * and the in-app navigations by the nav links, which keep the range of the view they leave. Loads go
 * round by round, every view once a round, after the warm-up rounds.
 *
 * Baselines from the same run, for the two views over the dataset's window: their API requests replayed from Node
 * in the page's order and concurrency (the API phase without the browser), and each request alone.
 *
 *   npm run bench -- dashboard [--executions N] [--hours H] [--runs N] [--warm-cache] [--data-dir DIR] [--keep]
 */

const here = path.dirname(fileURLToPath(import.meta.url));
const resultsDir = path.resolve(here, '..', '..', 'bench', 'results');

/** The issue's aim: the table and the charts drawn at most this long after the API answers. */
const AIM_AFTER_API_MS = 300;
/** How long a page may take to show its table or charts before the load counts as broken. */
const VIEW_TIMEOUT_MS = 60_000;
const CHARTS = ['Requests', 'Failure rate', 'Latency'];
/**
 * The requests the table or the charts wait for (dashboard/src: the session check, then the page's own). The top
 * endpoints' request runs beside the charts' and often answers before they are drawn, but they do not need it:
 * counting it would move "after the API answers" off the charts' data.
 */
const NEEDED: Record<Kind, RegExp> = {
  table: /^\/api\/(auth\/me|executions)$/,
  charts: /^\/api\/(auth\/me|metrics\/overview|metrics\/timeseries)$/,
};
/** The views whose API requests are also timed straight from Node (the baseline): the dataset's whole window. */
const BASELINE_VIEWS = ['executions', 'services'];

const USAGE = `usage: npm run bench -- dashboard [options]
  --executions N   executions in the dataset (1000000)
  --hours H        time span of the dataset, ending when it is generated (6)
  --seed N         generator seed (42)
  --runs N         measured loads of each view, after the warm-up (10)
  --warmup N       warm-up loads of each view (2)
  --warm-cache     keep the browser's HTTP cache between full loads (default: cleared, a first visit)
  --data-dir DIR   keep the dataset here and reuse it when its parameters match; default a temp dir
  --keep           keep the temp dir at the end
`;

interface Options {
  executions: number;
  hours: number;
  seed: number;
  runs: number;
  warmup: number;
  warmCache: boolean;
  dataDir: string | null;
  keep: boolean;
}

function parseOptions(args: string[]): Options | null {
  const { values } = parseArgs({
    args,
    options: {
      executions: { type: 'string', default: '1000000' },
      hours: { type: 'string', default: '6' },
      seed: { type: 'string', default: '42' },
      runs: { type: 'string', default: '10' },
      warmup: { type: 'string', default: '2' },
      'warm-cache': { type: 'boolean', default: false },
      'data-dir': { type: 'string' },
      keep: { type: 'boolean', default: false },
      help: { type: 'boolean', default: false },
    },
    strict: true,
    allowPositionals: false,
  });
  if (values.help) {
    process.stdout.write(USAGE);
    return null;
  }
  const int = wholeNumber;
  return {
    executions: int('executions', values.executions, 1000, 1_000_000_000),
    hours: int('hours', values.hours, 2, 24 * 30),
    seed: int('seed', values.seed, 0, 2 ** 31),
    runs: int('runs', values.runs, 1, 10_000),
    warmup: int('warmup', values.warmup, 0, 100),
    warmCache: values['warm-cache'],
    dataDir: values['data-dir'] ? path.resolve(values['data-dir']) : null,
    keep: values.keep,
  };
}

/**
 * Installed in every document before the app's script (plain JavaScript: it runs in the page). Marks are
 * `performance.now()` values, on the page's timeline, as are the resource timings; `arm()` starts an in-app
 * measure, whose origin is the timestamp of the next click.
 */
const IN_PAGE = `(() => {
  const CHARTS = ${JSON.stringify(CHARTS)};
  const b = { t0: 0, armed: false, marks: { table: null, charts: null }, drawn: { table: null, charts: null }, waiters: [] };
  window.__bench = b;
  performance.setResourceTimingBufferSize(10000);
  const title = () => document.querySelector('main > h1')?.textContent;
  const chart = (label) => document.querySelector('section[role="region"][aria-label="' + label + '"] canvas');
  const reached = {
    table: () => title() === 'Executions' && document.querySelector('main table tbody tr') !== null,
    charts: () => title() === 'Services' && CHARTS.every((l) => chart(l) !== null),
  };
  const check = () => {
    for (const kind of ['table', 'charts']) {
      if (b.marks[kind] !== null || !reached[kind]()) continue;
      b.marks[kind] = performance.now();
      // Drawn: the frame that shows it has been produced (the task after the next animation frame).
      requestAnimationFrame(() => {
        const c = new MessageChannel();
        c.port1.onmessage = () => {
          b.drawn[kind] = performance.now();
          for (const w of b.waiters.splice(0)) w();
        };
        c.port2.postMessage(null);
      });
    }
  };
  new MutationObserver(check).observe(document, { childList: true, subtree: true, characterData: true });
  document.addEventListener('click', (e) => {
    if (!b.armed) return;
    b.armed = false;
    b.t0 = e.timeStamp;
  }, true);
  b.arm = () => {
    b.armed = true;
    b.marks = { table: null, charts: null };
    b.drawn = { table: null, charts: null };
    performance.clearResourceTimings();
  };
  b.until = (kind, timeoutMs) => new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(kind + ' not shown after ' + timeoutMs + ' ms on ' +
      location.pathname + location.search + ': ' + (document.querySelector('main')?.innerText ?? '').slice(0, 400))), timeoutMs);
    const done = () => {
      if (b.drawn[kind] === null) return b.waiters.push(done);
      clearTimeout(timer);
      resolve();
    };
    done();
  });
  const colouredPixels = (canvas) => {
    if (!canvas) return 0;
    const d = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
    let n = 0;
    // The axes and grid are grey; only a series' line or points are coloured.
    for (let i = 0; i < d.length; i += 4)
      if (d[i + 3] > 0 && Math.max(d[i], d[i + 1], d[i + 2]) - Math.min(d[i], d[i + 1], d[i + 2]) > 60) n++;
    return n;
  };
  const numberIn = (text) => Number(((text ?? '').match(/^[\\d,.\\s\\u00a0\\u202f]+/)?.[0] ?? '').replace(/[^\\d]/g, '') || NaN);
  b.report = () => ({
    t0: b.t0,
    marks: b.marks,
    drawn: b.drawn,
    url: location.pathname + location.search,
    api: performance.getEntriesByType('resource')
      .filter((e) => e.initiatorType === 'fetch' && new URL(e.name).pathname.startsWith('/api/'))
      .map((e) => ({ url: e.name, start: e.startTime, end: e.responseEnd, bytes: e.encodedBodySize })),
    assets: performance.getEntriesByType('resource')
      .filter((e) => !new URL(e.name).pathname.startsWith('/api/'))
      .map((e) => ({ url: e.name, transferred: e.transferSize })),
    rows: document.querySelectorAll('main table tbody tr').length,
    total: numberIn(document.querySelector('main p.meta')?.textContent),
    cards: [...document.querySelectorAll('.cards a.card')].map((c) => ({
      service: c.querySelector('h2')?.textContent ?? '',
      requests: numberIn(c.querySelectorAll('p')[1]?.textContent),
    })),
    chosen: document.querySelector('.charts')?.previousElementSibling?.textContent ?? null,
    chartPixels: Object.fromEntries(CHARTS.map((l) => [l, colouredPixels(chart(l))])),
  });
})();`;

interface ApiEntry {
  url: string;
  start: number;
  end: number;
  bytes: number;
}

/** What the page reports after a load (IN_PAGE's `report()`). */
interface PageReport {
  t0: number;
  marks: { table: number | null; charts: number | null };
  drawn: { table: number | null; charts: number | null };
  url: string;
  api: ApiEntry[];
  assets: { url: string; transferred: number }[];
  rows: number;
  total: number;
  cards: { service: string; requests: number }[];
  chosen: string | null;
  chartPixels: Record<string, number>;
}

type Kind = 'table' | 'charts';

interface View {
  key: string;
  label: string;
  kind: Kind;
  /** A full load of `url`, or an in-app navigation: `from` loaded first, then a click on the nav link `link`. */
  how: { load: 'full'; url: string } | { load: 'in-app'; from: string; fromKind: Kind; link: string };
  /** The executions the view must show in all, when known (the whole dataset's window). */
  expectTotal: number | null;
}

/** One measured load, in ms from its origin (navigation start, or the click). */
interface Load {
  url: string;
  /** Until the table's first row, or the three canvases, are in the DOM. */
  toDom: number;
  /** Until the frame after that: drawn. */
  toDrawn: number;
  /** Until the first API request starts (the page's script loaded and run; for a full load, the session check). */
  toFirstApi: number;
  /** From the first API request's start to the last answer (responseEnd) the view needs, before the DOM mark. */
  api: number;
  /** From that last answer to drawn: the aim's figure. */
  afterApi: number;
  afterApiDom: number;
  /**
   * Of `api`, the time no needed request was in flight: the page between an answer and the request it leads to
   * (rendering, effects that wait for a frame).
   */
  idle: number;
  /** The needed API request whose answer came last before the mark. */
  lastApi: string;
  /** Every API request of the load; start and end from the origin. */
  calls: Call[];
  shown: number;
}

interface Call {
  key: string;
  url: string;
  start: number;
  end: number;
  bytes: number;
  /** One the table or charts wait for (NEEDED), answered before they showed. */
  needed: boolean;
}

/** The time inside [from, to] that none of the intervals covers. */
function uncovered(intervals: { start: number; end: number }[], from: number, to: number): number {
  let covered = 0;
  let reach = from;
  for (const i of [...intervals].sort((a, b) => a.start - b.start)) {
    const start = Math.max(i.start, reach);
    const end = Math.min(i.end, to);
    if (end > start) covered += end - start;
    reach = Math.max(reach, end);
  }
  return to - from - covered;
}

/** A request's name in the tables: its path, and the metric for a timeseries. */
function apiKey(url: string): string {
  const u = new URL(url);
  const metric = u.searchParams.get('metric');
  return metric ? `${u.pathname}?metric=${metric}` : u.pathname;
}

/** Checks what the page shows (a benchmark that times an empty page is worthless) and derives the figures. */
function loadOf(view: View, r: PageReport, warnings: string[]): Load {
  const kind = view.kind;
  const mark = r.marks[kind];
  const drawn = r.drawn[kind];
  if (mark === null || drawn === null) throw new Error(`${view.key}: no ${kind} mark on ${r.url}`);
  let shown: number;
  if (kind === 'table') {
    if (r.rows === 0 || !(r.total > 0))
      throw new Error(`${view.key}: ${r.url} shows ${r.rows} rows of ${r.total} executions`);
    shown = r.total;
  } else {
    shown = r.cards.reduce((a, c) => a + c.requests, 0);
    if (r.cards.length === 0 || !(shown > 0))
      throw new Error(`${view.key}: ${r.url} shows ${r.cards.length} service cards, ${shown} requests`);
    const blank = CHARTS.filter((l) => !(r.chartPixels[l]! > 0));
    if (blank.length > 0)
      throw new Error(
        `${view.key}: on ${r.url} the chart(s) ${blank.join(', ')} of ${r.chosen} have no series drawn`,
      );
  }
  if (view.expectTotal !== null && shown !== view.expectTotal) {
    const w = `${view.key}: shows ${shown} executions, the dataset has ${view.expectTotal}`;
    if (!warnings.includes(w)) warnings.push(w);
  }
  const api = r.api.filter((a) => a.start >= r.t0);
  const before = api.filter((a) => a.end <= mark && NEEDED[kind].test(new URL(a.url).pathname));
  if (before.length === 0) throw new Error(`${view.key}: no API answer before the ${kind} on ${r.url}`);
  const first = Math.min(...before.map((a) => a.start));
  const last = before.reduce((a, b) => (b.end > a.end ? b : a));
  return {
    url: r.url,
    toDom: mark - r.t0,
    toDrawn: drawn - r.t0,
    toFirstApi: first - r.t0,
    api: last.end - first,
    afterApi: drawn - last.end,
    afterApiDom: mark - last.end,
    idle: uncovered(before, first, last.end),
    lastApi: apiKey(last.url),
    calls: api.map((a) => ({
      key: apiKey(a.url),
      url: a.url,
      start: a.start - r.t0,
      end: a.end - r.t0,
      bytes: a.bytes,
      needed: before.includes(a),
    })),
    shown,
  };
}

/** The page in one browser context (its cookie session), with the in-page probe and an API request count. */
class Probe {
  #inflight = 0;
  readonly errors: string[] = [];

  private constructor(
    readonly page: Page,
    readonly cdp: CDPSession,
  ) {
    const isApi = (url: string) => new URL(url).pathname.startsWith('/api/');
    page.on('request', (q) => {
      if (isApi(q.url())) this.#inflight++;
    });
    const done = (q: Request) => {
      if (isApi(q.url())) this.#inflight--;
    };
    page.on('requestfinished', done);
    page.on('requestfailed', done);
    page.on('pageerror', (e) => this.errors.push(String(e)));
    page.on('console', (m) => {
      if (m.type() === 'error') this.errors.push(`${m.text()} ${m.location().url}`);
    });
  }

  static async open(browser: Browser, base: string): Promise<Probe> {
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    await context.addInitScript(IN_PAGE);
    const page = await context.newPage();
    const probe = new Probe(page, await context.newCDPSession(page));
    // Signed in once through the form; the context keeps the session's cookie.
    await page.goto(`${base}/login`);
    await page.getByLabel('Email').fill(OWNER_EMAIL);
    await page.getByLabel('Password').fill(OWNER_PASSWORD);
    await page.getByRole('button', { name: 'Log in' }).click();
    await page.waitForURL(/\/executions/);
    await page.getByRole('navigation', { name: 'Main' }).waitFor();
    await probe.settle();
    // The 401 of the session check before sign-in is the page's expected way to find it is signed out.
    probe.errors.length = 0;
    return probe;
  }

  /** Until no API request is in flight: what a view asks after its mark must not load the service during the next. */
  async settle(): Promise<void> {
    const deadline = Date.now() + VIEW_TIMEOUT_MS;
    while (this.#inflight > 0) {
      if (Date.now() > deadline) throw new Error(`API requests still in flight after ${VIEW_TIMEOUT_MS} ms`);
      await new Promise((r) => setTimeout(r, 10));
    }
  }

  async until(kind: Kind): Promise<PageReport> {
    await this.page.evaluate(`window.__bench.until(${JSON.stringify(kind)}, ${VIEW_TIMEOUT_MS})`);
    await this.settle();
    if (this.errors.length > 0) throw new Error(`the page reported errors: ${this.errors.join('; ')}`);
    return this.page.evaluate<PageReport>('window.__bench.report()');
  }

  async load(view: View, base: string, warmCache: boolean): Promise<PageReport> {
    const how = view.how;
    if (how.load === 'full') {
      if (!warmCache) await this.cdp.send('Network.clearBrowserCache');
      await this.page.goto(`${base}${how.url}`, { waitUntil: 'domcontentloaded' });
      return this.until(view.kind);
    }
    await this.page.goto(`${base}${how.from}`, { waitUntil: 'domcontentloaded' });
    await this.until(how.fromKind);
    await this.page.evaluate('window.__bench.arm()');
    await this.page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: how.link }).click();
    return this.until(view.kind);
  }
}

/**
 * What the first visit downloads, each file raw, gzipped at level 9 (the issue's measure), and as the browser got
 * it (the service sends the build's brotli copies to a browser that accepts them; the resource timing's transfer
 * size, headers included).
 */
async function pageWeight(base: string, first: PageReport) {
  const html = await (await fetch(`${base}/`)).text();
  const referenced = [...html.matchAll(/(?:src|href)="(\/[^"]+)"/g)].map((m) => new URL(m[1]!, base).href);
  const loaded = first.assets.map((a) => a.url).filter((u) => u.startsWith(base));
  const missing = referenced.filter((u) => !loaded.includes(u));
  if (missing.length > 0)
    throw new Error(`the page references ${missing.join(', ')}, which the browser did not load`);
  const files = [];
  for (const url of [`${base}/`, ...new Set(loaded)]) {
    const res = await fetch(url);
    if (res.status !== 200) throw new Error(`GET ${url}: ${res.status}`);
    const body = Buffer.from(await res.arrayBuffer());
    files.push({
      path: new URL(url).pathname,
      raw: body.length,
      gzip: gzipSync(body, { level: 9 }).length,
      transferred: first.assets.find((a) => a.url === url)?.transferred ?? null,
    });
  }
  return {
    files,
    raw: files.reduce((a, f) => a + f.raw, 0),
    gzip: files.reduce((a, f) => a + f.gzip, 0),
    transferred: files.reduce((a, f) => a + (f.transferred ?? 0), 0),
  };
}

/**
 * Whether the services page's API answers have data over the window (the charts come from the per-minute rollups
 * that compaction writes beside each hour's file): its calls, as it makes them, straight from Node.
 */
async function checkApi(b: BenchService, from: number, to: number) {
  const range = `from=${new Date(from).toISOString()}&to=${new Date(to).toISOString()}`;
  const ov = await b.get<{ services: { service: string; requests: number }[] }>(
    `/api/metrics/overview?${range}`,
  );
  const requests = ov.services.reduce((a, s) => a + s.requests, 0);
  const service = ov.services[0]?.service;
  if (!service || requests === 0) throw new Error(`GET /api/metrics/overview?${range}: no requests`);
  const base = `${range}&serviceName=${encodeURIComponent(service)}`;
  const points: Record<string, number> = {};
  for (const metric of ['requests', 'failure_rate', 'latency_p50', 'latency_p95', 'latency_p99']) {
    const ts = await b.get<{ series: { points: { value: number | null }[] }[] }>(
      `/api/metrics/timeseries?${base}&metric=${metric}&interval=5m`,
    );
    points[metric] = (ts.series[0]?.points ?? []).filter((p) => p.value !== null).length;
    if (points[metric] === 0)
      throw new Error(`GET /api/metrics/timeseries (${metric}, ${service}): no points`);
  }
  const ep = await b.get<{ data: unknown[] }>(`/api/metrics/endpoints?${base}&sort=requests&limit=20`);
  const ex = await b.get<{ total: number }>(`/api/executions?${range}&pageSize=50`);
  return {
    services: ov.services.length,
    requests,
    service,
    points,
    endpoints: ep.data.length,
    executions: ex.total,
  };
}

/**
 * The API phase without the browser: a load's requests sent from Node in the page's order and concurrency (a
 * request that started after every request before it had answered waits for them, as the page's did), timed from
 * the first to the last needed answer.
 */
async function replay(calls: Call[], headers: Record<string, string>, runs: number, warmup: number) {
  const waves: Call[][] = [];
  let answered = Number.NEGATIVE_INFINITY;
  for (const c of [...calls].sort((a, b) => a.start - b.start)) {
    if (c.start >= answered || waves.length === 0) waves.push([]);
    waves.at(-1)!.push(c);
    answered = Math.max(...waves.at(-1)!.map((w) => w.end));
  }
  const once = async () => {
    const started = performance.now();
    let lastNeeded = started;
    for (const wave of waves)
      await Promise.all(
        wave.map(async (c) => {
          const res = await fetch(c.url, { headers });
          await res.arrayBuffer();
          if (res.status !== 200) throw new Error(`GET ${c.url}: ${res.status}`);
          if (c.needed) lastNeeded = Math.max(lastNeeded, performance.now());
        }),
      );
    return lastNeeded - started;
  };
  for (let i = 0; i < warmup; i++) await once();
  const ms: number[] = [];
  for (let i = 0; i < runs; i++) ms.push(await once());
  return { ...summarize(ms), waves: waves.map((w) => w.map((c) => c.key)) };
}

function views(m: DatasetMarker, now: number): { views: View[]; skipped: string[] } {
  const window = `from=${new Date(m.fromMs).toISOString()}&to=${new Date(m.toMs).toISOString()}`;
  const all = m.params.executions;
  const list: View[] = [
    {
      key: 'executions',
      label: `/executions, the dataset's ${m.params.hours} h`,
      kind: 'table',
      how: { load: 'full', url: `/executions?${window}` },
      expectTotal: all,
    },
    {
      key: 'services',
      label: `/services, the dataset's ${m.params.hours} h`,
      kind: 'charts',
      how: { load: 'full', url: `/services?${window}` },
      expectTotal: all,
    },
    // The nav links keep the range of the view they are clicked on: the dataset's window here too.
    {
      key: 'executions:in-app',
      label: 'Services → nav link Executions',
      kind: 'table',
      how: { load: 'in-app', from: `/services?${window}`, fromKind: 'charts', link: 'Executions' },
      expectTotal: all,
    },
    {
      key: 'services:in-app',
      label: 'Executions → nav link Services',
      kind: 'charts',
      how: { load: 'in-app', from: `/executions?${window}`, fromKind: 'table', link: 'Services' },
      expectTotal: all,
    },
  ];
  const skipped: string[] = [];
  // The quick ranges end now: timed only when they reach into the dataset's window.
  for (const [range, span] of [
    ['24h', 24 * HOUR_MS],
    ['1h', HOUR_MS],
  ] as const) {
    if (m.toMs <= now - span) {
      skipped.push(`range=${range} (the dataset ended ${((now - m.toMs) / HOUR_MS).toFixed(1)} h ago)`);
      continue;
    }
    const whole = m.fromMs >= now - span ? all : null;
    list.push(
      {
        key: `executions:${range}`,
        label: `/executions?range=${range}`,
        kind: 'table',
        how: { load: 'full', url: `/executions?range=${range}` },
        expectTotal: whole,
      },
      {
        key: `services:${range}`,
        label: `/services?range=${range}`,
        kind: 'charts',
        how: { load: 'full', url: `/services?range=${range}` },
        expectTotal: whole,
      },
    );
  }
  return { views: list, skipped };
}

interface Summary {
  p50: number;
  p95: number;
}

function summarize(samples: number[]): Summary {
  const s = [...samples].sort((a, b) => a - b);
  return { p50: quantile(s, 0.5) ?? Number.NaN, p95: quantile(s, 0.95) ?? Number.NaN };
}

const fmt = (n: number, digits = 0) =>
  n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });
const both = (s: Summary) => `${fmt(s.p50)} / ${fmt(s.p95)}`;

function table(header: string[], rows: string[][], textColumns = 1): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) =>
        i < textColumns || i === cells.length - 1 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!),
      )
      .join('  ')
      .trimEnd();
  return [line(header), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.map(line)].join('\n');
}

export async function main(argv: string[] = process.argv.slice(2)): Promise<void> {
  const o = parseOptions(argv);
  if (!o) return;
  const chromiumPath =
    process.env.CHROMIUM_BIN ?? ['/usr/bin/chromium', '/usr/bin/chromium-browser'].find((p) => existsSync(p));
  if (!chromiumPath) {
    // Said, not thrown: `npm run bench` goes on with the scenarios after this one.
    process.stdout.write(
      "skipped: no Chromium (install Debian's chromium, as `npm test` does, or set CHROMIUM_BIN)\n",
    );
    return;
  }
  const tempDir = o.dataDir ? null : await fs.mkdtemp(path.join(os.tmpdir(), 'svc-bench-dashboard-'));
  const dataDir = o.dataDir ?? path.join(tempDir!, 'data');
  let bench: BenchService | null = null;
  let browser: Browser | null = null;
  try {
    const params = { executions: o.executions, hours: o.hours, seed: o.seed };
    process.stdout.write(
      `dataset: ${fmt(o.executions)} executions over ${o.hours} h, seed ${o.seed}, in ${dataDir}\n`,
    );
    const { marker, reused } = await prepareDataset(dataDir, params, {
      batchRows: 250_000,
      onProgress: (done, total) => process.stdout.write(`\r  generated ${fmt(done)} / ${fmt(total)}   `),
    });
    if (!reused) process.stdout.write('\n');
    process.stdout.write(
      `${reused ? 'reused, generated' : 'generated'} ${marker.generatedAt}: ${new Date(marker.fromMs).toISOString()} ` +
        `to ${new Date(marker.toMs).toISOString()}, ${marker.services.length} services\n`,
    );
    bench = await startBenchService(dataDir, marker, [], { separateProcess: serviceEntry(import.meta.url) });
    const b = bench;
    process.stdout.write(
      `service: its own process, as npm start runs it (node ${nodeFlags().join(' ')} dist/main.js), at ${b.url}\n`,
    );
    const api = await checkApi(b, marker.fromMs, marker.toMs);
    process.stdout.write(
      `API over the window: ${fmt(api.executions)} executions listed; overview ${api.services} services, ` +
        `${fmt(api.requests)} requests; ${api.service}'s timeseries ${Object.entries(api.points)
          .map(([k, n]) => `${k} ${n}`)
          .join(', ')} points; ${api.endpoints} top endpoints\n`,
    );

    browser = await chromium.launch({
      executablePath: chromiumPath,
      headless: true,
      args: ['--no-sandbox'],
    });
    const probe = await Probe.open(browser, b.url);
    process.stdout.write(`browser: Chromium ${browser.version()}, headless, signed in through the form\n`);
    const { views: list, skipped } = views(marker, Date.now());
    for (const s of skipped) process.stdout.write(`skipped: ${s}\n`);

    const warnings: string[] = [];
    const loads = new Map<string, Load[]>(list.map((v) => [v.key, []]));
    let firstVisit: PageReport | null = null;
    // Round by round, every view once a round: drift on a noisy machine hits all the views alike.
    for (let round = 0; round < o.warmup + o.runs; round++) {
      const measured = round >= o.warmup;
      process.stdout.write(
        `\r  ${measured ? `run ${round - o.warmup + 1} / ${o.runs}` : `warm-up ${round + 1}`}   `,
      );
      for (const v of list) {
        const report = await probe.load(v, b.url, o.warmCache);
        // Checked on every load, warm-ups included.
        const load = loadOf(v, report, warnings);
        firstVisit ??= report;
        if (measured) loads.get(v.key)!.push(load);
      }
    }
    process.stdout.write('\n');
    const weight = await pageWeight(b.url, firstVisit!);

    // The baselines, from the explicit window's views (their last measured load): the page's requests replayed from
    // Node as the page made them, and each request alone.
    const replayed = new Map<string, Awaited<ReturnType<typeof replay>>>();
    const direct = new Map<string, Summary>();
    for (const key of BASELINE_VIEWS) {
      const calls = loads.get(key)!.at(-1)!.calls;
      replayed.set(key, await replay(calls, b.authHeaders, o.runs, 2));
      for (const c of calls) direct.set(`${key} ${c.key}`, await timeGets(c.url, b.authHeaders, o.runs, 2));
    }

    const results = list.map((v) => {
      const ls = loads.get(v.key)!;
      const pick = (f: (l: Load) => number) => summarize(ls.map(f));
      const tally = new Map<string, number>();
      for (const l of ls) tally.set(l.lastApi, (tally.get(l.lastApi) ?? 0) + 1);
      const calls = new Map<string, number>();
      for (const l of ls) for (const c of l.calls) calls.set(c.key, (calls.get(c.key) ?? 0) + 1);
      return {
        key: v.key,
        label: v.label,
        kind: v.kind,
        how: v.how,
        shown: ls[0]!.shown,
        toDom: pick((l) => l.toDom),
        toDrawn: pick((l) => l.toDrawn),
        toFirstApi: pick((l) => l.toFirstApi),
        api: pick((l) => l.api),
        idle: pick((l) => l.idle),
        afterApi: pick((l) => l.afterApi),
        afterApiDom: pick((l) => l.afterApiDom),
        lastApi: Object.fromEntries(tally),
        callsPerLoad: Object.fromEntries([...calls].map(([k, n]) => [k, n / ls.length])),
        loads: ls,
      };
    });

    process.stdout.write(
      `\npage weight (first visit): ${weight.files
        .map((f) => `${f.path} ${fmt(f.raw / 1024, 1)} KiB raw, ${fmt(f.gzip / 1024, 1)} KiB gzip`)
        .join(
          '; ',
        )}\n  total ${fmt(weight.raw / 1024, 1)} KiB raw, ${fmt(weight.gzip / 1024, 1)} KiB gzipped (level 9); ` +
        `${fmt(weight.transferred / 1024, 1)} KiB transferred (brotli, headers included)\n`,
    );
    process.stdout.write(
      `\n${table(
        [
          'view',
          'shown',
          'to DOM',
          'drawn',
          'first API',
          'API',
          'idle',
          'after API',
          `≤ ${AIM_AFTER_API_MS}`,
          'answered last',
        ],
        results.map((r) => [
          r.label,
          fmt(r.shown),
          both(r.toDom),
          both(r.toDrawn),
          fmt(r.toFirstApi.p50),
          both(r.api),
          fmt(r.idle.p50),
          both(r.afterApi),
          r.afterApi.p95 <= AIM_AFTER_API_MS ? 'ok' : 'MISS',
          Object.entries(r.lastApi)
            .sort((a, b) => b[1] - a[1])
            .map(([k, n]) => `${k} (${n})`)
            .join(', '),
        ]),
      )}\n`,
    );
    process.stdout.write(
      `\nms, p50 / p95 of ${o.runs} loads each after ${o.warmup} warm-up rounds, from navigation start (full load, ` +
        `HTTP cache ${o.warmCache ? 'kept' : 'cleared'}) or the click (nav link). to DOM: the table's first row, or ` +
        'the three chart canvases, inserted; drawn: the frame after that; first API: p50 until the first /api/ ' +
        'request starts; API: from then to the last answer (responseEnd) the view needs (the session check, then ' +
        '/api/executions; or the overview, then the five timeseries); idle: p50 of the API time with none of those ' +
        'in flight (the page between an answer and its next request); after API: from that answer to drawn (the ' +
        'aim).\n',
    );
    for (const key of BASELINE_VIEWS) {
      const r = replayed.get(key)!;
      const inPage = results.find((x) => x.key === key)!.api;
      process.stdout.write(
        `${key}: its API requests replayed from Node as the page asks them (${r.waves.map((w) => w.join(' + ')).join(' → ')}): ` +
          `${both(r)} ms; in the page ${both(inPage)}\n`,
      );
    }
    process.stdout.write(
      `\n${table(
        ['view', 'API request', 'in page p50', 'in page p95', 'direct p50', 'direct p95', 'per load'],
        BASELINE_VIEWS.flatMap((key) => {
          const r = results.find((x) => x.key === key)!;
          return Object.entries(r.callsPerLoad).map(([k, n]) => {
            const inPage = summarize(
              r.loads.flatMap((l) => l.calls.filter((c) => c.key === k).map((c) => c.end - c.start)),
            );
            const d = direct.get(`${key} ${k}`);
            return [
              key,
              k,
              fmt(inPage.p50, 1),
              fmt(inPage.p95, 1),
              d ? fmt(d.p50, 1) : '-',
              d ? fmt(d.p95, 1) : '-',
              fmt(n, 1),
            ];
          });
        }),
        2,
      )}\n` +
        "\nin page: the request's resource timing (start to responseEnd) over the measured loads; direct: the same " +
        `URL from Node with the session, one at a time (${o.runs} runs after 2): the baseline; per load: requests ` +
        'of that kind per load.\n',
    );
    for (const r of results)
      for (const [k, n] of Object.entries(r.callsPerLoad))
        if (n > 1) warnings.push(`${r.key}: ${k} asked ${fmt(n, 1)} times per load`);
    for (const w of warnings) process.stdout.write(`warning: ${w}\n`);

    const at = new Date().toISOString();
    const result = {
      at,
      options: o,
      machine: { cpus: os.availableParallelism(), memoryGiB: os.totalmem() / 2 ** 30, node: process.version },
      browser: browser.version(),
      dataset: {
        dataDir,
        reused,
        params: marker.params,
        window: { from: new Date(marker.fromMs).toISOString(), to: new Date(marker.toMs).toISOString() },
        services: marker.services,
      },
      apiCheck: api,
      skipped,
      pageWeight: weight,
      aimAfterApiMs: AIM_AFTER_API_MS,
      views: results,
      replayed: Object.fromEntries(replayed),
      direct: Object.fromEntries(direct),
      warnings,
    };
    await fs.mkdir(resultsDir, { recursive: true });
    const file = path.join(resultsDir, `dashboard-${at.replace(/[:.]/g, '-')}.json`);
    await fs.writeFile(file, `${JSON.stringify(result, null, 2)}\n`);
    process.stdout.write(`results: ${path.relative(process.cwd(), file)}\n`);
  } finally {
    await browser?.close();
    await bench?.stop();
    if (tempDir && !o.keep) await fs.rm(tempDir, { recursive: true, force: true });
    else if (tempDir) process.stdout.write(`kept ${dataDir}\n`);
  }
}

if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  main().catch((err) => {
    process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
    process.exit(1);
  });
}
