/**
 * Reconciliation: keyrelay's logged cost for one UTC day beside each provider's own cost report
 * (`keyrelay reconcile`, the console's Reconcile page, GET /api/console/reconcile). Read on demand, off the
 * request path: the admin APIs are called only when someone asks, each within bounds (cost-report.ts).
 * Rows come from every account: the admin key reads the provider organization's whole bill.
 */
import type { Config } from '../config.js';
import type { LogStore } from '../store/types.js';
import { BILLING_PROVIDERS, type BillingProvider } from './admin-keys.js';
import { compareDay, type ProviderReconciliation } from './compare.js';
import { CostReportError, DEFAULT_FETCH_BOUNDS, fetchCostReport } from './cost-report.js';

export {
  ADMIN_KEY_VARIABLES,
  BILLING_PROVIDERS,
  type AdminKeys,
  type BillingProvider,
} from './admin-keys.js';
export { AGREE_USD, type ModelDrift, type ProviderReconciliation } from './compare.js';

export interface Reconciliation {
  day: string;
  /** False while the day is recent: the providers' reports keep filling in for a day or so. */
  final: boolean;
  /** The providers with an admin key configured, each compared; the others are listed as not configured. */
  providers: ProviderReconciliation[];
  not_configured: BillingProvider[];
}

const DAY = /^\d{4}-\d{2}-\d{2}$/;
const DAY_MS = 86_400_000;

/** A day as YYYY-MM-DD (UTC) that has begun, else null. */
export function parseDay(value: string, now = new Date()): string | null {
  if (!DAY.test(value)) return null;
  const at = Date.parse(`${value}T00:00:00.000Z`);
  if (Number.isNaN(at) || new Date(at).toISOString().slice(0, 10) !== value || at > now.getTime())
    return null;
  return value;
}

/** Yesterday (UTC): the most recent day whose bill is mostly in. */
export function defaultDay(now = new Date()): string {
  return new Date(now.getTime() - DAY_MS).toISOString().slice(0, 10);
}

export async function reconcileDay(
  config: Pick<Config, 'adminKeys' | 'upstreams' | 'costReportFetch'>,
  logStore: LogStore,
  day: string,
  now = new Date(),
): Promise<Reconciliation> {
  const from = `${day}T00:00:00.000Z`;
  const to = new Date(Date.parse(from) + DAY_MS).toISOString();
  // A provider's report for a day keeps changing until about a day after it ends.
  const final = now.getTime() >= Date.parse(to) + DAY_MS;
  const configured = config.adminKeys.configured;
  const bounds = { ...DEFAULT_FETCH_BOUNDS, ...config.costReportFetch };
  const rows = await logStore.loggedCosts(from, to, configured);
  const providers = await Promise.all(
    configured.map(async (provider): Promise<ProviderReconciliation> => {
      const mine = rows.filter((r) => r.provider === provider);
      const origin = config.upstreams[provider];
      try {
        if (origin === undefined) throw new CostReportError(`no origin configured for ${provider}`);
        const bill = await fetchCostReport(provider, origin, config.adminKeys, day, bounds);
        return compareDay(provider, mine, bill, final);
      } catch (err) {
        if (!(err instanceof CostReportError)) throw err;
        const keyrelay = compareDay(provider, mine, [], final);
        return {
          ...keyrelay,
          error: config.adminKeys.redact(err.message),
          provider_cost_usd: null,
          difference_usd: null,
          agrees: null,
          models: keyrelay.models.map((m) => ({ ...m, reasons: [] })),
        };
      }
    }),
  );
  return {
    day,
    final,
    providers,
    not_configured: BILLING_PROVIDERS.filter((p) => !configured.includes(p)),
  };
}

const usd = (n: number | null) => (n === null ? '-' : `$${n.toFixed(4)}`);
const signed = (n: number | null) => (n === null ? '-' : `${n >= 0 ? '+' : '-'}$${Math.abs(n).toFixed(4)}`);

export function formatReconciliation(r: Reconciliation): string {
  const lines = [
    `reconciliation for ${r.day} (UTC)${r.final ? '' : " — the providers' reports may not be final yet"}`,
  ];
  for (const p of r.providers) {
    lines.push('');
    lines.push(
      `${p.provider}: keyrelay ${usd(p.keyrelay_cost_usd)}  billed ${usd(p.provider_cost_usd)}  difference ${signed(p.difference_usd)}` +
        (p.agrees === null ? '' : p.agrees ? '  (agrees)' : '  (drift)'),
    );
    if (p.error !== null) lines.push(`  could not read the bill: ${p.error}`);
    for (const m of p.models) {
      lines.push(
        `  ${(m.model ?? '(no model)').padEnd(32)} ${String(m.keyrelay.requests).padStart(7)} calls  ` +
          `keyrelay ${usd(m.keyrelay.cost_usd).padStart(10)}  billed ${usd(p.error === null ? m.provider.cost_usd : null).padStart(10)}  ` +
          `difference ${p.error === null ? signed(m.difference_usd) : '-'}`,
      );
      for (const reason of m.reasons) lines.push(`      ${reason}`);
    }
  }
  for (const p of r.not_configured) lines.push('', `${p}: not compared (no admin key in the environment)`);
  return lines.join('\n');
}
