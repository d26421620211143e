/**
 * Alerts (docs/alerts.md): a periodic job on every instance reads each enabled rule's sums from the request
 * log, claims each occasion in the config store (one instance wins it: the claim is a unique row), and the
 * winner sends the signed webhook with retries, holding the row on a lease it renews between attempts. An
 * instance that stops mid-retry leaves its lease to run out; on start and each round, every instance takes
 * over the deliveries whose lease ran out (one wins each: a conditional update) and sends what is left.
 * Nothing here runs on a proxied request's time.
 */
import { newId } from '../ids.js';
import type { AlertDelivery, AlertRule } from '../store/alert-types.js';
import type { ConfigStore, LogStore } from '../store/types.js';
import { deliverAlert, leaseUntil } from './deliver.js';
import { evaluateRule, type Occasion } from './evaluate.js';
import { privateTargetsAllowed, type HostLookup, type TargetPolicy } from './target.js';

export { ALLOW_PRIVATE_SETTING, checkTarget, privateTargetsAllowed } from './target.js';
export { signAlert } from './deliver.js';
export { newAlertRule, parseAlertRuleInput, type AlertRuleInput } from './rules.js';

export interface AlertTuning {
  /** How often each instance evaluates every rule. */
  intervalMs: number;
  retryDelaysMs: readonly number[];
  timeoutMs: number;
  /** How webhook names are resolved: the system's resolver unless a test gives its own. */
  lookup?: HostLookup;
  /** deliver.ts's LEASE_MARGIN_MS unless a test shortens it. */
  leaseMarginMs?: number;
}

/**
 * A delivery found interrupted later than this after it was made is failed, not sent: what it describes
 * (a spend, an error rate) has likely moved on, and its log row says why it never arrived.
 */
const STALE_AFTER_MS = 3_600_000;

/** Interrupted deliveries taken over per round: the rest wait for the next round. */
const TAKE_OVER_BATCH = 50;

/**
 * Every 30 s: a budget or error alert within a minute of the crossing, for one grouped query per rule.
 * Retries over about 2.5 minutes cover a receiver's restart; 10 s per attempt is what webhook senders allow.
 */
export const ALERT_DEFAULTS: AlertTuning = {
  intervalMs: 30_000,
  retryDelaysMs: [1_000, 5_000, 30_000, 120_000],
  timeoutMs: 10_000,
};

type Log = { warn(obj: object, msg: string): void };

export interface AlertJob {
  /** One evaluation round now (tests; the timer calls it too). */
  runOnce(): Promise<void>;
  /** Stops the timer and waits for deliveries under way (their retries give up). */
  stop(): Promise<void>;
}

function payloadOf(rule: AlertRule, o: Occasion, deliveryId: string, now: Date): string {
  if (rule.format === 'slack') return JSON.stringify({ text: `:rotating_light: ${o.summary}` });
  return JSON.stringify({
    type: 'keyrelay.alert',
    id: deliveryId,
    kind: rule.kind,
    occasion: o.dedupe_key,
    fired_at: now.toISOString(),
    org_id: rule.org_id,
    rule: { id: rule.id, name: rule.name, scope: rule.scope, scope_id: rule.scope_id },
    summary: o.summary,
    data: o.data,
  });
}

export function startAlerts(
  stores: { configStore: ConfigStore; logStore: LogStore },
  self: () => { publicUrl: string; port: number },
  tuning: AlertTuning,
  log: Log,
): AlertJob {
  const { configStore, logStore } = stores;
  const deliveries = new Set<Promise<void>>();
  let stopped = false;
  const stopping = new AbortController();
  let round: Promise<void> | null = null;
  const policy = async (): Promise<TargetPolicy> => ({
    allowPrivate: await privateTargetsAllowed(configStore),
    lookup: tuning.lookup,
    ...self(),
  });

  const send = (d: AlertDelivery, rule: AlertRule): void => {
    const sent = deliverAlert(configStore, d, rule, { ...tuning, policy }, stopping.signal)
      .catch((err: unknown) => log.warn({ err, rule: rule.id }, 'alert delivery could not be recorded'))
      .finally(() => deliveries.delete(sent));
    deliveries.add(sent);
  };

  const giveUp = (d: AlertDelivery, error: string) =>
    configStore.updateAlertDelivery(d.id, {
      state: 'failed',
      attempts: d.attempts,
      response_status: d.response_status,
      error,
      updated_at: new Date().toISOString(),
      lease_until: null,
    });

  /** Sends what is left of the deliveries whose sender stopped before settling them. */
  const takeOver = async (): Promise<void> => {
    const now = Date.now();
    const taken = await configStore.takeOverAlertDeliveries(
      new Date(now).toISOString(),
      leaseUntil(0, tuning),
      TAKE_OVER_BATCH,
    );
    const rulesOf = new Map<string, AlertRule[]>();
    for (const d of taken) {
      // Stopping: the lease runs out and another instance takes the delivery.
      if (stopped) return;
      try {
        const age = now - Date.parse(d.created_at);
        if (age > STALE_AFTER_MS) {
          await giveUp(
            d,
            `not sent: the instance sending it stopped, and it was taken over ${Math.round(age / 60_000)} min after it fired, too late to matter`,
          );
          continue;
        }
        const rules = rulesOf.get(d.org_id) ?? (await configStore.listAlertRules(d.org_id));
        rulesOf.set(d.org_id, rules);
        const rule = rules.find((r) => r.id === d.rule_id);
        // A deleted rule's deliveries go with it; a disabled one's are not sent.
        if (!rule) continue;
        if (!rule.enabled) await giveUp(d, 'not sent: its rule was disabled before it was delivered');
        else send(d, rule);
      } catch (err) {
        log.warn({ err, delivery: d.id }, 'interrupted alert delivery could not be taken over');
      }
    }
  };

  const evaluate = async (): Promise<void> => {
    const rules = await configStore.listEnabledAlertRules();
    for (const rule of rules) {
      if (stopped) return;
      try {
        const now = new Date();
        for (const o of await evaluateRule(logStore, rule, now.getTime())) {
          const id = newId();
          const d = {
            id,
            rule_id: rule.id,
            org_id: rule.org_id,
            dedupe_key: o.dedupe_key,
            payload: payloadOf(rule, o, id, now),
            created_at: now.toISOString(),
          };
          if (!(await configStore.claimAlertDelivery({ ...d, lease_until: leaseUntil(0, tuning) }))) continue;
          send(
            {
              ...d,
              state: 'pending' as const,
              attempts: 0,
              response_status: null,
              error: null,
              updated_at: d.created_at,
            },
            rule,
          );
        }
      } catch (err) {
        log.warn({ err, rule: rule.id }, 'alert rule could not be evaluated');
      }
    }
  };

  const schedule = (work: () => Promise<void>): Promise<void> => {
    round ??= work()
      .catch((err: unknown) => log.warn({ err }, 'alert rules or deliveries could not be read'))
      .finally(() => (round = null));
    return round;
  };
  const full = async () => {
    await takeOver();
    await evaluate();
  };
  const runOnce = async (): Promise<void> => {
    // A round under way may be the start's take-over alone: this call's round evaluates too.
    if (round) await round;
    return schedule(full);
  };
  void schedule(takeOver);
  const timer = setInterval(() => void schedule(full), tuning.intervalMs);
  timer.unref();

  return {
    runOnce,
    async stop() {
      stopped = true;
      stopping.abort();
      clearInterval(timer);
      await round;
      await Promise.allSettled([...deliveries]);
    },
  };
}
