/**
 * Composition root: config → stores → services → app → listen; and the graceful stop:
 * readyz turns 503, new connections stop, in-flight streams finish (up to the drain deadline, then are cut
 * and logged), the log queue is flushed, stores are closed.
 */
import { randomBytes } from 'node:crypto';
import { credentialFingerprint, FINGERPRINT_SECRET } from './credential-fingerprint.js';
import type { AddressInfo } from 'node:net';
import { upstreamAgent } from './proxy/agent.js';
import type { ProxyServices, Shutdown } from './proxy/context.js';
import type { FastifyInstance } from 'fastify';
import { localUrl, type Config } from './config.js';
import { buildApp } from './app.js';
import { MemoryLoginThrottle, type LoginThrottle } from './accounts/throttle.js';
import { RedisLoginThrottle } from './accounts/redis-throttle.js';
import { FallbackLoginThrottle } from './accounts/fallback-throttle.js';
import { startKeyChangeFeed } from './keys/change-feed.js';
import { LocalKeyEventBus, type KeyEventBus } from './keys/events.js';
import { LastUsedTracker } from './keys/last-used.js';
import { KEY_CACHE_TTL_MS, KeyVerifier } from './keys/verify.js';
import {
  createRedisCounters,
  createRedisHolds,
  KeyLimiter,
  type SharedCounters,
  type SharedHolds,
  memberSpendSince,
} from './limits/index.js';
import { LOG_QUEUE_OPTIONS, LogQueue } from './log/queue.js';
import { createRedisTailBus, LocalTailBus, type TailBus } from './log/tail.js';
import { SPEND_FLUSH_MS, SpendRollup } from './log/spend-rollup.js';
import type { RequestLogRow } from './types.js';
import { startRetention } from './log/retention.js';
import { startRollupFill } from './log/rollup-fill.js';
import { ALERT_DEFAULTS, startAlerts, type AlertJob } from './alerts/index.js';
import { createLogger } from './logger.js';
import { createMetrics, type Metrics } from './metrics.js';
import type { RedisConnections } from './redis.js';
import { openStores } from './store/factory.js';
import type { ConfigStore, LogStore } from './store/types.js';
import { computeCost } from './metering/index.js';
import { registerUpstreams } from './providers/index.js';
import { attachWebSocketProxy, type WebSocketProxy } from './proxy/websocket/index.js';

export interface RunningServer {
  app: FastifyInstance;
  url: string;
  port: number;
  /** KEYRELAY_PUBLIC_URL, or by default this server's address with the port it bound (also on port 0). */
  publicUrl: string;
  /** Graceful stop; resolves when everything is flushed and closed. */
  stop(): Promise<void>;
  /**
   * Requests in flight (proxied exchanges until their log rows are queued, streams included; open
   * WebSockets) and HTTP requests and upgrades received so far.
   */
  traffic: () => { inFlight: number; arrived: number };
  /**
   * Resolves once the exchanges in flight now have queued their log rows. A row is queued just after the
   * response's last byte, so a caller that has read a whole response and flushes the queue at once can be
   * a moment early: tests wait for this first.
   */
  settled: () => Promise<void>;
  /** The live services, for the CLI-less paths of tests and tools. */
  services: {
    configStore: ConfigStore;
    logStore: LogStore;
    bus: KeyEventBus;
    queue: LogQueue;
    keys: KeyVerifier;
    lastUsed: LastUsedTracker;
    limits: KeyLimiter;
    metrics: Metrics;
    alerts: AlertJob;
  };
}

const LAST_USED_FLUSH_MS = 15_000;
/**
 * How long each step of a start may take once the stores are open (migrations can take longer, and say so).
 * A dependency that accepts a connection and never answers would otherwise keep the process up, silent and
 * never listening; a supervisor (compose's restart policy, Kubernetes) restarts only a process that exits.
 */
const START_STEP_MS = 30_000;
/** How long a stop waits for the last spans and metrics to reach the collector. */
const TELEMETRY_FLUSH_MS = 5_000;

/**
 * Keyed hash of a provider credential (never the credential itself). A caller sends the same credential on
 * every request, so the last few thousand answers are remembered instead of computing an HMAC each time.
 */
function fingerprinter(key: Buffer): (credential: string) => string {
  const cache = new Map<string, string>();
  return (credential) => {
    let fp = cache.get(credential);
    if (fp === undefined) {
      fp = credentialFingerprint(key, credential);
      if (cache.size >= 4096) cache.clear();
      cache.set(credential, fp);
    }
    return fp;
  };
}

/**
 * `work`, or a failed start naming `what`: when `work` fails, or has not settled within `deadlineMs`
 * (none when null).
 */
async function startStep<T>(
  what: string,
  work: Promise<T>,
  deadlineMs: number | null = START_STEP_MS,
): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    if (deadlineMs === null) return;
    timer = setTimeout(
      () => reject(new Error(`${what} did not answer within ${deadlineMs / 1000} s; keyrelay did not start`)),
      deadlineMs,
    );
  });
  try {
    return await Promise.race([
      work.catch((err: unknown) => {
        throw new Error(`${what}: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
      }),
      deadline,
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * KEYRELAY_PORT=0 without KEYRELAY_PUBLIC_URL: the default public URL names port 0, and the real port is
 * known only once the socket is bound. What the console and the error messages show then follows `bound`.
 */
function followingBoundPort(config: Readonly<Config>, bound: () => string | null): Readonly<Config> {
  if (config.port !== 0 || config.publicUrl !== localUrl(config.host, 0)) return config;
  const served = { ...config };
  Object.defineProperty(served, 'publicUrl', { get: () => bound() ?? config.publicUrl, enumerable: true });
  return Object.freeze(served);
}

export async function startServer(configured: Readonly<Config>): Promise<RunningServer> {
  let boundUrl: string | null = null;
  const config = followingBoundPort(configured, () => boundUrl);
  const metrics = createMetrics();
  const log = createLogger(config.logLevel, config.logFormat);
  registerUpstreams(config.namedUpstreams);
  // No deadline: a migration of a large log may rightly take long; pg's connect timeout bounds a silent server.
  const { configStore, logStore, logWriter, kind, driver } = await startStep(
    config.databaseUrl ? 'PostgreSQL (KEYRELAY_DATABASE_URL)' : 'SQLite (KEYRELAY_DATA_DIR)',
    openStores(config, (msg) => log.info(msg)),
    null,
  );
  log.info({ store: kind, driver, node: process.versions.node }, 'stores open');
  const warn = (err: unknown, msg: string) => log.warn({ err }, msg);
  let bus: KeyEventBus;
  let throttle: LoginThrottle;
  let sharedCounters: SharedCounters | null = null;
  let redis: RedisConnections | null = null;
  let sharedHolds: SharedHolds | null = null;
  if (config.redisUrl) {
    // Loaded only when configured: ioredis is memory a single instance does not need.
    const { openRedis } = await import('./redis.js');
    const { createRedisKeyEventBus } = await import('./keys/redis-bus.js');
    redis = await startStep('Redis (KEYRELAY_REDIS_URL)', openRedis(config.redisUrl, metrics));
    bus = await startStep('Redis (KEYRELAY_REDIS_URL)', createRedisKeyEventBus(redis, log));
    sharedCounters = createRedisCounters(redis.client);
    sharedHolds = createRedisHolds(redis.client);
    throttle = new FallbackLoginThrottle(
      new RedisLoginThrottle(redis.client, { limits: config.loginThrottle }),
      new MemoryLoginThrottle(config.loginThrottle),
      log,
    );
  } else {
    bus = new LocalKeyEventBus();
    throttle = new MemoryLoginThrottle(config.loginThrottle);
  }
  const fingerprintKey = Buffer.from(
    await startStep(
      'the config store (reading the fingerprint secret)',
      configStore.ensureSecret(FINGERPRINT_SECRET, randomBytes(32).toString('base64')),
    ),
    'base64',
  );

  let draining = false;
  const inflight = new Set<() => void>();
  const active = new Set<Promise<void>>();
  const settled = (): Promise<void> => Promise.allSettled([...active]).then(() => {});
  const keys = new KeyVerifier(configStore, config.keyCacheTtlMs ?? KEY_CACHE_TTL_MS, bus, Date.now, (ok) =>
    metrics.storeUp.set({ store: 'config' }, ok ? 1 : 0),
  );
  // Always on, Redis or not: it carries the CLI's and other instances' key changes when there is no Redis,
  // and bounds a lost pub/sub message to one poll instead of the cache TTL when there is.
  let sockets: WebSocketProxy | null = null; // open WebSockets re-check their key on every key event
  const changeFeed = await startStep(
    'the config store (the key change feed)',
    startKeyChangeFeed({
      store: configStore,
      evict: (e) => {
        keys.onEvent(e);
        sockets?.onKeyEvent(e);
      },
      log,
    }),
  );
  const lastUsed = new LastUsedTracker(configStore, LAST_USED_FLUSH_MS, (err) =>
    warn(err, 'last_used_at write failed'),
  );
  const limits = new KeyLimiter({
    spendSince: (keyId, since, endUser) => logWriter.spendSince(keyId, since, endUser),
    memberSpendSince: memberSpendSince(configStore, logWriter),
    shared: sharedCounters,
    holds: sharedHolds,
    onError: warn,
    ...config.limits,
  });
  const tail: TailBus = redis ? createRedisTailBus(redis, log) : new LocalTailBus();
  const queue = new LogQueue(logWriter, LOG_QUEUE_OPTIONS, metrics, log, (rows) => tail.publish(rows));
  // A budget's spend before an instance first saw its key is read from the request log (docs/limits.md);
  // with the log off, from each key's hourly sums, kept instead of its rows.
  const spend = new SpendRollup(logWriter, SPEND_FLUSH_MS, log);
  const dispatcher = upstreamAgent(config.upstreamKeepAliveMs);
  // Loaded only when export is on: the SDK and its exporters would otherwise sit in every idle process.
  const telemetry = config.telemetry
    ? (await import('./telemetry/index.js')).createTelemetry(config, metrics, log)
    : null;

  const services: ProxyServices = {
    config,
    keys,
    lastUsed,
    record: config.requestLog ? (row: RequestLogRow) => queue.push(row) : (row) => spend.add(row),
    limits,
    metrics,
    telemetry,
    log,
    dispatcher,
    fingerprint: fingerprinter(fingerprintKey),
    cost: computeCost,
    batches: logStore,
  };
  const shutdown: Shutdown = { isDraining: () => draining, inflight, active };
  const app = await startStep(
    'building the app',
    buildApp({
      log,
      config,
      configStore,
      logStore,
      bus,
      throttle,
      metrics,
      tail,
      proxy: services,
      shutdown,
    }),
  );
  // WebSockets under /api/proxy (src/proxy/websocket/), on the same services as the HTTP proxy.
  sockets = attachWebSocketProxy(app.server, services, shutdown);
  let arrived = 0;
  const arrive = () => void arrived++;
  app.server.on('request', arrive).on('upgrade', arrive);
  bus.subscribe((e) => sockets?.onKeyEvent(e));
  const retention = startRetention(logStore, configStore, config, (err) =>
    warn(err, 'retention prune failed'),
  );
  const rollupFill = startRollupFill(logStore, (err) => warn(err, 'usage rollup fill failed'));

  await startStep(
    `listening on ${config.host}:${config.port}`,
    app.listen({ host: config.host, port: config.port }),
  );
  const port = (app.server.address() as AddressInfo).port;
  const url = localUrl(config.host, port);
  boundUrl = url;
  const alerts: AlertJob = startAlerts(
    { configStore, logStore },
    () => ({ publicUrl: config.publicUrl, port }),
    config.alerts ?? ALERT_DEFAULTS,
    log,
  );

  let stopping: Promise<void> | null = null;
  const stop = (): Promise<void> => {
    stopping ??= (async () => {
      draining = true;
      const server = app.server;
      // Stop accepting; keep-alive connections with nothing in flight are closed now.
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      // Upgraded sockets hold server.close() open until they end: the drain deadline, then 1001.
      const socketsDrained = sockets.drain(config.drainTimeoutMs);
      server.closeIdleConnections();
      // A connection whose last response finishes during the drain becomes idle later: close those too, or
      // every drain would last until the deadline.
      const sweep = setInterval(() => server.closeIdleConnections(), 100);
      const deadline = setTimeout(() => {
        for (const cut of inflight) cut();
        server.closeAllConnections();
      }, config.drainTimeoutMs);
      await socketsDrained;
      await closed;
      clearInterval(sweep);
      clearTimeout(deadline);
      // Cut exchanges finish their bookkeeping on later ticks; their rows must be queued before the flush.
      await settled();
      retention.stop();
      await rollupFill.stop();
      await alerts.stop();
      await lastUsed.close();
      await limits.close();
      const left = await queue.flush(config.drainTimeoutMs);
      if (left > 0) app.log.error({ left }, 'request log rows could not be written before exit');
      queue.close();
      if (!(await spend.flush(config.drainTimeoutMs)))
        app.log.error('key spend could not be written before exit');
      spend.close();
      await logWriter.close();
      // Bounded: a collector that hangs must not hold the exit (what it misses is counted as dropped).
      await telemetry?.shutdown(TELEMETRY_FLUSH_MS);
      await app.close();
      await dispatcher.close();
      await changeFeed.stop();
      await tail.close();
      await bus.close();
      await throttle.close();
      // After everything that borrows them.
      await redis?.close();
      await logStore.close();
      await configStore.close();
    })();
    return stopping;
  };

  return {
    app,
    port,
    url,
    publicUrl: config.publicUrl,
    stop,
    traffic: () => ({ inFlight: active.size + (sockets?.openSockets ?? 0), arrived }),
    settled,
    services: { configStore, logStore, bus, queue, keys, lastUsed, limits, metrics, alerts },
  };
}
