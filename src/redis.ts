/**
 * The one owner of keyrelay's Redis connections (`KEYRELAY_REDIS_URL`): it opens them, watches them, and closes
 * them; the key-event bus, the login throttle and the shared limit counters receive them and never close them.
 * Two connections, since a connection in subscriber mode can run no other command.
 */
import { Redis } from 'ioredis';
import type { Metrics } from './metrics.js';

const COMMAND_TIMEOUT_MS = 2_000;
const HEARTBEAT_MS = 5_000;

export interface RedisConnections {
  /** Commands (publish, throttle windows, limit counters): fails fast while Redis is away. */
  client: Redis;
  /** Subscriber mode only (key events); reconnects forever and is pinged, so a partition is noticed. */
  subscriber: Redis;
  close(): Promise<void>;
}

export async function openRedis(url: string, metrics: Pick<Metrics, 'redisUp'>): Promise<RedisConnections> {
  const options = {
    // Fail fast while Redis is away: callers fall back (TTL for revocation, memory for throttling).
    maxRetriesPerRequest: 1,
    enableOfflineQueue: false,
    connectTimeout: 2_000,
    retryStrategy: (times: number) => Math.min(times * 200, 2_000),
    lazyConnect: true,
  };
  // A Redis that stops answering without closing (a partition) must not hang a revoke or a login.
  const client = new Redis(url, { ...options, commandTimeout: COMMAND_TIMEOUT_MS });
  const subscriber = new Redis(url, { ...options, enableOfflineQueue: true, maxRetriesPerRequest: null });
  // The subscriber is the connection whose loss costs something (missed key events): it reports Redis up.
  subscriber.on('ready', () => metrics.redisUp.set(1));
  subscriber.on('close', () => metrics.redisUp.set(0));
  // ioredis emits 'error' on every failed reconnect; 'close' already reports the outage.
  subscriber.on('error', () => {});
  client.on('error', () => {});

  await Promise.all([client.connect(), subscriber.connect()]);

  // A silent subscriber connection (partition) would report Redis up while hearing nothing: ping it, and
  // reconnect when it does not answer, which reports the outage (and makes the bus flush the key cache).
  const heartbeat = setInterval(() => {
    if (subscriber.status !== 'ready') return;
    let answered = false;
    const timer = setTimeout(() => {
      if (!answered && subscriber.status === 'ready') subscriber.disconnect(true);
    }, COMMAND_TIMEOUT_MS);
    subscriber.ping().then(
      () => {
        answered = true;
        clearTimeout(timer);
      },
      () => {},
    );
  }, HEARTBEAT_MS);
  heartbeat.unref();

  return {
    client,
    subscriber,
    close() {
      clearInterval(heartbeat);
      subscriber.disconnect();
      client.disconnect();
      return Promise.resolve();
    },
  };
}
