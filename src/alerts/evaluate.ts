/**
 * What a rule sees now: the occasions it fires for, each with the key that makes it one delivery per
 * threshold and period (or window, or day) however many instances see it. Reads the request log's sums
 * (`LogStore.usageBreakdown`), never the proxy's path.
 */
import type {
  AlertRule,
  BudgetParams,
  ErrorRateParams,
  NewCredentialParams,
  SpendSpikeParams,
} from '../store/alert-types.js';
import type { LogStore, RequestFilter } from '../store/types.js';

const DAY_MS = 86_400_000;

export interface Occasion {
  dedupe_key: string;
  /** One line a person reads (Slack's `text`). */
  summary: string;
  data: Record<string, string | number>;
}

interface Totals {
  requests: number;
  errors: number;
  cost_usd: number;
}

/** The rule's calls between two times (ms), optionally those of one credential. */
function scopeOf(rule: AlertRule, from: number, to: number, credential?: string): RequestFilter {
  const scope: RequestFilter = {
    org_id: rule.org_id,
    from: new Date(from).toISOString(),
    to: new Date(to).toISOString(),
  };
  if (rule.scope === 'member' && rule.scope_id) scope.account_id = rule.scope_id;
  if (rule.scope === 'key' && rule.scope_id) scope.key_id = rule.scope_id;
  if (credential !== undefined) scope.credential_fingerprint = credential;
  return scope;
}

async function totals(
  log: LogStore,
  rule: AlertRule,
  from: number,
  to: number,
  credential?: string,
): Promise<Totals> {
  const t: Totals = { requests: 0, errors: 0, cost_usd: 0 };
  for (const g of await log.usageBreakdown(scopeOf(rule, from, to, credential), 'provider')) {
    t.requests += g.requests;
    t.errors += g.errors;
    t.cost_usd += g.cost_usd;
  }
  return t;
}

const usd = (v: number) => `$${v.toFixed(2)}`;

function whose(rule: AlertRule): string {
  if (rule.scope === 'key') return `key ${rule.scope_id}`;
  if (rule.scope === 'member') return `member ${rule.scope_id}`;
  return 'the organization';
}

/** UTC calendar day or month containing `now`. */
function periodStart(period: BudgetParams['period'], now: number): number {
  const d = new Date(now);
  return period === 'day'
    ? Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate())
    : Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), 1);
}

async function budget(log: LogStore, rule: AlertRule, p: BudgetParams, now: number): Promise<Occasion[]> {
  const start = periodStart(p.period, now);
  const { cost_usd: spent } = await totals(log, rule, start, now + 1);
  const period = new Date(start).toISOString();
  return p.thresholds
    .filter((t) => spent >= (p.budget_usd * t) / 100)
    .map((t) => ({
      dedupe_key: `budget:${period}:${t}`,
      summary: `${rule.name}: ${whose(rule)} spent ${usd(spent)}, ${t}% of its ${usd(p.budget_usd)} ${p.period === 'day' ? 'daily' : 'monthly'} budget`,
      data: {
        threshold_percent: t,
        spent_usd: spent,
        budget_usd: p.budget_usd,
        period: p.period,
        period_start: period,
      },
    }));
}

async function errorRate(
  log: LogStore,
  rule: AlertRule,
  p: ErrorRateParams,
  now: number,
): Promise<Occasion[]> {
  const windowMs = p.window_minutes * 60_000;
  const t = await totals(log, rule, now - windowMs, now + 1);
  if (t.requests < p.min_requests) return [];
  const rate = (100 * t.errors) / t.requests;
  if (rate < p.threshold_percent) return [];
  // At most one delivery per window length: the window's slot on the clock names the occasion.
  const slot = new Date(Math.floor(now / windowMs) * windowMs).toISOString();
  return [
    {
      dedupe_key: `error_rate:${slot}`,
      summary: `${rule.name}: ${rate.toFixed(1)}% of ${t.requests} calls by ${whose(rule)} failed in the last ${p.window_minutes} min (threshold ${p.threshold_percent}%)`,
      data: {
        error_rate_percent: rate,
        errors: t.errors,
        requests: t.requests,
        window_minutes: p.window_minutes,
      },
    },
  ];
}

async function spendSpike(
  log: LogStore,
  rule: AlertRule,
  p: SpendSpikeParams,
  now: number,
): Promise<Occasion[]> {
  const today = periodStart('day', now);
  const { cost_usd: spent } = await totals(log, rule, today, now + 1);
  if (spent < p.min_usd) return [];
  const before = await totals(log, rule, today - p.baseline_days * DAY_MS, today);
  const mean = before.cost_usd / p.baseline_days;
  // No history is no baseline: a new organization's first day is not a spike.
  if (mean <= 0 || spent < p.factor * mean) return [];
  const day = new Date(today).toISOString();
  return [
    {
      dedupe_key: `spend_spike:${day}`,
      summary: `${rule.name}: ${whose(rule)} spent ${usd(spent)} today, ${(spent / mean).toFixed(1)}× its daily mean of ${usd(mean)} over the ${p.baseline_days} days before`,
      data: {
        spent_usd: spent,
        baseline_mean_usd: mean,
        baseline_days: p.baseline_days,
        factor: p.factor,
        day,
      },
    },
  ];
}

/** How far back each evaluation looks for credentials: a job stopped for less than this misses none. */
const NEW_CREDENTIAL_LOOKBACK_MS = 7 * DAY_MS;

/**
 * Credentials found known, per rule, so each is looked up in the log once. A new one is looked up every
 * tick while it is in the lookback (its delivery's claim makes it one delivery however often, on however
 * many instances), so a claim that failed is tried again.
 */
const known = new Map<string, Set<string>>();

async function newCredential(
  log: LogStore,
  rule: AlertRule,
  p: NewCredentialParams,
  now: number,
): Promise<Occasion[]> {
  const created = Date.parse(rule.created_at);
  const seen = known.get(rule.id) ?? new Set<string>();
  known.set(rule.id, seen);
  const recent = await log.usageBreakdown(
    scopeOf(rule, Math.max(created, now - NEW_CREDENTIAL_LOOKBACK_MS), now + 1),
    'credential_fingerprint',
  );
  const occasions: Occasion[] = [];
  for (const { group: fingerprint, requests } of recent) {
    if (fingerprint === '' || seen.has(fingerprint)) continue;
    const before = await totals(log, rule, created - p.known_days * DAY_MS, created, fingerprint);
    if (before.requests > 0) {
      seen.add(fingerprint);
      continue;
    }
    occasions.push({
      dedupe_key: `new_credential:${fingerprint}`,
      summary: `${rule.name}: ${whose(rule)} made calls with a provider credential not used there before (fingerprint ${fingerprint.slice(0, 12)}…)`,
      data: { credential_fingerprint: fingerprint, requests, known_days: p.known_days },
    });
  }
  return occasions;
}

export function evaluateRule(log: LogStore, rule: AlertRule, now: number): Promise<Occasion[]> {
  switch (rule.kind) {
    case 'budget':
      return budget(log, rule, rule.params as BudgetParams, now);
    case 'error_rate':
      return errorRate(log, rule, rule.params as ErrorRateParams, now);
    case 'spend_spike':
      return spendSpike(log, rule, rule.params as SpendSpikeParams, now);
    case 'new_credential':
      return newCredential(log, rule, rule.params as NewCredentialParams, now);
  }
}
