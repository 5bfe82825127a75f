import type { FastifyRequest } from 'fastify';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { checkRange, endpoints, overview, resolveInterval, timeseries } from '../../query/metric-answers.js';
import { metricNames, series, TAG_KEY } from '../../query/metric-series.js';
import type { MetricFilter } from '../../query/metrics.js';
import {
  endpointsAnswer,
  errorAnswers,
  metricNamesAnswer,
  overviewAnswer,
  seriesAnswer,
  timeseriesAnswer,
} from '../../schemas/answers.js';
import { validationError } from '../../schemas/errors.js';
import {
  endpointsQuerySchema,
  namesQuerySchema,
  overviewQuerySchema,
  seriesQuerySchema,
  timeseriesQuerySchema,
} from '../../schemas/metrics.js';
import type { ErrorDetail } from '../../schemas/records.js';
import { modeOf, principalOf } from '../auth.js';
import type { ApiContext } from '../context.js';
import { timeWindow } from '../time-window.js';

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
  (deps: ApiContext): FastifyPluginAsyncZod =>
  async (app) => {
    const { config, engine, control } = deps;

    /** The principal's scope and the request's filters. */
    const scoped = (req: FastifyRequest, q: FilterParams) => {
      const p = principalOf(req);
      const window = timeWindow(q.from, q.to, DEFAULT_DAYS);
      checkRange(window.from, window.to);
      const filter: MetricFilter = {
        workspaceId: p.workspaceId,
        mode: modeOf(req),
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
      return { p, filter };
    };

    app.get(
      '/api/metrics/overview',
      {
        config: { need: 'read' },
        schema: {
          summary:
            'Per service: requests, throughput, failures, latency and health, against the period before',
          tags: ['metrics'],
          querystring: overviewQuerySchema,
          response: { 200: overviewAnswer, ...errorAnswers },
        },
      },
      async (req) => {
        const { p, filter } = scoped(req, req.query);
        return overview(engine, config.dataDir, filter, control.settingsOf(p.workspaceId).healthThresholds);
      },
    );

    app.get(
      '/api/metrics/timeseries',
      {
        config: { need: 'read' },
        schema: {
          summary: 'A figure of the executions over time, by bucket, optionally grouped and compared',
          tags: ['metrics'],
          querystring: timeseriesQuerySchema,
          response: { 200: timeseriesAnswer, ...errorAnswers },
        },
      },
      async (req) => {
        const q = req.query;
        const { filter } = scoped(req, q);
        return timeseries(engine, config.dataDir, {
          filter: { ...filter, issueId: q.issueId },
          metric: q.metric,
          interval: resolveInterval(filter.from, filter.to, q.interval),
          groupBy: q.groupBy,
          compare: q.compare === 'previous_period',
        });
      },
    );

    app.get(
      '/api/metrics/endpoints',
      {
        config: { need: 'read' },
        schema: {
          summary: 'Per service, method and endpoint: requests, failure rate and latency percentiles',
          tags: ['metrics'],
          querystring: endpointsQuerySchema,
          response: { 200: endpointsAnswer, ...errorAnswers },
        },
      },
      async (req) => {
        const q = req.query;
        const { filter } = scoped(req, q);
        return endpoints(engine, config.dataDir, filter, q.sort, q.limit);
      },
    );

    app.get(
      '/api/metrics/series',
      {
        config: { need: 'read' },
        schema: {
          summary: 'A custom metric over time, aggregated per bucket',
          description: '`tags.<key>=<value>` parameters filter by tag.',
          tags: ['metrics'],
          querystring: seriesQuerySchema,
          response: { 200: seriesAnswer, ...errorAnswers },
        },
      },
      async (req) => {
        const p = principalOf(req);
        const q = req.query;
        const tags: Record<string, string> = {};
        const details: ErrorDetail[] = [];
        for (const [k, v] of Object.entries(q)) {
          if (!k.startsWith('tags.')) continue;
          const key = k.slice('tags.'.length);
          if (!TAG_KEY.test(key))
            details.push({ path: k, message: 'a tag key is 1–128 of A-Z a-z 0-9 _ . : / -' });
          else if (typeof v !== 'string') details.push({ path: k, message: 'give one value' });
          else tags[key] = v;
        }
        if (details.length > 0) throw validationError(`${details[0]!.path}: ${details[0]!.message}`, details);
        const window = timeWindow(q.from, q.to, DEFAULT_DAYS);
        return series(engine, config.dataDir, {
          workspaceId: p.workspaceId,
          mode: modeOf(req),
          ...window,
          name: q.name,
          agg: q.agg,
          interval: resolveInterval(window.from, window.to, q.interval),
          service: q.serviceName,
          environment: q.environment,
          tags,
          groupByTag: q.groupBy?.slice('tag:'.length),
        });
      },
    );

    app.get(
      '/api/metrics/names',
      {
        config: { need: 'read' },
        schema: {
          summary: 'The custom metrics with points in the range',
          tags: ['metrics'],
          querystring: namesQuerySchema,
          response: { 200: metricNamesAnswer, ...errorAnswers },
        },
      },
      async (req) => {
        const p = principalOf(req);
        const window = timeWindow(req.query.from, req.query.to, DEFAULT_DAYS);
        checkRange(window.from, window.to);
        return metricNames(engine, config.dataDir, {
          workspaceId: p.workspaceId,
          mode: modeOf(req),
          ...window,
        });
      },
    );
  };
