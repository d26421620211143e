/**
 * Sends one delivery: the signed body, retried with backoff on what may pass (no answer, 5xx, 408, 429),
 * each attempt recorded on the delivery's row (the console's delivery log). Redirects are never followed:
 * a 3xx is an error to fix in the rule (the target was checked, the place it redirects to was not). Each
 * attempt connects through its own Agent pinned to the addresses its check resolved (target.ts).
 */
import { createHmac } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { Agent, request } from 'undici';
import type { AlertDelivery } from '../store/alert-types.js';
import type { ConfigStore } from '../store/types.js';
import { checkTarget, pinnedLookup, type CheckedTarget, type TargetPolicy } from './target.js';

/** `v1=` + hex HMAC-SHA256 of `<timestamp>.<body>` with the rule's secret (docs/alerts.md). */
export function signAlert(secret: string, timestamp: number, body: string): string {
  return `v1=${createHmac('sha256', secret).update(`${timestamp}.${body}`).digest('hex')}`;
}

export interface DeliveryOptions {
  /** Waits before each retry; its length is the number of retries. */
  retryDelaysMs: readonly number[];
  /** One attempt's limit, connect to the end of the answer. */
  timeoutMs: number;
  /** LEASE_MARGIN_MS unless a test shortens it. */
  leaseMarginMs?: number;
  policy: () => Promise<TargetPolicy>;
}

type Attempt =
  { ok: true; status: number } | { ok: false; retry: boolean; status: number | null; error: string };

async function attempt(
  d: AlertDelivery,
  target: { url: string; secret: string },
  opts: DeliveryOptions,
): Promise<Attempt> {
  let checked: CheckedTarget;
  try {
    checked = await checkTarget(target.url, await opts.policy());
  } catch (err) {
    return { ok: false, retry: false, status: null, error: err instanceof Error ? err.message : String(err) };
  }
  // One connection, to the checked addresses: alerts are rare, so nothing is lost by not keeping it.
  const dispatcher = new Agent({ connections: 1, connect: { lookup: pinnedLookup(checked.addresses) } });
  try {
    return await send(d, target, checked.url, dispatcher, opts.timeoutMs);
  } finally {
    await dispatcher.destroy();
  }
}

async function send(
  d: AlertDelivery,
  target: { secret: string },
  url: URL,
  dispatcher: Agent,
  timeoutMs: number,
): Promise<Attempt> {
  const timestamp = Math.floor(Date.now() / 1000);
  try {
    const res = await request(url, {
      method: 'POST',
      dispatcher,
      headers: {
        'content-type': 'application/json',
        'user-agent': 'keyrelay-alerts',
        'x-keyrelay-delivery': d.id,
        'x-keyrelay-timestamp': String(timestamp),
        'x-keyrelay-signature': signAlert(target.secret, timestamp, d.payload),
      },
      body: d.payload,
      signal: AbortSignal.timeout(timeoutMs),
    });
    await res.body.dump({ limit: 64 * 1024 });
    const status = res.statusCode;
    if (status >= 200 && status < 300) return { ok: true, status };
    if (status >= 300 && status < 400) {
      const where = typeof res.headers.location === 'string' ? ` to ${res.headers.location}` : '';
      return {
        ok: false,
        retry: false,
        status,
        error: `answered ${status}, a redirect${where}: redirects are not followed; give the rule the final URL`,
      };
    }
    return {
      ok: false,
      retry: status >= 500 || status === 408 || status === 429,
      status,
      error: `answered ${status}`,
    };
  } catch (err) {
    const timedOut = err instanceof Error && (err.name === 'TimeoutError' || err.name === 'AbortError');
    const why = timedOut
      ? `no answer within ${timeoutMs} ms`
      : `could not connect: ${err instanceof Error ? err.message : String(err)}`;
    return { ok: false, retry: true, status: null, error: why };
  }
}

/**
 * How long past an attempt's due time its sender still holds the delivery: the attempt's own limit is added
 * to this. It covers the resolver, the config store's write and clocks of instances a few seconds apart.
 */
export const LEASE_MARGIN_MS = 30_000;

/** Until when the sender of an attempt due `inMs` from now holds its delivery. */
export function leaseUntil(inMs: number, opts: Pick<DeliveryOptions, 'timeoutMs' | 'leaseMarginMs'>): string {
  return new Date(Date.now() + inMs + opts.timeoutMs + (opts.leaseMarginMs ?? LEASE_MARGIN_MS)).toISOString();
}

/**
 * Runs the attempts of a claimed delivery that are left (after its `attempts`); resolves when it is
 * delivered or given up. Between attempts the lease is renewed to cover the wait and the next attempt.
 */
export async function deliverAlert(
  store: Pick<ConfigStore, 'updateAlertDelivery'>,
  d: AlertDelivery,
  target: { url: string; secret: string },
  opts: DeliveryOptions,
  stopped: AbortSignal,
): Promise<void> {
  for (let n = d.attempts + 1; ; n++) {
    const a = await attempt(d, target, opts);
    const last = a.ok || !a.retry || n > opts.retryDelaysMs.length || stopped.aborted;
    await store.updateAlertDelivery(d.id, {
      state: a.ok ? 'delivered' : last ? 'failed' : 'pending',
      attempts: n,
      response_status: a.status,
      error: a.ok ? null : last && a.retry ? `${a.error} (gave up after ${n} attempts)` : a.error,
      updated_at: new Date().toISOString(),
      lease_until: last ? null : leaseUntil(opts.retryDelaysMs[n - 1]!, opts),
    });
    if (last) return;
    // Stopping ends the wait: the next attempt is then the last.
    await sleep(opts.retryDelaysMs[n - 1], undefined, { signal: stopped, ref: false }).catch(() => {});
  }
}
