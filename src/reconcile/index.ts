/**
 * Reconciliation: keyrelay's logged cost and tokens for one UTC day beside each provider's own cost report
 * and usage report (`keyrelay reconcile`, the console's Reconcile page, GET /api/console/reconcile). Read
 * on demand, off the request path: the admin APIs are called only when someone asks, each within bounds
 * (admin-fetch.ts). Rows come from every account: the admin key reads the provider organization's whole
 * bill. Per provider API key, usage is matched through the links the install's owner made between a
 * provider's key id and a credential's fingerprint (ConfigStore.listProviderKeyLinks).
 */
import type { Config } from '../config.js';
import type { ConfigStore, LogStore } from '../store/types.js';
import { DEFAULT_FETCH_BOUNDS, ReportError } from './admin-fetch.js';
import { BILLING_PROVIDERS, type BillingProvider } from './admin-keys.js';
import { compareDay, type ProviderReconciliation, type TokenDrift } from './compare.js';
import { fetchCostReport } from './cost-report.js';
import { fetchUsageReport } from './usage-report.js';

export {
  ADMIN_KEY_VARIABLES,
  BILLING_PROVIDERS,
  type AdminKeys,
  type BillingProvider,
} from './admin-keys.js';
export {
  AGREE_USD,
  TOKEN_KINDS,
  type KeyDrift,
  type ModelDrift,
  type ProviderReconciliation,
  type TokenDrift,
} from './compare.js';
export { ReportError, type FetchBounds } from './admin-fetch.js';

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
  stores: { logStore: LogStore; configStore: Pick<ConfigStore, 'listProviderKeyLinks'> },
  day: string,
  now = new Date(),
): Promise<Reconciliation> {
  const from = `${day}T00:00:00.000Z`;
  const to = new Date(Date.parse(from) + DAY_MS).toISOString();
  // A provider's report for a day keeps changing until about a day after it ends.
  const final = now.getTime() >= Date.parse(to) + DAY_MS;
  const configured = config.adminKeys.configured;
  const bounds = { ...DEFAULT_FETCH_BOUNDS, ...config.costReportFetch };
  const [rows, links] = await Promise.all([
    stores.logStore.loggedCosts(from, to, configured),
    stores.configStore.listProviderKeyLinks(),
  ]);
  const settle = async <T>(read: () => Promise<T>): Promise<{ ok: T } | { error: string }> => {
    try {
      return { ok: await read() };
    } catch (err) {
      if (!(err instanceof ReportError)) throw err;
      return { error: config.adminKeys.redact(err.message) };
    }
  };
  const providers = await Promise.all(
    configured.map(async (provider): Promise<ProviderReconciliation> => {
      const mine = rows.filter((r) => r.provider === provider);
      const origin = config.upstreams[provider];
      const missing = { error: `no origin configured for ${provider}` };
      const [bill, usage] = await Promise.all([
        origin === undefined
          ? missing
          : settle(() => fetchCostReport(provider, origin, config.adminKeys, day, bounds)),
        origin === undefined
          ? missing
          : settle(() => fetchUsageReport(provider, origin, config.adminKeys, day, bounds)),
      ]);
      const result = compareDay(provider, mine, {
        bill: 'ok' in bill ? bill.ok : null,
        usage: 'ok' in usage ? usage.ok : null,
        links,
        final,
      });
      return {
        ...result,
        error: 'error' in bill ? bill.error : null,
        usage_error: 'error' in usage ? usage.error : null,
      };
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
const int = (n: number) => n.toLocaleString('en-US');
const signedInt = (n: number) => `${n >= 0 ? '+' : '-'}${int(Math.abs(n))}`;
const pct = (d: number | null) => (d === null ? '' : ` (${(d * 100).toFixed(1)}%)`);
const KIND_WORDS: Record<TokenDrift['kind'], string> = {
  input: 'input',
  cache_read: 'cached',
  cache_write: 'cache write',
  output: 'output',
};

function tokenLine(tokens: readonly TokenDrift[]): string {
  return tokens
    .map(
      (t) =>
        `${KIND_WORDS[t.kind]} ${int(t.keyrelay)}/${int(t.provider)}` +
        (t.difference === 0 ? '' : ` ${signedInt(t.difference)}${pct(t.drift)}`),
    )
    .join('  ');
}

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
    if (p.usage_error !== null) lines.push(`  could not read the usage report: ${p.usage_error}`);
    if (p.tokens.length > 0) lines.push(`  tokens keyrelay/provider: ${tokenLine(p.tokens)}`);
    for (const m of p.models) {
      lines.push(
        `  ${(m.model ?? '(no model)').padEnd(32)} ${String(m.keyrelay.requests).padStart(7)} calls  ` +
          `keyrelay ${usd(m.keyrelay.cost_usd).padStart(10)}  billed ${usd(p.error === null ? m.provider.cost_usd : null).padStart(10)}  ` +
          `difference ${p.error === null ? signed(m.difference_usd) : '-'}`,
      );
      if (m.tokens.length > 0) lines.push(`      tokens keyrelay/provider: ${tokenLine(m.tokens)}`);
      for (const reason of m.reasons) lines.push(`      ${reason}`);
    }
    if (p.keys.length > 0) lines.push('  by provider API key:');
    for (const k of p.keys) {
      lines.push(
        `    ${(k.api_key_id ?? '(no API key)').padEnd(30)} ` +
          (k.fingerprint === null
            ? `not linked  provider: input ${int(k.provider.input_tokens)} output ${int(k.provider.output_tokens)}`
            : `credential ${k.fingerprint.slice(0, 12)}  ${tokenLine(k.tokens)}`),
      );
      for (const reason of k.reasons) lines.push(`      ${reason}`);
    }
    for (const c of p.unlinked_credentials)
      lines.push(
        `    credential ${c.fingerprint} (${c.requests} calls through keyrelay) is linked to no provider API key`,
      );
  }
  for (const p of r.not_configured) lines.push('', `${p}: not compared (no admin key in the environment)`);
  return lines.join('\n');
}

/**
 * Ties (or, with null, unties) a provider's API key id to a credential fingerprint; returns the fingerprint it
 * was tied to before (null: none), for the audit entry both the console and the CLI write.
 */
export async function relinkProviderKey(
  store: Pick<ConfigStore, 'listProviderKeyLinks' | 'setProviderKeyLink'>,
  provider: string,
  apiKeyId: string,
  fingerprint: string | null,
): Promise<string | null> {
  const before = (await store.listProviderKeyLinks()).find(
    (l) => l.provider === provider && l.api_key_id === apiKeyId,
  );
  await store.setProviderKeyLink(provider, apiKeyId, fingerprint);
  return before?.fingerprint ?? null;
}
