/**
 * The live tail of the request log: rows as they are committed, to the consoles watching their organization
 * (each console narrows them to what its caller's role may see). The instance that wrote a batch hands its
 * rows to its own watchers at once and, with Redis, publishes them on the organization's channel, which only
 * instances with a watcher of that organization subscribe to; so a request
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
  /** Calls `listener` with each new row of the organization; returns the unsubscribe. */
  subscribe(orgId: string, listener: TailListener): () => void;
  close(): Promise<void>;
}

const CHANNEL_PREFIX = 'keyrelay:log-tail:org:';

/** A row as a list shows it: no headers or bodies (nor search text) cross the bus. */
function toSummary(row: RequestLogRow): RequestSummary {
  const out: Record<string, unknown> = {};
  for (const c of SUMMARY_COLUMNS) out[c] = row[c] ?? null;
  return out as unknown as RequestSummary;
}

class Watchers {
  private byOrg = new Map<string, Set<TailListener>>();

  add(orgId: string, l: TailListener): boolean {
    let set = this.byOrg.get(orgId);
    const first = !set;
    if (!set) this.byOrg.set(orgId, (set = new Set()));
    set.add(l);
    return first;
  }

  /** True when it was the organization's last watcher. */
  remove(orgId: string, l: TailListener): boolean {
    const set = this.byOrg.get(orgId);
    if (!set) return false;
    set.delete(l);
    if (set.size > 0) return false;
    this.byOrg.delete(orgId);
    return true;
  }

  has(orgId: string): boolean {
    return this.byOrg.has(orgId);
  }

  emit(orgId: string, row: RequestSummary): void {
    for (const l of this.byOrg.get(orgId) ?? []) l(row);
  }
}

/** One instance: its own rows to its own watchers. */
export class LocalTailBus implements TailBus {
  private watchers = new Watchers();

  publish(rows: readonly RequestLogRow[]): void {
    for (const r of rows) if (this.watchers.has(r.org_id)) this.watchers.emit(r.org_id, toSummary(r));
  }

  subscribe(orgId: string, listener: TailListener): () => void {
    this.watchers.add(orgId, listener);
    return () => void this.watchers.remove(orgId, listener);
  }

  close(): Promise<void> {
    return Promise.resolve();
  }
}

interface Wire {
  from: string;
  rows: RequestSummary[];
}

/** Many instances: each batch's rows are published per organization over Redis (connections owned by redis.ts). */
export function createRedisTailBus(
  redis: RedisConnections,
  log: { warn(obj: object, msg: string): void },
): TailBus {
  const { client, subscriber: sub } = redis;
  const instance = randomUUID();
  const watchers = new Watchers();
  const onMessage = (channel: string, message: string) => {
    if (!channel.startsWith(CHANNEL_PREFIX)) return;
    const orgId = channel.slice(CHANNEL_PREFIX.length);
    try {
      const wire = JSON.parse(message) as Wire;
      if (wire.from === instance) return;
      for (const row of wire.rows) watchers.emit(orgId, row);
    } catch {
      // Not ours to understand; ignore.
    }
  };
  sub.on('message', onMessage);
  const warn = (err: unknown) => log.warn({ err }, 'live tail: redis publish or subscribe failed');

  return {
    publish(rows) {
      const byOrg = new Map<string, RequestSummary[]>();
      for (const r of rows) {
        const list = byOrg.get(r.org_id) ?? [];
        list.push(toSummary(r));
        byOrg.set(r.org_id, list);
      }
      for (const [orgId, list] of byOrg) {
        for (const row of list) watchers.emit(orgId, row);
        // Redis drops a message nobody subscribed to: an organization nobody watches costs one small command.
        client
          .publish(CHANNEL_PREFIX + orgId, JSON.stringify({ from: instance, rows: list } satisfies Wire))
          .catch(warn);
      }
    },
    subscribe(orgId, listener) {
      if (watchers.add(orgId, listener)) sub.subscribe(CHANNEL_PREFIX + orgId).catch(warn);
      return () => {
        if (watchers.remove(orgId, listener)) sub.unsubscribe(CHANNEL_PREFIX + orgId).catch(warn);
      };
    },
    close() {
      sub.off('message', onMessage);
      return Promise.resolve();
    },
  };
}
