import { AsyncLocalStorage } from 'node:async_hooks';
import dc from 'node:diagnostics_channel';
import http, { type IncomingMessage, type ServerResponse, STATUS_CODES } from 'node:http';
import https from 'node:https';
import { createRequire, syncBuiltinESMExports } from 'node:module';
import path from 'node:path';
import { type ContextTree, countLeaves, mergeContext, newContext } from './context.js';
import { Delivery, type DeliveryStats, USER_AGENT } from './delivery.js';
import { type ExceptionItem, exceptionOf } from './exceptions.js';
import { formatTraceParent, newSpanId, newTraceAndSpan, parseTraceParent } from './ids.js';
import { MetricAggregator, type Tags } from './metrics.js';
import { type IgnoreRule, ignoreMatcher, pathOf, templatePath } from './paths.js';
import { pickHeaders, SENSITIVE_KEY, scrubString, scrubValue } from './scrub.js';

export interface InitOptions {
  /** An API key with the ingest permission (default: SVC_API_KEY). Without one the SDK does nothing. */
  apiKey?: string;
  /** The service's base URL (default: SVC_ENDPOINT, else http://localhost:8080). */
  endpoint?: string;
  /** This application's name (default: SVC_SERVICE, else npm_package_name, else unknown_service). */
  service?: string;
  /** default: SVC_ENVIRONMENT, else NODE_ENV, else `default`. */
  environment?: string;
  /** Requests not captured: exact paths, globs, regular expressions or a function of (path, method). */
  ignore?: IgnoreRule | IgnoreRule[];
  /** Request headers kept with each execution (lower-case names; `*` for all). Credentials are never kept. */
  requestHeaders?: string[];
  /** Items queued at most while the service is slow or away; the oldest are dropped past it (10,000). */
  maxQueueSize?: number;
  /** How often queued items are sent (1,000 ms). */
  flushIntervalMs?: number;
  /** How often metrics are sent as points (10,000 ms). */
  metricsIntervalMs?: number;
  /** Told of problems (a refused batch, a dropped item); default: one console.warn per kind of problem. */
  onProblem?: (message: string) => void;
  /** Capture inbound HTTP requests (true). */
  captureHttp?: boolean;
}

type Level = 'debug' | 'info' | 'warn' | 'error';
type Evidence = { kind: string; verdict: 'failed' | 'success' | null; detail?: string };

interface Scope {
  traceId: string;
  spanId: string;
  parentSpanId: string | null;
  startedAt: number;
  t0: number;
  source: string;
  method: string | null;
  /** The path (requests) or the job's name. */
  name: string;
  route: string | null;
  request: {
    headers: Record<string, string | string[]> | null;
    query: Record<string, string | string[]> | null;
  } | null;
  /** Made when first used (most requests never set one), as are evidence and logs. */
  context: ContextTree | null;
  fingerprint: string[] | null;
  exception: ExceptionItem | null;
  evidence: Evidence[] | null;
  logs: Record<string, unknown>[] | null;
  finished: boolean;
  /** A Koa context, for its router's matched route. */
  koa?: { _matchedRoute?: unknown };
}

/** Where a response keeps its execution's scope. */
const SCOPE = Symbol('svc.scope');

/** The store of an ignored request: nothing within it is attached to another request's execution. */
const IGNORED = Symbol('ignored');
type Store = Scope | typeof IGNORED;

/** A header's first value from `rawHeaders` (name, value, name, value…), by its lower-case name. */
function rawHeader(raw: string[], name: string): string | undefined {
  for (let i = 0; i < raw.length; i += 2) {
    const n = raw[i]!;
    if (n.length === name.length && n.toLowerCase() === name) return raw[i + 1];
  }
  return undefined;
}

const DEFAULT_IGNORE: IgnoreRule[] = ['/healthz', '/readyz', '/livez'];
const DEFAULT_HEADERS = ['user-agent', 'content-type', 'content-length', 'x-request-id', 'referer'];
const MAX_INLINE_LOGS = 1000;

export interface Client {
  setContext(context: Record<string, unknown>): void;
  setFingerprint(parts: string[]): void;
  captureException(err: unknown): void;
  addEvidence(kind: string, verdict: 'failed' | 'success', detail?: string): void;
  log: Record<Level, (message: string, attributes?: Record<string, unknown>) => void>;
  track<T>(
    name: string,
    fn: () => T | Promise<T>,
    options?: { source?: string; context?: Record<string, unknown> },
  ): Promise<T>;
  metrics: {
    counter(name: string, value?: number, tags?: Tags): void;
    gauge(name: string, value: number, tags?: Tags): void;
    histogram(name: string, value: number, tags?: Tags): void;
  };
  /** The current request's or job's trace, for logs of your own. */
  currentTrace(): { traceId: string; spanId: string } | null;
  flush(timeoutMs?: number): Promise<boolean>;
  close(timeoutMs?: number): Promise<boolean>;
  stats(): DeliveryStats;
}

const env = (name: string) => {
  const v = process.env[name];
  return v === undefined || v === '' ? undefined : v;
};

/** Runs `fn` and swallows what it throws: the SDK never throws into the application. */
function guarded<A extends unknown[]>(onProblem: (m: string) => void, fn: (...args: A) => void) {
  return (...args: A): void => {
    try {
      fn(...args);
    } catch (err) {
      onProblem(`internal error: ${(err as Error)?.message ?? String(err)}`);
    }
  };
}

/** The places framework modules may be resolved from: the working directory and the main script's. */
function resolvers(): NodeRequire[] {
  const bases = [path.join(process.cwd(), 'index.js')];
  if (process.argv[1]) bases.push(path.resolve(process.argv[1]));
  return bases.map((b) => createRequire(b));
}

function load(requires: NodeRequire[], id: string, from?: string): unknown {
  for (const r of requires) {
    try {
      if (!from) return r(id);
      return createRequire(r.resolve(from))(id);
    } catch {
      // Not installed there.
    }
  }
  return null;
}

export function createClient(options: InitOptions = {}): Client {
  const apiKey = options.apiKey ?? env('SVC_API_KEY');
  const endpoint = options.endpoint ?? env('SVC_ENDPOINT') ?? 'http://localhost:8080';
  const resource = {
    service: options.service ?? env('SVC_SERVICE') ?? env('npm_package_name') ?? 'unknown_service',
    environment: options.environment ?? env('SVC_ENVIRONMENT') ?? env('NODE_ENV') ?? 'default',
  };
  const warned = new Set<string>();
  const onProblem =
    options.onProblem ??
    ((message: string) => {
      const kind = message.split(':')[0]!;
      if (warned.has(kind)) return;
      warned.add(kind);
      console.warn(`[@telemetry-service/node] ${message}`);
    });
  const storage = new AsyncLocalStorage<Store>();
  const delivery = apiKey
    ? new Delivery({
        endpoint,
        apiKey,
        maxQueueSize: options.maxQueueSize ?? 10_000,
        flushIntervalMs: options.flushIntervalMs ?? 1000,
        envelope: { sdk: { name: '@telemetry-service/node', version: '0.1.0' }, resource },
        onProblem,
        untraced: (fn) => storage.exit(fn),
      })
    : null;
  if (!delivery) onProblem('no API key (apiKey or SVC_API_KEY): telemetry is not sent');
  const aggregator = new MetricAggregator();
  const ignored = ignoreMatcher([...DEFAULT_IGNORE, ...[options.ignore ?? []].flat()]);
  const headerNames = (options.requestHeaders ?? DEFAULT_HEADERS).map((h) => h.toLowerCase());
  // A request's scope, kept on the request itself (a WeakMap costs the collector more at every request).
  const byRequest = {
    get: (req: IncomingMessage): Scope | undefined => (req as IncomingMessage & { [SCOPE]?: Scope })[SCOPE],
    set: (req: IncomingMessage, scope: Scope) => {
      (req as IncomingMessage & { [SCOPE]?: Scope })[SCOPE] = scope;
    },
  };
  const current = (): Scope | null => {
    const s = storage.getStore();
    return s && s !== IGNORED && !s.finished ? s : null;
  };

  function newScope(
    parent: { traceId: string; parentId: string } | null,
    source: string,
    name: string,
  ): Scope {
    const ids = parent ? { traceId: parent.traceId, spanId: newSpanId() } : newTraceAndSpan();
    return {
      traceId: ids.traceId,
      spanId: ids.spanId,
      parentSpanId: parent?.parentId ?? null,
      startedAt: Date.now(),
      t0: performance.now(),
      source,
      method: null,
      name,
      route: null,
      request: null,
      context: null,
      fingerprint: null,
      exception: null,
      evidence: null,
      logs: null,
      finished: false,
    };
  }

  /** A finished scope as an execution item (CONTRACT §5), queued. */
  function send(scope: Scope, statusCode: number | null, outcome: 'success' | 'failed' | null) {
    const durationMs = Math.max(0, performance.now() - scope.t0);
    let exception = scope.exception;
    if (!exception && statusCode !== null && statusCode >= 500) {
      exception = {
        type: `HTTP ${statusCode}`,
        message: STATUS_CODES[statusCode] ?? 'Server Error',
        stack: null,
        handled: true,
      };
    }
    const endpoint = scope.source === 'http' ? (scope.route ?? templatePath(pathOf(scope.name))) : scope.name;
    // Only what differs from the defaults: the envelope's resource gives service and environment, `http` is the
    // default source, and every byte is paid three times (serialized, compressed, sent).
    const item: Record<string, unknown> = {
      executionId: scope.spanId,
      traceId: scope.traceId,
      spanId: scope.spanId,
      endpoint: scrubString(endpoint || '/').slice(0, 512),
      startedAt: scope.startedAt,
      // To the microsecond: a duration's last digits are noise, and bytes.
      durationMs: Math.round(Math.min(durationMs, 86_400_000) * 1000) / 1000,
    };
    if (scope.parentSpanId !== null) item.parentSpanId = scope.parentSpanId;
    if (scope.source !== 'http') item.source = scope.source;
    if (scope.method !== null) item.method = scope.method;
    if (statusCode !== null) item.statusCode = statusCode;
    if (outcome) item.outcome = outcome;
    const request = scope.request;
    if (request && (scope.route !== null || request.headers !== null || request.query !== null)) {
      const r: Record<string, unknown> = {};
      if (scope.route !== null) r.route = scope.route;
      if (request.headers !== null) r.headers = request.headers;
      if (request.query !== null) r.query = request.query;
      item.request = r;
    }
    if (scope.context !== null && countLeaves(scope.context) > 0) item.context = scope.context;
    if (exception) item.exception = exception;
    if (scope.evidence !== null) item.outcomeEvidence = scope.evidence;
    if (scope.fingerprint) item.fingerprint = scope.fingerprint;
    if (scope.logs !== null) item.logs = scope.logs;
    delivery?.add('executions', item);
  }

  // ---- inbound HTTP ----

  function finishRequest(scope: Scope, res: ServerResponse, aborted: boolean) {
    if (scope.finished) return;
    scope.finished = true;
    if (aborted) {
      scope.evidence ??= [];
      scope.evidence.push({
        kind: 'aborted',
        verdict: null,
        detail: 'the connection closed before the response ended',
      });
    }
    send(scope, res.statusCode >= 100 && res.statusCode <= 599 ? res.statusCode : null, null);
  }

  /** The framework's route, read while the handler answers (Express restores baseUrl once it leaves a router). */
  function noteRoute(scope: Scope, req: IncomingMessage) {
    if (scope.route !== null) return;
    const r = req as IncomingMessage & { route?: { path?: unknown }; baseUrl?: unknown };
    if (r.route && typeof r.route.path === 'string') {
      scope.route = `${typeof r.baseUrl === 'string' ? r.baseUrl : ''}${r.route.path}` || '/';
      return;
    }
    const matched = scope.koa?._matchedRoute;
    if (typeof matched === 'string') scope.route = matched;
  }

  function noteError(req: IncomingMessage | undefined, err: unknown) {
    const scope = req ? byRequest.get(req) : current();
    if (scope && !scope.finished && scope.exception === null) scope.exception = exceptionOf(err, true);
  }

  const onRequestStart = guarded(onProblem, (message: unknown) => {
    const { request, response } = message as { request: IncomingMessage; response: ServerResponse };
    const method = request.method ?? 'GET';
    const url = request.url ?? '/';
    const p = pathOf(url);
    // From rawHeaders: `request.headers` is built on first use, a cost the application may never pay itself.
    const raw = request.rawHeaders;
    if (ignored(p, method) || rawHeader(raw, 'user-agent') === USER_AGENT) {
      storage.enterWith(IGNORED);
      return;
    }
    const scope = newScope(parseTraceParent(rawHeader(raw, 'traceparent')), 'http', p);
    scope.method = method;
    const q = url.indexOf('?');
    let query: Record<string, string | string[]> | null = null;
    if (q >= 0) {
      query = Object.create(null) as Record<string, string | string[]>;
      for (const [k, v] of new URLSearchParams(url.slice(q + 1))) {
        const value = SENSITIVE_KEY.test(k) ? '[redacted]' : scrubString(v);
        const seen = query[k];
        query[k] = seen === undefined ? value : Array.isArray(seen) ? [...seen, value] : [seen, value];
      }
    }
    scope.request = { headers: pickHeaders(raw, headerNames), query };
    byRequest.set(request, scope);
    storage.enterWith(scope);
    (response as ServerResponse & { [SCOPE]?: Scope })[SCOPE] = scope;
    // 'close' comes once the response is done, or when the connection went first (then it is not finished).
    response.once('close', () => finishRequest(scope, response, !response.writableFinished));
  });

  // ---- frameworks ----

  const onFastifyStart = guarded(onProblem, (message: unknown) => {
    const m = message as { request?: { raw?: IncomingMessage }; route?: { url?: unknown } };
    const scope = m.request?.raw ? byRequest.get(m.request.raw) : undefined;
    if (scope && typeof m.route?.url === 'string') scope.route = m.route.url;
  });
  const onFastifyError = guarded(onProblem, (message: unknown) => {
    const m = message as { request?: { raw?: IncomingMessage }; error?: unknown };
    noteError(m.request?.raw, m.error);
  });
  const unpatch: (() => void)[] = [];
  /**
   * The route is read when the handler answers (Express restores a router's baseUrl once it leaves it): one patch
   * of ServerResponse.prototype.end, not a closure per request.
   */
  function patchResponseEnd() {
    const proto = http.ServerResponse.prototype as unknown as { end: (...a: unknown[]) => ServerResponse };
    const original = proto.end;
    if ((original as { __svc?: boolean }).__svc) return;
    const wrapped = Object.assign(
      function (this: ServerResponse & { [SCOPE]?: Scope }, ...args: unknown[]) {
        const scope = this[SCOPE];
        if (scope !== undefined && scope.route === null && this.req) {
          try {
            noteRoute(scope, this.req);
          } catch {
            // The route stays unknown.
          }
        }
        return original.apply(this, args);
      },
      { __svc: true },
    );
    proto.end = wrapped;
    unpatch.push(() => {
      proto.end = original;
    });
  }

  /** Replaces `layer.prototype[method]` with `wrap(original)`, once, undone by close(). */
  function patchLayer(
    layer: unknown,
    method: string,
    wrap: (original: (...a: unknown[]) => unknown) => (...a: never[]) => unknown,
  ) {
    const proto = (layer as { prototype?: Record<string, unknown> } | null)?.prototype;
    const original = proto?.[method] as ((...a: unknown[]) => unknown) & { __svc?: boolean };
    if (!proto || typeof original !== 'function' || original.__svc) return;
    proto[method] = Object.assign(wrap(original), { __svc: true });
    unpatch.push(() => {
      proto[method] = original;
    });
  }

  function patchFrameworks() {
    const requires = resolvers();
    // Express 5 (its router package) and 4: the route of the handler that runs (its router's baseUrl is right only
    // then: a mounted error middleware changes it), and an error a handler throws, rejects or passes to next(),
    // whether error middleware or Express's final handler answers it (the first error of a request is kept).
    const express5 = load(requires, 'router/lib/layer.js', 'express');
    const express4 = load(requires, 'express/lib/router/layer.js');
    for (const [layer, method] of [
      [express5, 'handleRequest'],
      [express4, 'handle_request'],
    ] as const) {
      patchLayer(
        layer,
        method,
        (original) =>
          function (this: unknown, req: IncomingMessage, res: unknown, next: (...a: unknown[]) => unknown) {
            const scope = byRequest.get(req);
            if (typeof next !== 'function' || scope === undefined) return original.call(this, req, res, next);
            const r = req as IncomingMessage & { route?: { path?: unknown }; baseUrl?: unknown };
            if (r.route && typeof r.route.path === 'string' && !scope.finished) {
              scope.route = `${typeof r.baseUrl === 'string' ? r.baseUrl : ''}${r.route.path}` || '/';
            }
            return original.call(this, req, res, function (this: unknown, ...args: unknown[]) {
              const err = args[0];
              if (err != null && err !== 'route' && err !== 'router') {
                try {
                  noteError(req, err);
                } catch {
                  // Never into the application.
                }
              }
              return next.apply(this, args);
            });
          },
      );
    }
    for (const [layer, method] of [
      [express5, 'handleError'],
      [express4, 'handle_error'],
    ] as const) {
      patchLayer(
        layer,
        method,
        (original) =>
          function (this: unknown, error: unknown, req: IncomingMessage, ...rest: unknown[]) {
            try {
              noteError(req, error);
            } catch {
              // Never into the application.
            }
            return original.call(this, error, req, ...rest);
          },
      );
    }
    // Koa: the error event's errors (ctx.onerror), and the router's matched route.
    const koa = load(requires, 'koa') as { prototype?: Record<string, unknown> } | null;
    const koaContext = load(requires, 'koa/lib/context.js') as Record<string, unknown> | null;
    const handle = koa?.prototype?.handleRequest;
    if (koa?.prototype && typeof handle === 'function') {
      koa.prototype.handleRequest = function (
        this: unknown,
        ctx: { req: IncomingMessage },
        ...rest: unknown[]
      ) {
        const scope = byRequest.get(ctx.req);
        if (scope) scope.koa = ctx as Scope['koa'];
        return handle.call(this, ctx, ...rest);
      };
      unpatch.push(() => {
        koa.prototype!.handleRequest = handle;
      });
    }
    const onerror = koaContext?.onerror;
    if (koaContext && typeof onerror === 'function') {
      koaContext.onerror = function (this: { req?: IncomingMessage }, err: unknown) {
        if (err != null) noteError(this.req, err);
        return onerror.call(this, err);
      };
      unpatch.push(() => {
        koaContext.onerror = onerror;
      });
    }
  }

  // ---- outbound propagation ----

  // node:http and node:https: the traceparent goes into the options before the request is made (http.get ends the
  // request at once, and Node 20's http.client.request.start channel fires after the headers are sent).
  const traced = (args: unknown[]): unknown[] => {
    const scope = current();
    if (!scope) return args;
    const value = formatTraceParent(scope.traceId, scope.spanId);
    const withHeader = (o: Record<string, unknown>) => {
      const h = o.headers;
      if (Array.isArray(h)) return o;
      const headers = (h ?? {}) as Record<string, unknown>;
      if (Object.keys(headers).some((k) => k.toLowerCase() === 'traceparent')) return o;
      return { ...o, headers: { ...headers, traceparent: value } };
    };
    const [first, second] = args;
    if (typeof first === 'string' || first instanceof URL) {
      if (second && typeof second === 'object')
        return [first, withHeader(second as Record<string, unknown>), ...args.slice(2)];
      return [first, { headers: { traceparent: value } }, ...args.slice(1)];
    }
    if (first && typeof first === 'object')
      return [withHeader(first as Record<string, unknown>), ...args.slice(1)];
    return args;
  };
  function patchOutbound() {
    for (const lib of [http, https] as unknown as Record<string, unknown>[]) {
      for (const name of ['request', 'get']) {
        const original = lib[name] as ((...a: unknown[]) => unknown) & { __svc?: boolean };
        if (typeof original !== 'function' || original.__svc) continue;
        const wrapped = Object.assign(
          function (this: unknown, ...args: unknown[]) {
            let call = args;
            try {
              call = traced(args);
            } catch {
              // Sent as the application asked.
            }
            return original.apply(this, call);
          },
          { __svc: true },
        );
        lib[name] = wrapped;
        unpatch.push(() => {
          lib[name] = original;
        });
      }
    }
    // ES modules' named imports of node:http see the wrapped functions too.
    syncBuiltinESMExports();
  }
  const onFetch = guarded(onProblem, (message: unknown) => {
    const scope = current();
    const { request } = message as { request: { headers?: unknown; addHeader?(n: string, v: string): void } };
    if (!scope || typeof request.addHeader !== 'function') return;
    if (
      String(request.headers ?? '')
        .toLowerCase()
        .includes('traceparent')
    )
      return;
    request.addHeader('traceparent', formatTraceParent(scope.traceId, scope.spanId));
  });
  // Errors nothing caught, noted on their request before the process decides what to do with them.
  const onUncaught = guarded(onProblem, (err: unknown) => {
    const scope = current();
    if (scope && scope.exception === null) scope.exception = exceptionOf(err);
  });

  const channels: [string, (m: unknown) => void][] = [['undici:request:create', onFetch]];
  try {
    patchOutbound();
  } catch (err) {
    onProblem(`internal error: outbound requests not traced: ${(err as Error).message}`);
  }
  if (options.captureHttp !== false && delivery) {
    channels.push(
      ['http.server.request.start', onRequestStart],
      ['tracing:fastify.request.handler:start', onFastifyStart],
      ['tracing:fastify.request.handler:error', onFastifyError],
    );
    try {
      patchResponseEnd();
      patchFrameworks();
    } catch (err) {
      onProblem(`internal error: frameworks not hooked: ${(err as Error).message}`);
    }
  }
  for (const [name, fn] of channels) dc.subscribe(name, fn);
  process.on('uncaughtExceptionMonitor', onUncaught);

  // ---- logs and metrics ----

  function log(level: Level, message: string, attributes?: Record<string, unknown>) {
    const scope = current();
    const entry: Record<string, unknown> = {
      timestamp: Date.now(),
      level,
      message: scrubString(String(message)),
    };
    if (attributes && typeof attributes === 'object') {
      const { error, err, ...rest } = attributes as { error?: unknown; err?: unknown };
      const e = error instanceof Error ? error : err instanceof Error ? err : null;
      if (e) entry.exception = exceptionOf(e, true);
      const kept = e ? (error === e ? { err, ...rest } : { error, ...rest }) : attributes;
      const clean = scrubValue(Object.fromEntries(Object.entries(kept).filter(([, v]) => v !== undefined)));
      if (clean && typeof clean === 'object' && Object.keys(clean).length > 0) entry.attributes = clean;
    }
    if (scope && (scope.logs?.length ?? 0) < MAX_INLINE_LOGS) {
      scope.logs ??= [];
      scope.logs.push(entry);
      return;
    }
    const store = storage.getStore();
    const owner = store && store !== IGNORED ? store : null;
    delivery?.add('logs', {
      ...entry,
      ...resource,
      ...(owner ? { executionId: owner.spanId, traceId: owner.traceId, spanId: owner.spanId } : {}),
    });
  }

  const sendMetrics = () => {
    for (const p of aggregator.drain(Date.now(), resource)) delivery?.add('metrics', p);
  };
  const metricsTimer = setInterval(guarded(onProblem, sendMetrics), options.metricsIntervalMs ?? 10_000);
  metricsTimer.unref();

  // ---- exit ----

  let exitFlushed = false;
  const onBeforeExit = guarded(onProblem, () => {
    sendMetrics();
    if (exitFlushed || !delivery || delivery.idle) return;
    // Once: a service that is away must not keep the process alive for ever.
    exitFlushed = true;
    const keepAlive = setTimeout(() => {}, 5000);
    void delivery.flush(5000).finally(() => clearTimeout(keepAlive));
  });
  process.on('beforeExit', onBeforeExit);

  let closed = false;
  const client: Client = {
    setContext: guarded(onProblem, (context: Record<string, unknown>) => {
      const scope = current();
      if (scope) {
        scope.context ??= newContext();
        mergeContext(scope.context, context, 1, { n: countLeaves(scope.context) });
      }
    }),
    setFingerprint: guarded(onProblem, (parts: string[]) => {
      const scope = current();
      if (scope && Array.isArray(parts)) scope.fingerprint = parts.map((p) => scrubString(String(p)));
    }),
    captureException: guarded(onProblem, (err: unknown) => {
      const scope = current();
      if (scope) scope.exception = exceptionOf(err, true);
      else log('error', err instanceof Error ? err.message : String(err), { error: err });
    }),
    addEvidence: guarded(onProblem, (kind: string, verdict: 'failed' | 'success', detail?: string) => {
      const scope = current();
      if (!scope || typeof kind !== 'string' || kind === '') return;
      scope.evidence ??= [];
      scope.evidence.push({
        kind,
        verdict: verdict === 'failed' ? 'failed' : 'success',
        ...(detail ? { detail: scrubString(detail) } : {}),
      });
    }),
    log: {
      debug: guarded(onProblem, (m: string, a?: Record<string, unknown>) => log('debug', m, a)),
      info: guarded(onProblem, (m: string, a?: Record<string, unknown>) => log('info', m, a)),
      warn: guarded(onProblem, (m: string, a?: Record<string, unknown>) => log('warn', m, a)),
      error: guarded(onProblem, (m: string, a?: Record<string, unknown>) => log('error', m, a)),
    },
    async track<T>(
      name: string,
      fn: () => T | Promise<T>,
      opts: { source?: string; context?: Record<string, unknown> } = {},
    ) {
      let scope: Scope | null = null;
      try {
        const parent = current();
        scope = newScope(
          parent ? { traceId: parent.traceId, parentId: parent.spanId } : null,
          opts.source ?? 'job',
          String(name),
        );
        if (opts.context) {
          scope.context = newContext();
          mergeContext(scope.context, opts.context);
        }
      } catch (err) {
        onProblem(`internal error: ${(err as Error).message}`);
      }
      if (!scope) return fn();
      const s = scope;
      const finish = guarded(onProblem, (error: unknown, failed: boolean) => {
        if (s.finished) return;
        s.finished = true;
        if (failed && s.exception === null) s.exception = exceptionOf(error);
        send(s, null, failed ? 'failed' : 'success');
      });
      try {
        const result = await storage.run(s, fn);
        finish(null, false);
        return result;
      } catch (err) {
        finish(err, true);
        throw err;
      }
    },
    metrics: {
      counter: guarded(onProblem, (name: string, value = 1, tags?: Tags) => {
        if (!aggregator.record('counter', name, value, tags))
          onProblem(`metric: ${name} not recorded (bad name or value)`);
      }),
      gauge: guarded(onProblem, (name: string, value: number, tags?: Tags) => {
        if (!aggregator.record('gauge', name, value, tags))
          onProblem(`metric: ${name} not recorded (bad name or value)`);
      }),
      histogram: guarded(onProblem, (name: string, value: number, tags?: Tags) => {
        if (!aggregator.record('histogram', name, value, tags))
          onProblem(`metric: ${name} not recorded (bad name or value)`);
      }),
    },
    currentTrace() {
      const scope = current();
      return scope ? { traceId: scope.traceId, spanId: scope.spanId } : null;
    },
    async flush(timeoutMs = 10_000) {
      try {
        sendMetrics();
        return delivery ? await delivery.flush(timeoutMs) : true;
      } catch {
        return false;
      }
    },
    async close(timeoutMs = 10_000) {
      if (closed) return true;
      closed = true;
      try {
        for (const [name, fn] of channels) dc.unsubscribe(name, fn);
        for (const undo of unpatch) undo();
        syncBuiltinESMExports();
        process.off('uncaughtExceptionMonitor', onUncaught);
        process.off('beforeExit', onBeforeExit);
        clearInterval(metricsTimer);
        sendMetrics();
        return delivery ? await delivery.close(timeoutMs) : true;
      } catch {
        return false;
      }
    },
    stats() {
      return delivery ? { ...delivery.stats, queued: delivery.pending } : { queued: 0, sent: 0, dropped: 0 };
    },
  };
  return client;
}
