/**
 * The live tail of the request log: rows as they are committed, to the consoles watching their account.
 * The instance that wrote a batch hands its rows to its own watchers at once and, with Redis, publishes them
 * on the account's channel, which only instances with a watcher of that account subscribe to; so a request
 * served by one instance shows on a console served by another as soon as its row is written (~the log
 * queue's flush). Pub/sub keeps nothing: a console that reconnects reloads the list for what it missed.
 */
import { randomUUID } from 'node:crypto';
import { SUMMARY_COLUMNS } from '../store/log-query.js';
import type { RequestSummary } from '../store/types.js';
import type { RequestLogRow } from '../types.js';
import type { RedisConnections } from '../redis.js';

export type TailListener = (row: RequestSummary) => void;

export interface TailBus {
  /** Rows just committed to the log. */
  publish(rows: readonly RequestLogRow[]): void;
  /** Calls `listener` with each new row of the account; returns the unsubscribe. */
  subscribe(accountId: string, listener: TailListener): () => void;
  close(): Promise<void>;
}

const CHANNEL_PREFIX = 'keyrelay:log-tail:';

/** A row as a list shows it: no headers or bodies (nor search text) cross the bus. */
function toSummary(row: RequestLogRow): RequestSummary {
  const out: Record<string, unknown> = {};
  for (const c of SUMMARY_COLUMNS) out[c] = row[c] ?? null;
  return out as unknown as RequestSummary;
}

class Watchers {
  private byAccount = new Map<string, Set<TailListener>>();

  add(accountId: string, l: TailListener): boolean {
    let set = this.byAccount.get(accountId);
    const first = !set;
    if (!set) this.byAccount.set(accountId, (set = new Set()));
    set.add(l);
    return first;
  }

  /** True when it was the account's last watcher. */
  remove(accountId: string, l: TailListener): boolean {
    const set = this.byAccount.get(accountId);
    if (!set) return false;
    set.delete(l);
    if (set.size > 0) return false;
    this.byAccount.delete(accountId);
    return true;
  }

  has(accountId: string): boolean {
    return this.byAccount.has(accountId);
  }

  emit(accountId: string, row: RequestSummary): void {
    for (const l of this.byAccount.get(accountId) ?? []) l(row);
  }
}

/** One instance: its own rows to its own watchers. */
export class LocalTailBus implements TailBus {
  private watchers = new Watchers();

  publish(rows: readonly RequestLogRow[]): void {
    for (const r of rows) if (this.watchers.has(r.account_id)) this.watchers.emit(r.account_id, toSummary(r));
  }

  subscribe(accountId: string, listener: TailListener): () => void {
    this.watchers.add(accountId, listener);
    return () => void this.watchers.remove(accountId, listener);
  }

  close(): Promise<void> {
    return Promise.resolve();
  }
}

interface Wire {
  from: string;
  rows: RequestSummary[];
}

/** Many instances: each batch's rows are published per account over Redis (connections owned by redis.ts). */
export function createRedisTailBus(
  redis: RedisConnections,
  log: { warn(obj: object, msg: string): void },
): TailBus {
  const { client, subscriber: sub } = redis;
  const instance = randomUUID();
  const watchers = new Watchers();
  const onMessage = (channel: string, message: string) => {
    if (!channel.startsWith(CHANNEL_PREFIX)) return;
    const accountId = channel.slice(CHANNEL_PREFIX.length);
    try {
      const wire = JSON.parse(message) as Wire;
      if (wire.from === instance) return;
      for (const row of wire.rows) watchers.emit(accountId, row);
    } catch {
      // Not ours to understand; ignore.
    }
  };
  sub.on('message', onMessage);
  const warn = (err: unknown) => log.warn({ err }, 'live tail: redis publish or subscribe failed');

  return {
    publish(rows) {
      const byAccount = new Map<string, RequestSummary[]>();
      for (const r of rows) {
        const list = byAccount.get(r.account_id) ?? [];
        list.push(toSummary(r));
        byAccount.set(r.account_id, list);
      }
      for (const [accountId, list] of byAccount) {
        for (const row of list) watchers.emit(accountId, row);
        // Redis drops a message nobody subscribed to: an account nobody watches costs one small command.
        client
          .publish(CHANNEL_PREFIX + accountId, JSON.stringify({ from: instance, rows: list } satisfies Wire))
          .catch(warn);
      }
    },
    subscribe(accountId, listener) {
      if (watchers.add(accountId, listener)) sub.subscribe(CHANNEL_PREFIX + accountId).catch(warn);
      return () => {
        if (watchers.remove(accountId, listener)) sub.unsubscribe(CHANNEL_PREFIX + accountId).catch(warn);
      };
    },
    close() {
      sub.off('message', onMessage);
      return Promise.resolve();
    },
  };
}
