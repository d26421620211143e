/**
 * Alerts (docs/alerts.md): a periodic job on every instance reads each enabled rule's sums from the request
 * log, claims each occasion in the config store (one instance wins it: the claim is a unique row), and the
 * winner sends the signed webhook with retries. Nothing here runs on a proxied request's time.
 */
import { newId } from '../ids.js';
import type { AlertRule } from '../store/alert-types.js';
import type { ConfigStore, LogStore } from '../store/types.js';
import { deliverAlert } from './deliver.js';
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
}

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
          if (!(await configStore.claimAlertDelivery(d))) continue;
          const full = {
            ...d,
            state: 'pending' as const,
            attempts: 0,
            response_status: null,
            error: null,
            updated_at: d.created_at,
          };
          const sent = deliverAlert(configStore, full, rule, { ...tuning, policy }, stopping.signal)
            .catch((err: unknown) => log.warn({ err, rule: rule.id }, 'alert delivery could not be recorded'))
            .finally(() => deliveries.delete(sent));
          deliveries.add(sent);
        }
      } catch (err) {
        log.warn({ err, rule: rule.id }, 'alert rule could not be evaluated');
      }
    }
  };

  const runOnce = (): Promise<void> => {
    round ??= evaluate()
      .catch((err: unknown) => log.warn({ err }, 'alert rules could not be read'))
      .finally(() => (round = null));
    return round;
  };
  const timer = setInterval(() => void runOnce(), tuning.intervalMs);
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
