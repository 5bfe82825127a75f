import { describe, expect, it } from 'vitest';
import { promValue } from '../../bench/support/load.js';
import { median, quantile } from '../../bench/support/stats.js';
import { barChart, lineChart, niceMax, stack } from '../../bench/support/svg-chart.js';

describe('benchmark figures', () => {
  it('quantile interpolates between closest ranks, as DuckDB quantile_cont', () => {
    expect(quantile([], 0.5)).toBeNull();
    expect(quantile([7], 0.99)).toBe(7);
    expect(quantile([1, 2, 3, 4], 0.5)).toBe(2.5);
    expect(quantile([10, 20, 30, 40, 50], 0.99)).toBeCloseTo(49.6);
  });

  it('median sorts a copy and interpolates an even count; none is NaN', () => {
    const xs = [4, 1, 3, 2];
    expect(median(xs)).toBe(2.5);
    expect(xs).toEqual([4, 1, 3, 2]);
    expect(median([9, 1, 5])).toBe(5);
    expect(median([])).toBeNaN();
  });

  it('promValue reads one figure from Prometheus text, labelled or not', () => {
    const text = [
      '# HELP svc_pipeline_lag_messages Ingest messages accepted but not yet committed.',
      '# TYPE svc_pipeline_lag_messages gauge',
      'svc_pipeline_lag_messages 12',
      'svc_ingest_items_total{kind="executions"} 1500',
      'svc_pipeline_lag_messages_other 3',
    ].join('\n');
    expect(promValue(text, 'svc_pipeline_lag_messages')).toBe(12);
    expect(promValue(text, 'svc_ingest_items_total')).toBe(1500);
    expect(promValue(text, 'svc_missing')).toBeNull();
  });

  it('chart axes end on a round number at or above the largest value', () => {
    expect(niceMax(0)).toBe(1);
    expect(niceMax(3)).toBe(5);
    expect(niceMax(42_000)).toBe(50_000);
    expect(niceMax(100)).toBe(100);
    expect(niceMax(101)).toBe(200);
  });

  it('charts are SVG documents with one polyline per series and one bar per setting', () => {
    const line = lineChart({
      title: 'a <b> & c',
      xLabel: 's',
      leftLabel: 'exec/s',
      rightLabel: 'ms',
      series: [
        {
          name: 'accepted',
          points: [
            [1, 10],
            [2, 20],
          ],
        },
        { name: 'p50', points: [[1, 300]], right: true },
      ],
    });
    expect(line.startsWith('<svg')).toBe(true);
    expect(line.match(/<polyline /g)).toHaveLength(2);
    expect(line).toContain('a &lt;b&gt; &amp; c');
    const bars = barChart({
      title: 't',
      valueLabel: 'v',
      bars: [
        { name: 'x', value: 1 },
        { name: 'y', value: 2 },
      ],
      best: 'y',
    });
    expect(bars.match(/<rect x=/g)?.length).toBeGreaterThanOrEqual(2);
    expect(bars).toContain('best: y');
    const both = stack([line, bars]);
    expect(both.match(/<svg /g)).toHaveLength(3);
    expect(both).toContain('height="840"');
  });
});
