/**
 * Small, dependency-free SVG charts for benchmark results: a line chart of figures over time and a bar chart of
 * a sweep. Plain SVG 1.1 that any browser shows.
 */

export interface Series {
  name: string;
  points: [number, number][];
  /** Drawn against the right-hand axis (a figure with other units, e.g. lag beside throughput). */
  right?: boolean;
}

const W = 900;
const H = 420;
const PAD = { left: 80, right: 80, top: 40, bottom: 70 };
const COLORS = ['#2563eb', '#16a34a', '#dc2626', '#9333ea', '#ea580c', '#0891b2'];

const esc = (s: string) =>
  s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');

/** A round axis maximum at or above `max`: 1, 2 or 5 times a power of ten. */
export function niceMax(max: number): number {
  if (!(max > 0)) return 1;
  const p = 10 ** Math.floor(Math.log10(max));
  for (const m of [1, 2, 5, 10]) if (m * p >= max) return m * p;
  return 10 * p;
}

const label = (v: number) =>
  v >= 1e6 ? `${+(v / 1e6).toFixed(1)}M` : v >= 1e3 ? `${+(v / 1e3).toFixed(1)}k` : `${+v.toFixed(2)}`;

function frame(title: string, body: string[], legend: string[]): string {
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="12">`,
    `<rect width="${W}" height="${H}" fill="white"/>`,
    `<text x="${W / 2}" y="22" text-anchor="middle" font-size="15">${esc(title)}</text>`,
    ...body,
    ...legend,
    '</svg>',
  ].join('\n');
}

function yAxis(max: number, x: number, anchor: 'end' | 'start', title: string): string[] {
  const plotH = H - PAD.top - PAD.bottom;
  const out: string[] = [];
  for (let i = 0; i <= 5; i++) {
    const y = PAD.top + plotH - (plotH * i) / 5;
    if (anchor === 'end') {
      out.push(`<line x1="${PAD.left}" x2="${W - PAD.right}" y1="${y}" y2="${y}" stroke="#e5e7eb"/>`);
    }
    out.push(`<text x="${x}" y="${y + 4}" text-anchor="${anchor}">${label((max * i) / 5)}</text>`);
  }
  const tx = anchor === 'end' ? 16 : W - 16;
  out.push(
    `<text transform="translate(${tx},${PAD.top + plotH / 2}) rotate(-90)" text-anchor="middle">${esc(title)}</text>`,
  );
  return out;
}

/** Series over a shared x axis (e.g. seconds), left axis for most, right axis for those marked `right`. */
export function lineChart(opts: {
  title: string;
  xLabel: string;
  leftLabel: string;
  rightLabel?: string;
  series: Series[];
}): string {
  const plotW = W - PAD.left - PAD.right;
  const plotH = H - PAD.top - PAD.bottom;
  const all = opts.series.flatMap((s) => s.points);
  const xMax = niceMax(Math.max(1, ...all.map((p) => p[0])));
  const leftMax = niceMax(
    Math.max(0, ...opts.series.filter((s) => !s.right).flatMap((s) => s.points.map((p) => p[1]))),
  );
  const rightMax = niceMax(
    Math.max(0, ...opts.series.filter((s) => s.right).flatMap((s) => s.points.map((p) => p[1]))),
  );
  const body = [...yAxis(leftMax, PAD.left - 8, 'end', opts.leftLabel)];
  if (opts.series.some((s) => s.right))
    body.push(...yAxis(rightMax, W - PAD.right + 8, 'start', opts.rightLabel ?? ''));
  for (let i = 0; i <= 10; i++) {
    const x = PAD.left + (plotW * i) / 10;
    body.push(
      `<text x="${x}" y="${H - PAD.bottom + 18}" text-anchor="middle">${label((xMax * i) / 10)}</text>`,
    );
  }
  body.push(
    `<text x="${PAD.left + plotW / 2}" y="${H - PAD.bottom + 38}" text-anchor="middle">${esc(opts.xLabel)}</text>`,
    `<rect x="${PAD.left}" y="${PAD.top}" width="${plotW}" height="${plotH}" fill="none" stroke="#9ca3af"/>`,
  );
  const legend: string[] = [];
  opts.series.forEach((s, i) => {
    const color = COLORS[i % COLORS.length];
    const max = s.right ? rightMax : leftMax;
    const pts = s.points
      .map(
        ([x, y]) =>
          `${(PAD.left + (plotW * x) / xMax).toFixed(1)},${(PAD.top + plotH - (plotH * y) / max).toFixed(1)}`,
      )
      .join(' ');
    body.push(
      `<polyline points="${pts}" fill="none" stroke="${color}" stroke-width="2"${s.right ? ' stroke-dasharray="6 3"' : ''}/>`,
    );
    const lx = PAD.left + i * 210;
    legend.push(
      `<line x1="${lx}" x2="${lx + 24}" y1="${H - 14}" y2="${H - 14}" stroke="${color}" stroke-width="3"${s.right ? ' stroke-dasharray="6 3"' : ''}/>`,
      `<text x="${lx + 30}" y="${H - 10}">${esc(s.name)}${s.right ? ' (right)' : ''}</text>`,
    );
  });
  return frame(opts.title, body, legend);
}

/** One bar per setting, the best one highlighted. */
export function barChart(opts: {
  title: string;
  valueLabel: string;
  bars: { name: string; value: number }[];
  best?: string;
}): string {
  const plotW = W - PAD.left - PAD.right;
  const plotH = H - PAD.top - PAD.bottom;
  const max = niceMax(Math.max(0, ...opts.bars.map((b) => b.value)));
  const body = [...yAxis(max, PAD.left - 8, 'end', opts.valueLabel)];
  const slot = plotW / Math.max(1, opts.bars.length);
  opts.bars.forEach((b, i) => {
    const h = (plotH * b.value) / max;
    const x = PAD.left + i * slot + slot * 0.15;
    const y = PAD.top + plotH - h;
    const fill = b.name === opts.best ? '#16a34a' : '#2563eb';
    body.push(
      `<rect x="${x.toFixed(1)}" y="${y.toFixed(1)}" width="${(slot * 0.7).toFixed(1)}" height="${h.toFixed(1)}" fill="${fill}"/>`,
      `<text x="${(x + slot * 0.35).toFixed(1)}" y="${(y - 6).toFixed(1)}" text-anchor="middle">${label(b.value)}</text>`,
      `<text x="${(x + slot * 0.35).toFixed(1)}" y="${H - PAD.bottom + 18}" text-anchor="middle">${esc(b.name)}</text>`,
    );
  });
  body.push(
    `<rect x="${PAD.left}" y="${PAD.top}" width="${plotW}" height="${plotH}" fill="none" stroke="#9ca3af"/>`,
  );
  const legend = opts.best
    ? [`<text x="${PAD.left}" y="${H - 10}" fill="#16a34a">best: ${esc(opts.best)}</text>`]
    : [];
  return frame(opts.title, body, legend);
}

/** Charts one above the other, as one SVG document. */
export function stack(charts: string[]): string {
  const inner = charts.map((c, i) => c.replace('<svg ', `<svg y="${i * H}" `)).join('\n');
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H * charts.length}" viewBox="0 0 ${W} ${H * charts.length}">\n${inner}\n</svg>`;
}

/**
 * Horizontal bars, one row per name and one bar per series in it (e.g. a CPU breakdown before and after): the
 * document grows with the rows, so long labels stay readable.
 */
export function rowChart(opts: {
  title: string;
  valueLabel: string;
  series: string[];
  rows: { name: string; values: number[] }[];
}): string {
  const labelW = 330;
  const barH = 12;
  const rowH = barH * opts.series.length + 8;
  const top = 50;
  const height = top + rowH * opts.rows.length + 40;
  const plotW = W - labelW - 70;
  const max = niceMax(Math.max(0, ...opts.rows.flatMap((r) => r.values)));
  const body: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${height}" viewBox="0 0 ${W} ${height}" font-family="sans-serif" font-size="11">`,
    `<rect width="${W}" height="${height}" fill="white"/>`,
    `<text x="${W / 2}" y="20" text-anchor="middle" font-size="14">${esc(opts.title)}</text>`,
    ...opts.series.map(
      (s, i) =>
        `<rect x="${labelW + i * 160}" y="30" width="10" height="10" fill="${COLORS[i % COLORS.length]}"/><text x="${labelW + i * 160 + 14}" y="39">${esc(s)}</text>`,
    ),
  ];
  opts.rows.forEach((r, i) => {
    const y = top + i * rowH;
    body.push(`<text x="${labelW - 8}" y="${y + rowH / 2 + 2}" text-anchor="end">${esc(r.name)}</text>`);
    r.values.forEach((v, j) => {
      const w = (plotW * v) / max;
      const by = y + j * barH;
      body.push(
        `<rect x="${labelW}" y="${by}" width="${w.toFixed(1)}" height="${barH - 2}" fill="${COLORS[j % COLORS.length]}"/>`,
        `<text x="${(labelW + w + 4).toFixed(1)}" y="${by + barH - 3}">${label(v)}</text>`,
      );
    });
  });
  body.push(
    `<text x="${labelW}" y="${height - 12}">${esc(opts.valueLabel)} (axis to ${label(max)})</text>`,
    '</svg>',
  );
  return body.join('\n');
}
