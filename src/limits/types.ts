/** What the proxy sees of per-key limits: admission, the hold a request keeps, settling (limiter.ts). */
import type { ProxyError } from '../errors.js';
import type { Provider, RequestLogRow } from '../types.js';
import type { KeyRateStatus, KeyRecord } from '../store/types.js';
import type { RequestInfo } from '../metering/index.js';
import type { Lease } from './shared/leases.js';
import type { SpendState } from './local/spend.js';

/** What an admitted request holds until it is settled. */
export interface Hold {
  readonly id: string;
  readonly keyId: string;
  /** Tokens counted against the tokens-per-minute limit at admission, and the window they went into. */
  tokens: number;
  window: number;
  tpm: boolean;
  /** Hard budget: nanodollars reserved, and the period they were reserved in. */
  nanos: number;
  spend: SpendState | null;
  /** Holds an in-flight slot (in this instance's count, or in Redis when shared). */
  slot: boolean;
  /** Taken in Redis (reservation and slot): released there by settle. */
  shared: boolean;
  /**
   * Reserved from this instance's lease of a shared hard budget (leases.ts): `leased` nanodollars of
   * `nanos` (all of them, or the lease's rest with the remainder reserved in Redis on its own).
   */
  lease: Lease | null;
  leased: number;
  settled: boolean;
  /** The end user's hold under the key's caps per end user (end-users.ts), settled with this one. */
  user: Hold | null;
  /** The member's hold under their limits across their keys (members.ts), settled with this one. */
  member: Hold | null;
}

/** A refusal, a hold to settle when the request ends, or null (nothing held). */
export type Admission = ProxyError | Hold | null;

export interface Limits {
  /** The refusal for this request, or null to let it through (and count it against the rate limit). */
  check(key: KeyRecord, provider: Provider, model: string | null, method?: string): ProxyError | null;
  /**
   * Admission of a request whose body is parsed: every limit, and the holds it takes. Synchronous unless
   * a hold must go through Redis or wait for the key's spend to load.
   */
  admit(
    key: KeyRecord,
    provider: Provider,
    info: RequestInfo,
    method: string,
    /** Who the request is for (`proxy-user`, or the body's field): the key's caps per end user apply. */
    endUser?: string | null,
  ): Admission | Promise<Admission>;
  /**
   * A request's end, any ending: releases its hold (null: none) and counts its row's cost and tokens. A
   * null row releases the hold at no cost (a request that never went upstream and has no row).
   */
  settle(hold: Hold | null, row: RequestLogRow | null): void;
  /** A finished request's log row without a hold: its cost counts against the key's budget. */
  record(row: RequestLogRow): void;
  /** How much of the key's rpm and tpm limits is in use now (the console's Keys page); null without either. */
  rateStatus(key: KeyRecord): Promise<KeyRateStatus | null>;
}
