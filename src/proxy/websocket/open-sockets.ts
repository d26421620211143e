/**
 * The sockets this instance relays, counted from the upgrade on (a handshake in progress already holds its
 * upstream connection): each holds two descriptors, so at most `max` of them in all, leaving descriptors for
 * plain requests and the stores, and at most a key's `max_concurrent` for one key. Open sockets are kept
 * per key, for key events (a revoked key closes its sockets) and for shutdown.
 */
import { ProxyError } from '../../errors.js';
import type { KeyRecord } from '../../store/types.js';
import type { OpenSocket } from './session.js';

/** Descriptors never given to sockets: plain requests (a caller and an upstream each), stores, Redis, logs. */
const RESERVED_SHARE = 0.25;
const MIN_RESERVED = 64;
/** Where the descriptor limit cannot be read (not Linux): a cap no smaller than Node's usual 10,000 connections allow. */
const DEFAULT_MAX_SOCKETS = 5_000;

/** The instance's socket cap for a descriptor limit `fds`: half of what the reserve leaves. */
export function maxSockets(fds: number | null): number {
  if (fds === null) return DEFAULT_MAX_SOCKETS;
  const reserved = Math.max(MIN_RESERVED, Math.floor(fds * RESERVED_SHARE));
  return Math.max(1, Math.floor((fds - reserved) / 2));
}

export class OpenSockets {
  private counted = 0;
  private readonly perKey = new Map<string, number>();
  private readonly byKey = new Map<string, Set<OpenSocket>>();
  /** Each relayed socket's end: resolved once its rows are handed to the log. */
  readonly ended = new Set<Promise<void>>();

  constructor(readonly max: number) {}

  /** Counts a socket for `key` from now on (give it back with `release`), or the refusal at either cap. */
  take(key: KeyRecord): ProxyError | null {
    if (this.counted >= this.max)
      return new ProxyError('proxy_unavailable', 'Too many WebSockets open on this instance.', 5);
    const mine = this.perKey.get(key.id) ?? 0;
    if (key.max_concurrent != null && mine >= key.max_concurrent)
      return new ProxyError(
        'proxy_rate_limited',
        `${key.max_concurrent} WebSockets open for this key (its max_concurrent).`,
        1,
      );
    this.counted++;
    this.perKey.set(key.id, mine + 1);
    return null;
  }

  release(keyId: string): void {
    this.counted--;
    const left = (this.perKey.get(keyId) ?? 1) - 1;
    if (left === 0) this.perKey.delete(keyId);
    else this.perKey.set(keyId, left);
  }

  /** A counted socket, relayed from now until it ends (then released). */
  add(s: OpenSocket): void {
    let set = this.byKey.get(s.keyId);
    if (!set) this.byKey.set(s.keyId, (set = new Set()));
    set.add(s);
    this.ended.add(s.ended);
    void s.ended.finally(() => {
      this.ended.delete(s.ended);
      set.delete(s);
      if (set.size === 0 && this.byKey.get(s.keyId) === set) this.byKey.delete(s.keyId);
      this.release(s.keyId);
    });
  }

  /** The open sockets of one key, or of every key. */
  of(keyId: string | null): OpenSocket[] {
    if (keyId === null) return [...this.byKey.values()].flatMap((set) => [...set]);
    return [...(this.byKey.get(keyId) ?? [])];
  }
}
