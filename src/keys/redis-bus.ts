/**
 * Key events across instances over Redis pub/sub. Local listeners run first and always, so the instance
 * that revoked stops the key at once even with Redis down; the other instances hear it within
 * milliseconds. A lost message is bounded by the key cache's TTL, and after any reconnect the subscriber
 * flushes the whole cache, since messages sent while it was away are gone (pub/sub keeps nothing).
 */
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import type { Metrics } from '../metrics.js';
import type { KeyEvent, KeyEventBus } from './events.js';

export const KEY_EVENTS_CHANNEL = 'keyrelay:key-events';
const COMMAND_TIMEOUT_MS = 2_000;
const HEARTBEAT_MS = 5_000;

interface Wire {
  from: string;
  event: KeyEvent;
}

export interface RedisKeyEventBus extends KeyEventBus {
  /** The command connection, shared with the login throttle. */
  client: Redis;
}

export interface RedisBusLog {
  warn(obj: object, msg: string): void;
  info(obj: object, msg: string): void;
}

export async function createRedisKeyEventBus(
  url: string,
  metrics: Pick<Metrics, 'redisUp'>,
  log: RedisBusLog,
): Promise<RedisKeyEventBus> {
  const instance = randomUUID();
  const listeners: ((e: KeyEvent) => void)[] = [];
  const emit = (e: KeyEvent) => {
    for (const l of listeners) l(e);
  };
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
  const sub = new Redis(url, { ...options, enableOfflineQueue: true, maxRetriesPerRequest: null });
  let subReadyOnce = false;
  let downSince: number | null = null;

  sub.on('ready', () => {
    metrics.redisUp.set(1);
    if (subReadyOnce) {
      // Whatever was published while we were disconnected is lost: start from a clean cache. Once more when
      // the channel is subscribed again, for an entry re-cached before a revocation in that gap.
      emit({ type: 'flush_all' });
      sub.subscribe(KEY_EVENTS_CHANNEL).then(
        () => emit({ type: 'flush_all' }),
        () => {},
      );
      log.info({ downMs: downSince ? Date.now() - downSince : null }, 'redis reconnected; key cache flushed');
    }
    subReadyOnce = true;
    downSince = null;
  });
  sub.on('close', () => {
    metrics.redisUp.set(0);
    if (downSince === null) {
      downSince = Date.now();
      log.warn({}, 'redis connection lost; revocation falls back to the key cache TTL');
    }
  });
  // ioredis emits 'error' on every failed reconnect; 'close' above already reported the outage.
  sub.on('error', () => {});
  client.on('error', () => {});
  sub.on('message', (channel: string, message: string) => {
    if (channel !== KEY_EVENTS_CHANNEL) return;
    try {
      const wire = JSON.parse(message) as Wire;
      if (wire.from !== instance) emit(wire.event);
    } catch {
      // Not ours to understand; ignore.
    }
  });

  await Promise.all([client.connect(), sub.connect()]);
  await sub.subscribe(KEY_EVENTS_CHANNEL);

  // A silent subscriber connection (partition) would report Redis up while hearing nothing: ping it, and
  // reconnect when it does not answer, which reports the outage and flushes the cache on return.
  const heartbeat = setInterval(() => {
    if (sub.status !== 'ready') return;
    let answered = false;
    const timer = setTimeout(() => {
      if (!answered && sub.status === 'ready') sub.disconnect(true);
    }, COMMAND_TIMEOUT_MS);
    sub.ping().then(
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
    async publish(event: KeyEvent) {
      emit(event);
      try {
        await client.publish(KEY_EVENTS_CHANNEL, JSON.stringify({ from: instance, event } satisfies Wire));
      } catch (err) {
        log.warn({ err }, 'key event not published; other instances rely on the key cache TTL');
      }
    },
    subscribe(listener) {
      listeners.push(listener);
    },
    async close() {
      clearInterval(heartbeat);
      sub.disconnect();
      client.disconnect();
      return Promise.resolve();
    },
  };
}
