/**
 * Key verification for the proxy's hot path. An in-memory cache keyed by the presented key, so the steady
 * state does no database read and no hashing; on a miss, format and checksum first (no lookup for
 * garbage), then a read by SHA-256. Entries live for the TTL;
 * key events (local or via Redis) evict them at once. Negative answers are cached briefly so a flood of
 * well-formed unknown keys does not become a flood of queries.
 */
import { ProxyError } from '../errors.js';
import type { ConfigStore, KeyRecord } from '../store/types.js';
import type { KeyEvent, KeyEventBus } from './events.js';
import { hashKey, isWellFormedKey } from './format.js';

/**
 * A key check's answer. A refusal still carries the key when it is known (revoked, expired, or the store
 * answered nothing new), so the refused request can be logged against it.
 */
export type KeyCheck = { ok: true; key: KeyRecord } | { ok: false; key: KeyRecord | null; error: ProxyError };

interface Entry {
  key: KeyRecord | null;
  fetchedAt: number;
  /** The presented key's SHA-256: what key events name. */
  hash: string;
}

/**
 * How long a verified key is trusted without the store. Revocation reaches every instance at once through
 * Redis or the change feed; this only bounds what a lost event could cost, while sparing the store a read
 * per request.
 */
export const KEY_CACHE_TTL_MS = 30_000;
const NEGATIVE_TTL_MS = 5_000;
const MAX_ENTRIES = 100_000;
const LOOKUP_TIMEOUT_MS = 5_000;

export class KeyVerifier {
  /** By the presented key: a hit costs neither the checksum nor the SHA-256 (~12 µs a request). */
  private cache = new Map<string, Entry>();
  /** Hash → presented key, so an event naming a hash evicts its entry at once. */
  private presentedByHash = new Map<string, string>();
  private inflight = new Map<string, Promise<KeyRecord | null>>();
  /** Bumped by every key event; a read started in an older generation is not cached. */
  private generation = 0;

  constructor(
    private store: Pick<ConfigStore, 'getKeyByHash'>,
    private ttlMs: number,
    bus?: KeyEventBus,
    private now: () => number = Date.now,
    /** Told whether each key read reached the store (feeds keyrelay_store_up{store="config"}). */
    private onStoreHealth: (ok: boolean) => void = () => {},
  ) {
    bus?.subscribe((e) => this.onEvent(e));
  }

  /** Whether the presented key may be used, and its record when it is known. */
  async check(presented: string | undefined): Promise<KeyCheck> {
    if (presented === undefined || presented === '')
      return { ok: false, key: null, error: new ProxyError('proxy_key_missing') };
    const now = this.now();
    // Only well-formed keys are ever cached: a hit needs no format check.
    const hit = this.cache.get(presented);
    let key: KeyRecord | null;
    if (hit && now - hit.fetchedAt < (hit.key ? this.ttlMs : Math.min(this.ttlMs, NEGATIVE_TTL_MS))) {
      key = hit.key;
    } else {
      if (!isWellFormedKey(presented))
        return { ok: false, key: null, error: new ProxyError('proxy_key_invalid') };
      try {
        key = await this.lookup(presented, hashKey(presented));
      } catch (err) {
        const error = err instanceof ProxyError ? err : new ProxyError('proxy_unavailable');
        return { ok: false, key: null, error };
      }
    }
    if (!key) return { ok: false, key: null, error: new ProxyError('proxy_key_invalid') };
    if (key.revoked_at) return { ok: false, key, error: new ProxyError('proxy_key_revoked') };
    if (key.expires_at && Date.parse(key.expires_at) <= now)
      return { ok: false, key, error: new ProxyError('proxy_key_expired') };
    return { ok: true, key };
  }

  /** A silent database (partition) answers this request with a 503 instead of holding it for the pool's timeout. */
  private lookup(presented: string, hash: string): Promise<KeyRecord | null> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new ProxyError('proxy_unavailable', 'Key store unreachable.', 5)),
        LOOKUP_TIMEOUT_MS,
      );
      void this.load(presented, hash)
        .then(resolve, reject)
        .finally(() => clearTimeout(timer));
    });
  }

  private load(presented: string, hash: string): Promise<KeyRecord | null> {
    const pending = this.inflight.get(hash);
    if (pending) return pending;
    const generation = this.generation;
    const p = this.store
      .getKeyByHash(hash)
      .then((key) => {
        this.onStoreHealth(true);
        // A key event that arrived while this read was running may describe a change the read missed:
        // answer this caller, but do not keep the record for the TTL.
        if (generation !== this.generation) return key;
        if (this.cache.size >= MAX_ENTRIES) {
          this.cache.clear();
          this.presentedByHash.clear();
        }
        this.cache.set(presented, { key, fetchedAt: this.now(), hash });
        this.presentedByHash.set(hash, presented);
        return key;
      })
      .catch((err: unknown) => {
        this.onStoreHealth(false);
        throw new ProxyError('proxy_unavailable', 'Key store unreachable.', 5, { cause: err });
      })
      .finally(() => {
        if (this.inflight.get(hash) === p) this.inflight.delete(hash);
      });
    this.inflight.set(hash, p);
    return p;
  }

  onEvent(e: KeyEvent): void {
    this.generation++;
    // Reads already running must not be joined by later checks: they may predate the change.
    this.inflight.clear();
    if (e.type === 'flush_all') {
      this.cache.clear();
      this.presentedByHash.clear();
      return;
    }
    if (e.hash) {
      const presented = this.presentedByHash.get(e.hash);
      if (presented !== undefined) this.evict(presented, e.hash);
      return;
    }
    for (const [presented, entry] of this.cache)
      if (entry.key?.id === e.key_id) this.evict(presented, entry.hash);
  }

  private evict(presented: string, hash: string): void {
    this.cache.delete(presented);
    this.presentedByHash.delete(hash);
  }

  get size(): number {
    return this.cache.size;
  }
}
