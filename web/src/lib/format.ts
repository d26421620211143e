/** Display formatting. Unknown values say so: a null cost is "unpriced", never $0. */

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

export const PROVIDER_LABELS: Record<string, string> = { openai: 'OpenAI', anthropic: 'Anthropic' };

/** A wait the server asked for (retry-after seconds), as a person says it: "15 minutes", "40 seconds". */
export function formatWait(seconds: number): string {
  const s = Math.max(1, Math.ceil(seconds));
  if (s < 60) return `${s} second${s === 1 ? '' : 's'}`;
  const m = Math.ceil(s / 60);
  if (m < 60) return `${m} minute${m === 1 ? '' : 's'}`;
  const h = Math.ceil(m / 60);
  return `${h} hour${h === 1 ? '' : 's'}`;
}
