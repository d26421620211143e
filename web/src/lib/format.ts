/** Display formatting. Unknown values say so: a null cost is "unpriced", never $0. */
import type { Provider } from '../api.js';

export function formatCost(usd: number | null | undefined): string {
  if (usd === null || usd === undefined) return 'unpriced';
  if (usd === 0) return '$0.00';
  if (Math.abs(usd) >= 1) return `$${usd.toFixed(2)}`;
  if (Math.abs(usd) >= 0.01) return `$${usd.toFixed(4)}`;
  return `$${usd.toPrecision(3).replace(/0+$/, '').replace(/\.$/, '')}`;
}

export function formatNumber(n: number | null | undefined): string {
  if (n === null || n === undefined) return '—';
  return n.toLocaleString('en-US');
}

export function formatCompact(n: number): string {
  return new Intl.NumberFormat('en-US', { notation: 'compact', maximumFractionDigits: 1 }).format(n);
}

export function formatMs(ms: number | null | undefined): string {
  if (ms === null || ms === undefined) return '—';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(ms < 10_000 ? 2 : 1)} s`;
  return `${Math.floor(ms / 60_000)} min ${Math.round((ms % 60_000) / 1000)} s`;
}

export function formatBytes(n: number): string {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KB`;
  return `${(n / 1024 / 1024).toFixed(1)} MB`;
}

export function formatDateTime(iso: string | null | undefined): string {
  if (!iso) return '—';
  const d = new Date(iso);
  return d.toLocaleString('en-US', {
    month: 'short',
    day: 'numeric',
    hour: '2-digit',
    minute: '2-digit',
    second: '2-digit',
    hour12: false,
  });
}

export function formatDate(iso: string | null | undefined): string {
  if (!iso) return '—';
  return new Date(iso).toLocaleDateString('en-US', { month: 'short', day: 'numeric', year: 'numeric' });
}

export function formatRelative(iso: string | null | undefined, now = Date.now()): string {
  if (!iso) return 'never';
  const diff = now - new Date(iso).getTime();
  const future = diff < 0;
  const s = Math.abs(diff) / 1000;
  let text: string;
  if (s < 45) text = 'just now';
  else if (s < 90 * 60) text = `${Math.round(s / 60)} min`;
  else if (s < 36 * 3600) text = `${Math.round(s / 3600)} h`;
  else text = `${Math.round(s / 86400)} d`;
  if (text === 'just now') return text;
  return future ? `in ${text}` : `${text} ago`;
}

export const OUTCOME_LABELS: Record<string, string> = {
  ok: 'OK',
  upstream_error: 'Upstream error',
  client_aborted: 'Client aborted',
  timeout: 'Timeout',
  refused: 'Refused',
};

/** The built-in providers, by their label; a named upstream (KEYRELAY_UPSTREAMS) is labelled by its name. */
export const PROVIDER_LABELS: Readonly<Record<Provider, string>> = {
  openai: 'OpenAI',
  anthropic: 'Anthropic',
};

export const providerLabel = (p: Provider): string => PROVIDER_LABELS[p] ?? p;

/** Every provider this deployment proxies: the built-ins, then its named upstreams. */
export function providerIds(info: { upstreams: readonly { name: string }[] }): Provider[] {
  return [...Object.keys(PROVIDER_LABELS), ...info.upstreams.map((u) => u.name)];
}

/** A wait the server asked for (retry-after seconds), as a person says it: "15 minutes", "40 seconds". */
export function formatWait(seconds: number): string {
  const s = Math.max(1, Math.ceil(seconds));
  if (s < 60) return `${s} second${s === 1 ? '' : 's'}`;
  const m = Math.ceil(s / 60);
  if (m < 60) return `${m} minute${m === 1 ? '' : 's'}`;
  const h = Math.ceil(m / 60);
  return `${h} hour${h === 1 ? '' : 's'}`;
}

/** A cost that leaves out a fee the price library has no rate for (docs/pricing.md): at least this much. */
export function isPartial(r: { price_source: string | null }): boolean {
  return r.price_source?.startsWith('partial:') === true;
}

/** The price library's price keys and keyrelay's tool fees, as the cost breakdown names them. */
export const COST_PART_LABELS: Record<string, string> = {
  input_mtok: 'Input',
  cache_read_mtok: 'Cache read',
  cache_write_mtok: 'Cache write (5 min)',
  cache_write_1h_mtok: 'Cache write (1 h)',
  output_mtok: 'Output',
  input_audio_mtok: 'Audio input',
  cache_audio_read_mtok: 'Audio cache read',
  output_audio_mtok: 'Audio output',
  input_image_mtok: 'Image input',
  cache_image_read_mtok: 'Image cache read',
  output_image_mtok: 'Image output',
  web_searches_kcount: 'Web searches',
  storage_searches_kcount: 'File searches',
  requests_kcount: 'Request fee',
  web_searches: 'Web searches',
  storage_searches: 'File searches',
  web_fetches: 'Web fetches',
  code_execution_containers: 'Code execution containers',
  code_interpreter_containers: 'Code interpreter containers',
  image_generations: 'Generated images',
};

/** A rate as the price list says it: "$3 / 1M", "$10 / 1K". */
export function formatRate(rate: number | null, per: number): string {
  if (rate === null) return 'no price';
  const unit = per === 1e6 ? ' / 1M' : per === 1e3 ? ' / 1K' : per === 1 ? ' each' : ` / ${per}`;
  return `$${Number(rate.toPrecision(6))}${unit}`;
}

/** A wait in its two largest units, as the proxy's refusals say it: "45 s", "3 min 20 s", "15 h 6 min". */
export function formatWaitShort(seconds: number): string {
  let rest = Math.max(1, Math.ceil(seconds));
  const units: [string, number][] = [
    ['d', 86_400],
    ['h', 3_600],
    ['min', 60],
    ['s', 1],
  ];
  const first = units.findIndex(([, size]) => rest >= size);
  const parts: string[] = [];
  for (const [name, size] of units.slice(first, first + 2)) {
    const n = Math.floor(rest / size);
    rest -= n * size;
    if (n > 0) parts.push(`${n} ${name}`);
  }
  return parts.join(' ');
}

/** A call's cost as a row shows it: "—" for one never billed (refused, or billed nothing), "+" when partial. */
export function callCostText(r: {
  cost_usd: number | null;
  outcome: string;
  price_source: string | null;
}): string {
  if (r.cost_usd === null && (r.outcome === 'refused' || r.price_source?.startsWith('not billed')))
    return '—';
  return isPartial(r) ? `${formatCost(r.cost_usd)}+` : formatCost(r.cost_usd);
}
