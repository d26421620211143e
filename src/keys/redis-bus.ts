/**
 * Key events across instances over Redis pub/sub. Local listeners run first and always, so the instance
 * that revoked stops the key at once even with Redis down; the other instances hear it within
 * milliseconds. A lost message is bounded by the key cache's TTL, and after any reconnect the subscriber
 * flushes the whole cache, since messages sent while it was away are gone (pub/sub keeps nothing).
 */
import { randomUUID } from 'node:crypto';
import type { RedisConnections } from '../redis.js';
import type { KeyEvent, KeyEventBus } from './events.js';

export const KEY_EVENTS_CHANNEL = 'keyrelay:key-events';

interface Wire {
  from: string;
  event: KeyEvent;
}

export interface RedisBusLog {
  warn(obj: object, msg: string): void;
  info(obj: object, msg: string): void;
}

/** A bus over connections owned by `src/redis.ts`: closing the bus stops listening, not the connections. */
export async function createRedisKeyEventBus(
  redis: RedisConnections,
  log: RedisBusLog,
): Promise<KeyEventBus> {
  const { client, subscriber: sub } = redis;
  const instance = randomUUID();
  const listeners: ((e: KeyEvent) => void)[] = [];
  const emit = (e: KeyEvent) => {
    for (const l of listeners) l(e);
  };
  let downSince: number | null = null;

  // Connected already (redis.ts), so every 'ready' heard here is a reconnect.
  const onReady = () => {
    // Whatever was published while we were disconnected is lost: start from a clean cache. Once more when
    // the channel is subscribed again, for an entry re-cached before a revocation in that gap.
    emit({ type: 'flush_all' });
    sub.subscribe(KEY_EVENTS_CHANNEL).then(
      () => emit({ type: 'flush_all' }),
      () => {},
    );
    log.info({ downMs: downSince ? Date.now() - downSince : null }, 'redis reconnected; key cache flushed');
    downSince = null;
  };
  const onClose = () => {
    if (downSince === null) {
      downSince = Date.now();
      log.warn({}, 'redis connection lost; revocation falls back to the key cache TTL');
    }
  };
  const onMessage = (channel: string, message: string) => {
    if (channel !== KEY_EVENTS_CHANNEL) return;
    try {
      const wire = JSON.parse(message) as Wire;
      if (wire.from !== instance) emit(wire.event);
    } catch {
      // Not ours to understand; ignore.
    }
  };
  sub.on('ready', onReady);
  sub.on('close', onClose);
  sub.on('message', onMessage);
  await sub.subscribe(KEY_EVENTS_CHANNEL);

  return {
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
    close() {
      sub.off('ready', onReady);
      sub.off('close', onClose);
      sub.off('message', onMessage);
      return Promise.resolve();
    },
  };
}
