/**
 * A small Prometheus text-format registry: counters and histograms with labels. Enough for the service's own
 * figures (CONTRACT §11) without a dependency.
 */

type Labels = Record<string, string>;

const labelKey = (labels: Labels) =>
  Object.keys(labels)
    .sort()
    .map(
      (k) => `${k}="${String(labels[k]).replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n')}"`,
    )
    .join(',');

abstract class Metric {
  constructor(
    readonly name: string,
    readonly help: string,
  ) {}
  abstract render(): string[];
  header(type: string): string[] {
    return [`# HELP ${this.name} ${this.help}`, `# TYPE ${this.name} ${type}`];
  }
}

export class Counter extends Metric {
  readonly #values = new Map<string, number>();
  inc(labels: Labels = {}, by = 1): void {
    const k = labelKey(labels);
    this.#values.set(k, (this.#values.get(k) ?? 0) + by);
  }
  render(): string[] {
    const lines = this.header('counter');
    for (const [k, v] of this.#values) lines.push(`${this.name}${k ? `{${k}}` : ''} ${v}`);
    return lines;
  }
}

/** A value read when scraped; `counter` for totals kept elsewhere (they only grow). */
export class Gauge extends Metric {
  readonly #read: () => { labels?: Labels; value: number }[];
  readonly #type: 'gauge' | 'counter';
  constructor(
    name: string,
    help: string,
    read: () => { labels?: Labels; value: number }[],
    type: 'gauge' | 'counter' = 'gauge',
  ) {
    super(name, help);
    this.#read = read;
    this.#type = type;
  }
  render(): string[] {
    const lines = this.header(this.#type);
    for (const { labels, value } of this.#read()) {
      const k = labelKey(labels ?? {});
      lines.push(`${this.name}${k ? `{${k}}` : ''} ${value}`);
    }
    return lines;
  }
}

/** Durations in seconds. */
export class Histogram extends Metric {
  readonly #buckets: number[];
  readonly #series = new Map<string, { counts: number[]; sum: number; count: number }>();
  constructor(
    name: string,
    help: string,
    buckets = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
  ) {
    super(name, help);
    this.#buckets = buckets;
  }
  observe(labels: Labels, value: number): void {
    const k = labelKey(labels);
    let s = this.#series.get(k);
    if (!s) {
      s = { counts: this.#buckets.map(() => 0), sum: 0, count: 0 };
      this.#series.set(k, s);
    }
    for (let i = 0; i < this.#buckets.length; i++) if (value <= this.#buckets[i]!) s.counts[i]!++;
    s.sum += value;
    s.count++;
  }
  render(): string[] {
    const lines = this.header('histogram');
    for (const [k, s] of this.#series) {
      const sep = k ? ',' : '';
      for (let i = 0; i < this.#buckets.length; i++) {
        lines.push(`${this.name}_bucket{${k}${sep}le="${this.#buckets[i]}"} ${s.counts[i]}`);
      }
      lines.push(`${this.name}_bucket{${k}${sep}le="+Inf"} ${s.count}`);
      lines.push(`${this.name}_sum${k ? `{${k}}` : ''} ${s.sum}`);
      lines.push(`${this.name}_count${k ? `{${k}}` : ''} ${s.count}`);
    }
    return lines;
  }
}

export class Registry {
  readonly #metrics: Metric[] = [];
  add<M extends Metric>(m: M): M {
    this.#metrics.push(m);
    return m;
  }
  render(): string {
    return `${this.#metrics.flatMap((m) => m.render()).join('\n')}\n`;
  }
}
