/**
 * Builds the HTTP app. Every route is visible here:
 *   /api/proxy/<provider>/*  the proxy (plain node:http + undici, ahead of Fastify: see proxy/handle.ts)
 *   /api/console/*           the console's JSON API (console-api/)
 *   /healthz /readyz /metrics
 *   /*                       the built console (web/dist), with SPA fallback
 * The proxy runs outside Fastify's routing on purpose: it must see the raw request target (to refuse
 * absolute-form and encoded-dot paths before any normalisation) and read the body only after the key is
 * checked, and it is the hot path, where every hook costs.
 */
import { existsSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import fastifyStatic from '@fastify/static';
import Fastify, { type FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import type { Config } from './config.js';
import { registerConsoleApi } from './console-api/index.js';
import type { TailBus } from './log/tail.js';
import { errorBody } from './console-api/error-handler.js';
import { CONSOLE_ERRORS } from './console-api/errors.js';
import { ProxyError, renderWrongBaseUrl } from './errors.js';
import { securityHeaders } from './console-api/security.js';
import type { LoginThrottle } from './accounts/throttle.js';
import type { KeyEventBus } from './keys/events.js';
import type { Metrics } from './metrics.js';
import {
  answerClientError,
  guardConnections,
  guardContinue,
  guardedServerOptions,
  guardRequests,
} from './http-guard.js';
import { RequestLogController } from './logger.js';
import { createProxyHandler, type ProxyServices, type Shutdown } from './proxy/handle.js';
import { PROXY_PREFIX } from './proxy/target.js';
import type { ConfigStore, LogStore } from './store/types.js';

export interface AppDeps {
  log: Logger;
  config: Readonly<Config>;
  configStore: ConfigStore;
  logStore: LogStore;
  bus: KeyEventBus;
  throttle: LoginThrottle;
  metrics: Metrics;
  /** New log rows for the console's live tail; absent, the console has none. */
  tail?: TailBus;
  /** The proxy's services (the WebSocket proxy shares them: src/server.ts). */
  proxy: ProxyServices;
  shutdown: Shutdown;
}

/** web/dist relative to this file, in both src/ (tsx) and dist/src/ (built) layouts. */
function findConsoleDir(): string | null {
  const here = dirname(fileURLToPath(import.meta.url));
  for (const candidate of [resolve(here, '../web/dist'), resolve(here, '../../web/dist')]) {
    if (existsSync(join(candidate, 'index.html'))) return candidate;
  }
  return null;
}

/** A request the proxy owns: its path, or a target that is not origin-form at all (always refused there). */
function isProxyRequest(url: string): boolean {
  return url.startsWith(PROXY_PREFIX) || !url.startsWith('/') || url.startsWith('//');
}

/** A provider API path without the proxy prefix: an SDK whose base URL is the bare keyrelay address. */
const PROVIDER_API_PATH =
  /^\/(v1(\/|$|\?)|(chat\/completions|completions|embeddings|models|responses|messages)(\/|$|\?))/;

/** `wrong_base_url`, naming the base URLs to use instead. */
function wrongBaseUrl(publicUrl: string): ProxyError {
  const base = publicUrl.replace(/\/+$/, '');
  return new ProxyError(
    'wrong_base_url',
    `Set your SDK's base URL to ${base}/api/proxy/openai/v1 (OpenAI) or ${base}/api/proxy/anthropic ` +
      '(Anthropic), and send your keyrelay key in the proxy-api-key header.',
  );
}

/**
 * Fastify gives each plugin 10 s to register and then refuses to start. Registering only builds routes and
 * reads the console's files, but on a starved host (a CPU-limited container starting beside busy
 * neighbours) that took longer: a slow start beats an instance that exits.
 */
const PLUGIN_START_TIMEOUT_MS = 60_000;

export async function buildApp(deps: AppDeps): Promise<FastifyInstance> {
  let proxyHandler: ((req: IncomingMessage, res: ServerResponse) => void) | null = null;
  const app = Fastify({
    loggerInstance: deps.log,
    trustProxy: deps.config.trustProxy,
    bodyLimit: 1024 * 1024,
    pluginTimeout: PLUGIN_START_TIMEOUT_MS,
    clientErrorHandler: answerClientError,
    serverFactory: (fastifyHandler) => {
      const listener = guardRequests(
        deps.config.guard,
        (req, res) => {
          if (proxyHandler && isProxyRequest(req.url ?? '')) proxyHandler(req, res);
          else fastifyHandler(req, res);
        },
        (req) => !isProxyRequest(req.url ?? ''),
      );
      const server = createServer(
        { noDelay: true, keepAliveTimeout: 75_000, ...guardedServerOptions(deps.config.guard) },
        listener,
      );
      guardContinue(server, listener, (req) => isProxyRequest(req.url ?? ''));
      guardConnections(server, deps.config.guard, deps.log);
      return server;
    },
    logController: new RequestLogController(),
  });
  proxyHandler = createProxyHandler(deps.proxy, deps.shutdown);
  // Every answer of keyrelay's own, /healthz and /metrics included: none of them is meant to be sniffed.
  app.addHook('onSend', async (_req, reply) => {
    reply.header('x-content-type-options', 'nosniff');
  });

  app.get('/healthz', () => ({ status: 'ok' }));
  app.get('/readyz', async (_req, reply) => {
    if (deps.shutdown.isDraining()) return reply.code(503).send({ status: 'draining' });
    return { status: 'ready' };
  });
  app.get('/metrics', async (_req, reply) => {
    reply.header('content-type', deps.metrics.registry.contentType);
    return deps.metrics.registry.metrics();
  });

  await app.register(async (scope) => {
    scope.addHook('onSend', securityHeaders);
    await registerConsoleApi(scope, {
      config: deps.config,
      configStore: deps.configStore,
      logStore: deps.logStore,
      bus: deps.bus,
      throttle: deps.throttle,
      metrics: deps.metrics,
      ...(deps.tail && { tail: deps.tail }),
      rateStatus: (key) => deps.proxy.limits.rateStatus(key),
    });
    const root = findConsoleDir();
    if (root) {
      await scope.register(fastifyStatic, { root, wildcard: false, index: ['index.html'] });
    }
    scope.setNotFoundHandler(async (req, reply) => {
      if (PROVIDER_API_PATH.test(req.url)) {
        const err = wrongBaseUrl(deps.config.publicUrl);
        return reply
          .code(err.status)
          .header('x-keyrelay-error', err.code)
          .type('application/json')
          .send(renderWrongBaseUrl(err));
      }
      if (req.method !== 'GET' || req.url.startsWith('/api/')) {
        return reply
          .code(CONSOLE_ERRORS.not_found.status)
          .send(errorBody('not_found', CONSOLE_ERRORS.not_found.message));
      }
      if (!root)
        return reply.code(503).type('text/plain').send('The console is not built: run `npm run build`.');
      // Client-side routes (/keys, /requests/…) all load the single-page console.
      return reply.type('text/html').sendFile('index.html');
    });
  });
  return app as unknown as FastifyInstance;
}
