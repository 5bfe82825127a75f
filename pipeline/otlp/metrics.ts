import { createHash } from 'node:crypto';
import { requestType, toBigInt, toNumber } from './proto.js';
import {
  type Attributes,
  type AttrValue,
  jsonAttributes,
  jsonEnum,
  jsonText,
  list,
  msOf,
  type PbKeyValue,
  pbAttributes,
  resourceIdentity,
} from './values.js';

/**
 * OTLP metrics (CONTRACT §12): an ExportMetricsServiceRequest, protobuf or JSON, read into plain data points, and
 * the points mapped to metric points as /api/ingest takes them. A cumulative series is marked as one: turning it
 * into increments needs the series' previous point, which the pipeline keeps (cumulative.ts).
 */

export type DataKind = 'gauge' | 'sum' | 'histogram' | 'exponentialHistogram' | 'summary' | 'none';

export interface OtlpDataPoint {
  name: string;
  unit: string;
  kind: DataKind;
  monotonic: boolean;
  /** AggregationTemporality: 1 delta, 2 cumulative, 0 unspecified. */
  temporality: number;
  startNs: bigint;
  timeNs: bigint;
  /** A gauge's or sum's value. */
  value: number;
  /** A histogram's (either kind); sum, min and max are optional in OTLP. */
  hist: { count: number; sum: number | null; min: number | null; max: number | null } | null;
  attributes: Attributes;
  /** DataPointFlags: bit 0 is "no recorded value". */
  flags: number;
  scope: string;
  resource: Attributes;
}

const TEMPORALITY_NAMES = ['unspecified', 'delta', 'cumulative'];
const CUMULATIVE = 2;
const NO_RECORDED_VALUE = 1;

interface PbPoint {
  attributes?: PbKeyValue[];
  startTimeUnixNano?: unknown;
  timeUnixNano?: unknown;
  value?: string;
  asDouble?: number;
  asInt?: unknown;
  count?: unknown;
  sum?: number | null;
  min?: number | null;
  max?: number | null;
  flags?: number;
}
interface PbData {
  dataPoints?: PbPoint[];
  aggregationTemporality?: number;
  isMonotonic?: boolean;
}
interface PbMetric {
  name?: string;
  unit?: string;
  data?: string;
  gauge?: PbData;
  sum?: PbData;
  histogram?: PbData;
  exponentialHistogram?: PbData;
  summary?: PbData;
}
interface PbMetricsRequest {
  resourceMetrics?: {
    resource?: { attributes?: PbKeyValue[] } | null;
    scopeMetrics?: { scope?: { name?: string } | null; metrics?: PbMetric[] }[];
  }[];
}

/** protobufjs leaves an unset proto3 `optional` field null (or absent). */
const optional = (v: number | null | undefined): number | null => (typeof v === 'number' ? v : null);

/** The data points of a protobuf body, in order; throws when it is not an ExportMetricsServiceRequest. */
export function readMetricsProtobuf(body: Uint8Array): OtlpDataPoint[] {
  const request = requestType('metrics').decode(body) as unknown as PbMetricsRequest;
  const points: OtlpDataPoint[] = [];
  for (const rm of request.resourceMetrics ?? []) {
    const resource = pbAttributes(rm.resource?.attributes);
    for (const sm of rm.scopeMetrics ?? []) {
      const scope = sm.scope?.name ?? '';
      for (const m of sm.metrics ?? []) {
        const kind = (m.data ?? 'none') as DataKind;
        const data = kind === 'none' ? undefined : m[kind];
        for (const p of data?.dataPoints ?? []) {
          const histogram = kind === 'histogram' || kind === 'exponentialHistogram';
          points.push({
            name: m.name ?? '',
            unit: m.unit ?? '',
            kind,
            monotonic: data?.isMonotonic === true,
            temporality: data?.aggregationTemporality ?? 0,
            startNs: toBigInt(p.startTimeUnixNano),
            timeNs: toBigInt(p.timeUnixNano),
            value: p.value === 'asInt' ? toNumber(p.asInt) : (p.asDouble ?? 0),
            hist: histogram
              ? { count: toNumber(p.count), sum: optional(p.sum), min: optional(p.min), max: optional(p.max) }
              : null,
            attributes: pbAttributes(p.attributes),
            flags: p.flags ?? 0,
            scope,
            resource,
          });
        }
      }
    }
  }
  return points;
}

const KINDS: DataKind[] = ['gauge', 'sum', 'histogram', 'exponentialHistogram', 'summary'];
const num = (v: unknown): number | null =>
  typeof v === 'number' ? v : typeof v === 'string' && v.trim() !== '' ? Number(v) : null;

/** The data points of an OTLP/JSON body (already parsed), in order; throws when it is not an object. */
export function readMetricsJson(body: unknown): OtlpDataPoint[] {
  if (body === null || typeof body !== 'object' || Array.isArray(body))
    throw new Error('expected an ExportMetricsServiceRequest object');
  const points: OtlpDataPoint[] = [];
  for (const rm of list((body as { resourceMetrics?: unknown }).resourceMetrics)) {
    const r = (rm ?? {}) as { resource?: { attributes?: unknown }; scopeMetrics?: unknown };
    const resource = jsonAttributes(r.resource?.attributes);
    for (const sm of list(r.scopeMetrics)) {
      const s = (sm ?? {}) as { scope?: { name?: unknown }; metrics?: unknown };
      const scope = typeof s.scope?.name === 'string' ? s.scope.name : '';
      for (const raw of list(s.metrics)) {
        const m = (raw ?? {}) as Record<string, unknown>;
        const kind = KINDS.find((k) => m[k] !== undefined && m[k] !== null) ?? 'none';
        const data = (kind === 'none' ? {} : (m[kind] ?? {})) as Record<string, unknown>;
        for (const rawPoint of list(data.dataPoints)) {
          const p = (rawPoint ?? {}) as Record<string, unknown>;
          const histogram = kind === 'histogram' || kind === 'exponentialHistogram';
          points.push({
            name: typeof m.name === 'string' ? m.name : '',
            unit: typeof m.unit === 'string' ? m.unit : '',
            kind,
            monotonic: data.isMonotonic === true,
            temporality: jsonEnum(data.aggregationTemporality, TEMPORALITY_NAMES, 'AGGREGATION_TEMPORALITY_'),
            startNs: toBigInt(p.startTimeUnixNano ?? 0),
            timeNs: toBigInt(p.timeUnixNano ?? 0),
            value: num(p.asDouble) ?? num(p.asInt) ?? 0,
            hist: histogram
              ? { count: num(p.count) ?? 0, sum: num(p.sum), min: num(p.min), max: num(p.max) }
              : null,
            attributes: jsonAttributes(p.attributes),
            flags: typeof p.flags === 'number' ? p.flags : 0,
            scope,
            resource,
          });
        }
      }
    }
  }
  return points;
}

// ---- mapping ----

/** A cumulative point: its series (for the previous point) and its times, as the pipeline needs them. */
export interface CumulativeMark {
  series: string;
  startNs: bigint;
  timeNs: bigint;
}

export interface MappedMetric {
  /** The point's position among the body's data points. */
  index: number;
  /** A metric point as /api/ingest takes it; a cumulative one still holds the running total. */
  item: Record<string, unknown>;
  cumulative: CumulativeMark | null;
}

export interface MappedMetrics {
  metrics: MappedMetric[];
  rejected: { index: number; message: string }[];
}

const MAX_NAME = 200;
const MAX_TAGS = 20;

/** CONTRACT §12: characters outside section 5's name pattern become `_`; at most 200 characters. */
export function metricName(name: string): string {
  const cut = name.slice(0, MAX_NAME);
  return cut.replace(/[^A-Za-z0-9_.]/g, '_').replace(/^[^A-Za-z_]/, '_');
}

const tagValue = (v: AttrValue): string =>
  v === null ? '' : typeof v === 'object' ? jsonText(v) : String(v);

/** The first 20 attributes, their values in string form. */
function tagsOf(attributes: Attributes): Record<string, string> | null {
  const entries = Object.entries(attributes).slice(0, MAX_TAGS);
  if (entries.length === 0) return null;
  return Object.fromEntries(entries.map(([k, v]) => [k, tagValue(v)]));
}

/**
 * A series' identity (OTel's data model): resource, scope, name and every attribute, in a stable order, hashed
 * (the pipeline keeps one entry a series; a resource's attributes alone can be a kilobyte).
 */
function seriesOf(p: OtlpDataPoint): string {
  const sorted = (a: Attributes) => Object.entries(a).sort(([x], [y]) => (x < y ? -1 : x > y ? 1 : 0));
  const identity = JSON.stringify([sorted(p.resource), p.scope, p.name, p.unit, sorted(p.attributes)]);
  return createHash('sha256').update(identity).digest('base64url');
}

/** Why a data point cannot be mapped, or null. */
export function pointProblem(p: OtlpDataPoint): string | null {
  if (p.kind === 'summary') return 'Summary points are not supported (send a histogram)';
  if (p.kind === 'none') return 'the metric has no data';
  if (p.timeNs <= 0n) return 'the data point has no time';
  if (metricName(p.name) === '') return 'the metric has no name';
  return null;
}

/**
 * Maps a body's data points (CONTRACT §12): gauges and non-monotonic sums as `gauge`, monotonic sums as `counter`
 * increments, both histograms as `histogram` { count, sum, min, max }. A point flagged "no recorded value", or a
 * histogram of no observations, records nothing and is skipped. A histogram without min and max (both optional in
 * OTLP) takes its mean for both.
 */
export function mapMetrics(points: readonly OtlpDataPoint[]): MappedMetrics {
  const out: MappedMetrics = { metrics: [], rejected: [] };
  points.forEach((p, index) => {
    const problem = pointProblem(p);
    if (problem !== null) {
      out.rejected.push({ index, message: problem });
      return;
    }
    if ((p.flags & NO_RECORDED_VALUE) !== 0) return;
    const base = {
      name: metricName(p.name),
      unit: p.unit || null,
      timestamp: msOf(p.timeNs),
      ...resourceIdentity(p.resource),
      tags: tagsOf(p.attributes),
    };
    const cumulative: CumulativeMark | null =
      p.temporality === CUMULATIVE && (p.kind !== 'sum' || p.monotonic) && p.kind !== 'gauge'
        ? { series: seriesOf(p), startNs: p.startNs, timeNs: p.timeNs }
        : null;
    if (p.hist !== null) {
      const { count } = p.hist;
      if (count <= 0 && cumulative === null) return;
      const sum = p.hist.sum ?? 0;
      const mean = count > 0 ? sum / count : 0;
      out.metrics.push({
        index,
        item: {
          ...base,
          type: 'histogram',
          value: { count, sum, min: p.hist.min ?? mean, max: p.hist.max ?? mean },
        },
        cumulative,
      });
      return;
    }
    const type = p.kind === 'sum' && p.monotonic ? 'counter' : 'gauge';
    out.metrics.push({ index, item: { ...base, type, value: p.value }, cumulative });
  });
  return out;
}
