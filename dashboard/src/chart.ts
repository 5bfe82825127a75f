import { useLayoutEffect, useRef } from 'preact/hooks';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import { html } from './html.js';

/** A series of a chart: its name and values (null: no data at that time). */
export interface ChartSeries {
  label: string;
  values: (number | null)[];
  color: string;
}

/**
 * A time-series chart (uPlot, canvas) in a region named by `label` (CONTRACT §14: `Requests`, `Failure rate`,
 * `Latency`…). Times in epoch seconds; it follows its container's width.
 */
export function Chart(props: { label: string; times: number[]; series: ChartSeries[]; unit?: string }) {
  const box = useRef<HTMLDivElement>(null);
  // Drawn in the same frame as the data's render (an effect would wait a frame more).
  useLayoutEffect(() => {
    const el = box.current;
    if (!el) return;
    const width = () => Math.max(280, el.clientWidth);
    const plot = new uPlot(
      {
        width: width(),
        height: 200,
        legend: { show: true },
        axes: [{}, { values: (_u, ticks) => ticks.map((t) => `${t}${props.unit ?? ''}`), size: 60 }],
        // Points as well as lines when data is sparse: a bucket with data between empty ones has no line to draw.
        series: [
          {},
          ...props.series.map((s) => ({
            label: s.label,
            stroke: s.color,
            width: 1.5,
            spanGaps: false,
            points: { show: s.values.filter((v) => v !== null).length <= 60, size: 4 },
          })),
        ],
      },
      [props.times, ...props.series.map((s) => s.values)] as uPlot.AlignedData,
      el,
    );
    const resize = new ResizeObserver(() => plot.setSize({ width: width(), height: 200 }));
    resize.observe(el);
    return () => {
      resize.disconnect();
      plot.destroy();
    };
  }, [props.times, props.series]);
  return html`<section role="region" aria-label=${props.label} class="chart">
    <h3>${props.label}</h3>
    <div ref=${box}></div>
  </section>`;
}
