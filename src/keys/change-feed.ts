/**
 * The database-backed key change feed: every instance polls the config store's key_changes table (filled by
 * triggers on every key change, whoever made it: this instance, another one, the CLI, an operator's SQL)
 * and evicts the changed keys from its own cache. It is what makes a revocation reach every instance within
 * about a second without Redis, and what bounds a lost Redis message to one poll instead of the cache TTL.
 * Evictions go straight to this instance's listeners, never back onto Redis: every instance reads the feed.
 */
import type { ConfigStore } from '../store/types.js';
import type { KeyEvent } from './events.js';

export const KEY_CHANGE_POLL_MS = 500;
/** More changed keys than this in one poll flush the cache instead: each eviction by id scans it. */
const MAX_EVICTIONS_PER_POLL = 32;
/**
 * The store keeps a day of changes; after a silence this long (a suspended process, a long outage) the
 * rows we missed may be pruned, so forget everything rather than trust the cursor.
 */
const MAX_SILENCE_MS = 3_600_000;
/** How long stop() waits for a poll in flight (a silent database must not hold the shutdown). */
const STOP_WAIT_MS = 1_000;

export interface KeyChangeFeedOptions {
  store: Pick<ConfigStore, 'keyChangeHead' | 'keyChangesSince'>;
  /** This instance's eviction (KeyVerifier.onEvent). */
  evict: (e: KeyEvent) => void;
  log: { warn(obj: object, msg: string): void; info(obj: object, msg: string): void };
  intervalMs?: number;
  now?: () => number;
}

export interface KeyChangeFeed {
  /** Stops polling; resolves once a poll in flight has ended (or after a short wait). */
  stop(): Promise<void>;
}

/** Reads the feed's head, then polls it until stopped. Never rejects: a store error is logged and retried. */
export async function startKeyChangeFeed(opts: KeyChangeFeedOptions): Promise<KeyChangeFeed> {
  const { store, evict, log, intervalMs = KEY_CHANGE_POLL_MS, now = Date.now } = opts;
  /** Null until the head is known; keys cached before then may predate changes we will never see. */
  let cursor: number | null = null;
  let lastOk = now();
  let downSince: number | null = null;
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let polling: Promise<void> = Promise.resolve();

  const emit = (e: KeyEvent) => {
    try {
      evict(e);
    } catch (err) {
      log.warn({ err }, 'key cache eviction failed');
    }
  };

  async function readChanges(): Promise<void> {
    if (cursor === null) {
      cursor = await store.keyChangeHead();
      // Only after a failed start: whatever got cached meanwhile is of unknown age.
      if (downSince !== null) emit({ type: 'flush_all' });
      return;
    }
    const changed = new Set<string>();
    for (;;) {
      const page = await store.keyChangesSince(cursor);
      if (page.seq === cursor) break;
      for (const id of page.keyIds) changed.add(id);
      cursor = page.seq;
    }
    if (now() - lastOk > MAX_SILENCE_MS || changed.size > MAX_EVICTIONS_PER_POLL) emit({ type: 'flush_all' });
    else for (const key_id of changed) emit({ type: 'key_changed', key_id });
  }

  async function poll(): Promise<void> {
    try {
      await readChanges();
      if (downSince !== null) {
        log.info({ downMs: now() - downSince }, 'key change feed readable again');
        downSince = null;
      }
      lastOk = now();
    } catch (err) {
      if (downSince === null) {
        downSince = now();
        log.warn({ err }, 'key change feed unreadable; key changes made elsewhere wait for the cache TTL');
      }
    }
  }

  const schedule = () => {
    if (stopped) return;
    // A chain of timeouts, not an interval: a slow poll is never overlapped by the next.
    timer = setTimeout(() => {
      polling = poll().finally(schedule);
    }, intervalMs);
    timer.unref();
  };

  polling = poll();
  await polling;
  schedule();

  return {
    async stop() {
      stopped = true;
      clearTimeout(timer);
      let wait: NodeJS.Timeout | undefined;
      await Promise.race([polling, new Promise((r) => (wait = setTimeout(r, STOP_WAIT_MS)))]);
      clearTimeout(wait);
    },
  };
}
