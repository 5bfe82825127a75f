import type { FastifyPluginAsync, FastifyRequest } from 'fastify';
import { checkRange, endpoints, overview, resolveInterval, timeseries } from '../../query/metric-answers.js';
import { metricNames, series, TAG_KEY } from '../../query/metric-series.js';
import type { MetricFilter } from '../../query/metrics.js';
import { validationError } from '../../schemas/errors.js';
import {
  endpointsQuerySchema,
  namesQuerySchema,
  overviewQuerySchema,
  seriesQuerySchema,
  timeseriesQuerySchema,
} from '../../schemas/metrics.js';
import type { ErrorDetail } from '../../schemas/records.js';
import { principalOf, resolveMode } from '../auth.js';
import type { ApiContext } from '../context.js';
import { timeWindow } from '../time-window.js';
import { parseInput } from '../validate.js';

/** Metrics default to the last 24 hours (CONTRACT §1). */
const DEFAULT_DAYS = 1;

type FilterParams = {
  from?: number;
  to?: number;
  serviceName?: string;
  environment?: string;
  endpoint?: string;
  method?: string;
};

export const metricRoutes =
  (deps: ApiContext): FastifyPluginAsync =>
  async (app) => {
    const { config, engine, control } = deps;

    /** The principal's scope and the request's filters, parsed with `schema`. */
    const scoped = <T extends FilterParams>(
      req: FastifyRequest,
      parse: (raw: Record<string, unknown>) => T,
    ) => {
      const p = principalOf(req);
      const raw = req.query as Record<string, unknown>;
      const mode = resolveMode(p, raw.mode);
      const q = parse(raw);
      const window = timeWindow(q.from, q.to, DEFAULT_DAYS);
      checkRange(window.from, window.to);
      const filter: MetricFilter = {
        workspaceId: p.workspaceId,
        mode,
        ...window,
        service: q.serviceName,
        environment: q.environment,
        method: q.method?.toUpperCase(),
        endpoint:
          q.endpoint === undefined
            ? undefined
            : q.endpoint.endsWith('*')
              ? { kind: 'prefix', value: q.endpoint.slice(0, -1) }
              : { kind: 'eq', value: q.endpoint },
      };
      return { p, q, filter };
    };

    app.get('/api/metrics/overview', { config: { need: 'read' } }, async (req) => {
      const { p, filter } = scoped(req, (raw) => parseInput(overviewQuerySchema, raw, 'query'));
      return overview(engine, config.dataDir, filter, control.settingsOf(p.workspaceId).healthThresholds);
    });

    app.get('/api/metrics/timeseries', { config: { need: 'read' } }, async (req) => {
      const { q, filter } = scoped(req, (raw) => parseInput(timeseriesQuerySchema, raw, 'query'));
      return timeseries(engine, config.dataDir, {
        filter: { ...filter, issueId: q.issueId },
        metric: q.metric,
        interval: resolveInterval(filter.from, filter.to, q.interval),
        groupBy: q.groupBy,
        compare: q.compare === 'previous_period',
      });
    });

    app.get('/api/metrics/endpoints', { config: { need: 'read' } }, async (req) => {
      const { q, filter } = scoped(req, (raw) => parseInput(endpointsQuerySchema, raw, 'query'));
      return endpoints(engine, config.dataDir, filter, q.sort, q.limit);
    });

    app.get('/api/metrics/series', { config: { need: 'read' } }, async (req) => {
      const p = principalOf(req);
      const raw = req.query as Record<string, unknown>;
      const mode = resolveMode(p, raw.mode);
      const tags: Record<string, string> = {};
      const details: ErrorDetail[] = [];
      for (const [k, v] of Object.entries(raw)) {
        if (!k.startsWith('tags.')) continue;
        const key = k.slice('tags.'.length);
        if (!TAG_KEY.test(key))
          details.push({ path: k, message: 'a tag key is 1–128 of A-Z a-z 0-9 _ . : / -' });
        else if (typeof v !== 'string') details.push({ path: k, message: 'give one value' });
        else tags[key] = v;
      }
      const q = parseInput(
        seriesQuerySchema,
        Object.fromEntries(Object.entries(raw).filter(([k]) => !k.startsWith('tags.'))),
        'query',
      );
      if (details.length > 0) throw validationError(`${details[0]!.path}: ${details[0]!.message}`, details);
      const window = timeWindow(q.from, q.to, DEFAULT_DAYS);
      return series(engine, config.dataDir, {
        workspaceId: p.workspaceId,
        mode,
        ...window,
        name: q.name,
        agg: q.agg,
        interval: resolveInterval(window.from, window.to, q.interval),
        service: q.serviceName,
        environment: q.environment,
        tags,
        groupByTag: q.groupBy?.slice('tag:'.length),
      });
    });

    app.get('/api/metrics/names', { config: { need: 'read' } }, async (req) => {
      const p = principalOf(req);
      const raw = req.query as Record<string, unknown>;
      const mode = resolveMode(p, raw.mode);
      const q = parseInput(namesQuerySchema, raw, 'query');
      const window = timeWindow(q.from, q.to, DEFAULT_DAYS);
      checkRange(window.from, window.to);
      return metricNames(engine, config.dataDir, { workspaceId: p.workspaceId, mode, ...window });
    });
  };
